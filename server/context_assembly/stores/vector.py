"""The vector store interface (SPEC §5.1 `vector://<collection>[/<doc uri>]`) and collection settings.

A collection holds documents; each is split into chunks (`stores.chunking`), and each chunk is
embedded by the collection's model (`stores.embedding`). Search modes and their `score`:

- `vector`: cosine similarity of the query and chunk embeddings, in [-1, 1]; `min_score` keeps
  hits with cosine >= min_score. A query with no word in it finds nothing.
- `keyword`: the backend's full-text rank r (SQLite FTS5 BM25, PostgreSQL ts_rank) over the chunk
  text, as r / (1 + r) in [0, 1) (higher is better, near 0 for terms most chunks contain);
  `min_score` applies to it as is.
- `hybrid`: reciprocal rank fusion (k = 60) of the vector and keyword rankings, normalised to
  0..1 by the best possible fused value (rank 1 in both lists = 1.0; rank 1 in one list only =
  0.5). A chunk enters the vector ranking when its cosine >= min_score; with min_score <= 0 any
  keyword match enters the keyword ranking (an exact term is evidence on its own), with a floor
  only keyword matches that also cleared it. A hit's `score` is the normalised fused value.

Settings live in `.codebolt/vectordb/<collection>/collection.json`
(`{embedding_model, dimension, chunk_size, chunk_overlap, search_mode}`), created with defaults on
the first write; `search_mode` is what `search(mode=None)` uses. The database's claim (the model a
collection was first written with, committed in its first write's transaction) decides the model:
the file is written only once that claim has committed, and follows it (`settings_of_claim`).
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypedDict, runtime_checkable

import orjson
from attrs import asdict, evolve, field, frozen

from ..errors import InvalidParamsError, StorageError
from ..workspace.atomic import fsync_directory, write_atomic
from .embedding import default_embedder_name, embedder_dimension
from .interfaces import StagedWrites
from .uri import render

SEARCH_MODES = ("vector", "hybrid", "keyword")
SETTINGS_FILE = "collection.json"
RRF_K = 60

_COLLECTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
MAX_DOC_URI = 2048


class VectorHit(TypedDict):
    id: str  # "<collection>/<doc_uri>#<ord>"
    doc_uri: str
    chunk: int
    text: str
    score: float
    metadata: dict[str, Any]
    source: str  # "vector://<collection>/<doc_uri>"


# Module-level aliases: inside a store class, `list` names the method.
DocBatch = list[tuple[str, str, dict[str, Any]]]  # (doc_uri, text, metadata)
Hits = list[VectorHit]
Records = list[dict[str, Any]]


@runtime_checkable
class VectorStore(Protocol):
    def settings(self, collection: str, model: str | None = None) -> CollectionSettings:
        """The collection's settings, created on first use (with `model` when given)."""
        ...

    def stage_settings(self, collections: Mapping[str, str | Mapping[str, Any] | None]) -> StagedWrites:
        """Settings of collections without a settings file (name -> model or the settings wanted,
        None: the stored or the default model), used by this thread's writes but written only by
        `commit()`."""
        ...

    def upsert(self, collection: str, doc_uri: str, text: str, metadata: dict[str, Any]) -> dict[str, Any]:
        """Chunk, embed and store one document, replacing its previous chunks atomically.

        Returns `{"collection", "doc_uri", "chunks": n}`."""
        ...

    def upsert_many(self, collection: str, docs: DocBatch) -> dict[str, Any]:
        """Bulk `upsert` of `(doc_uri, text, metadata)` in one transaction.

        Returns `{"collection", "documents": n, "chunks": n}`."""
        ...

    def delete(self, collection: str, doc_uri: str) -> bool:
        """False when there was no such document."""
        ...

    def get(self, collection: str, doc_uri: str) -> dict[str, Any] | None:
        """`{"collection", "doc_uri", "text", "metadata", "updated", "chunks"}`, or None."""
        ...

    def search(self, collection: str, query: str, top_k: int = 5, min_score: float = 0.0,
               mode: str | None = "vector", admit: Admit | None = None) -> Hits:
        """Best hits first; an unknown collection gives []. `mode=None`: the collection's setting.
        `admit`: which documents a restricted caller may see (source URI, metadata); the others
        are left out before anything is ranked, cut or fused."""
        ...

    def list(self, collection: str | None = None) -> Records:
        """The collection's documents, or all collections when `collection` is None."""
        ...

    def prepare(self, collection: str, keyword: bool = False) -> bool:
        """Load what searching the collection reads (its embedding model and, where the backend
        keeps them in this process, its vectors and, with `keyword`, its keyword index), so that a
        first search does not; False when the collection holds nothing yet."""
        ...

    def generation(self) -> int:
        """Counts writes to any collection, in any process."""
        ...


def validate_collection(name: object) -> str:
    if not isinstance(name, str) or not _COLLECTION.fullmatch(name):
        raise InvalidParamsError(
            "a collection name is 1-128 letters, digits, '_', '.', '-', starting with a letter or digit",
            [{"path": "/collection", "message": f"invalid collection name {name!r}"}])
    return name


def validate_doc_uri(doc_uri: object) -> str:
    if not isinstance(doc_uri, str) or not doc_uri or len(doc_uri) > MAX_DOC_URI or "\x00" in doc_uri:
        raise InvalidParamsError(
            f"a document uri is a non-empty string of at most {MAX_DOC_URI} characters",
            [{"path": "/doc_uri", "message": f"invalid document uri {doc_uri!r}"}])
    return doc_uri


def hit_id(collection: str, doc_uri: str, ord_: int) -> str:
    return f"{collection}/{doc_uri}#{ord_}"


# (a hit's source URI, its document's metadata) -> may the caller see it
Admit = Callable[[str, Any], bool]


def source_uri(collection: str, doc_uri: str) -> str:
    """A hit's source: the document's URI, each part encoded (it names that document, and no other)."""
    return render("vector", (collection, doc_uri))


def _check_mode(_instance: object, _attribute: object, value: str) -> None:
    if value not in SEARCH_MODES:
        raise ValueError(f"search_mode must be one of {', '.join(SEARCH_MODES)}")


@frozen
class CollectionSettings:
    embedding_model: str
    dimension: int
    chunk_size: int = 512
    chunk_overlap: int = 64
    search_mode: str = field(default="vector", validator=_check_mode)

    def __attrs_post_init__(self) -> None:
        if self.chunk_size < 1 or not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError("need chunk_size >= 1 and 0 <= chunk_overlap < chunk_size")
        if embedder_dimension(self.embedding_model) != self.dimension:
            raise ValueError(f"model {self.embedding_model!r} has dimension "
                             f"{embedder_dimension(self.embedding_model)}, not {self.dimension}")

    @classmethod
    def defaults(cls, embedding_model: str | None = None) -> CollectionSettings:
        model = embedding_model or default_embedder_name()
        return cls(model, embedder_dimension(model))

    @classmethod
    def from_json(cls, data: object, default_model: str | None = None) -> CollectionSettings:
        """Missing keys take the defaults (the dimension follows the model)."""
        if not isinstance(data, dict):
            raise ValueError("collection settings must be a JSON object")
        model = data.get("embedding_model") or default_model or default_embedder_name()
        if not isinstance(model, str):
            raise ValueError("embedding_model must be a string")
        values = {"embedding_model": model, "dimension": data.get("dimension", embedder_dimension(model))}
        for key in ("chunk_size", "chunk_overlap", "search_mode"):
            if key in data:
                values[key] = data[key]
        for key in ("dimension", "chunk_size", "chunk_overlap"):
            if type(values.get(key, 0)) is not int:
                raise ValueError(f"{key} must be an integer")
        return cls(**values)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2) + b"\n"


def settings_path(vectordb_dir: Path, collection: str) -> Path:
    return vectordb_dir / validate_collection(collection) / SETTINGS_FILE


def read_settings(vectordb_dir: Path, collection: str, default_model: str | None = None) -> CollectionSettings | None:
    """The collection's settings, or None when it has no settings file."""
    path = settings_path(vectordb_dir, collection)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}", {"path": str(path)}) from exc
    try:
        return CollectionSettings.from_json(orjson.loads(raw), default_model)
    except (orjson.JSONDecodeError, ValueError, TypeError, StorageError) as exc:
        raise StorageError(f"invalid collection settings {path}: {exc}", {"path": str(path)}) from exc


def settings_of_claim(vectordb_dir: Path, collection: str, claimed: tuple[str, int] | None,
                      preferred: CollectionSettings) -> CollectionSettings:
    """The settings file made to agree with the collection's committed claim (the model the
    database holds; None: nothing committed yet) once that claim has committed, and returned.

    A missing file is created, from `preferred` when it names the claimed model (or nothing is
    claimed), else with the claimed model and `preferred`'s chunking. A file that names another
    model than the claim is replaced likewise, its chunking kept: it can only come from a writer
    that lost the race to claim the collection (the database decided, so the file follows). Without
    a claim, an existing file stays (first writer wins)."""
    path = settings_path(vectordb_dir, collection)

    def following(base: CollectionSettings) -> CollectionSettings:
        if claimed is None or (base.embedding_model, base.dimension) == claimed:
            return base
        return evolve(base, embedding_model=claimed[0], dimension=claimed[1])

    existing = read_settings(vectordb_dir, collection)
    if existing is None:
        _link_new(path, following(preferred))
        existing = read_settings(vectordb_dir, collection)
        if existing is None:
            raise StorageError(f"{path} vanished right after it was created", {"path": str(path)})
    wanted = following(existing)
    if wanted != existing:
        write_atomic(path, wanted.to_json())
    return wanted


def _link_new(path: Path, settings: CollectionSettings) -> None:
    """Create the settings file unless one exists (a hard link never replaces a file)."""
    tmp = path.with_name(f".{SETTINGS_FILE}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_synced(tmp, settings.to_json())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
        fsync_directory(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot create {path}: {exc}", {"path": str(path)}) from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _write_synced(path: Path, data: bytes) -> None:
    # On disk before it is linked into place: a crash never leaves a torn settings file.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
