"""The backend-neutral vector store: collections, chunking, embedding, search modes, hybrid fusion.

`VectorCollections` implements `VectorStore` over any `VectorIndex` (embedded SQLite + numpy, or
PostgreSQL + pgvector), so both backends chunk, embed, fuse and score alike: a hit's `score` means
the same whichever backend answered (see `stores.vector` for the scales).
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from attrs import frozen

from ..errors import ConflictError, InvalidParamsError, StorageError
from ..limits import current
from .chunking import chunk_text
from .embedding import Matrix, get_embedder
from .vector import (
    RRF_K,
    SEARCH_MODES,
    CollectionSettings,
    DocBatch,
    Hits,
    Records,
    ensure_settings,
    hit_id,
    read_settings,
    settings_path,
    source_uri,
    validate_collection,
    validate_doc_uri,
)
from .vector_index import IndexedDoc, Ranked, VectorIndex

EMBED_BATCH = 4096  # texts per embed call in bulk loads: bounds the padded token tensors
MAX_FTS_TERMS = 32
HYBRID_POOL = 50  # candidates per leg before fusion (at least 4 x top_k)

_TERM = re.compile(r"\w+")
HAS_ALNUM = re.compile(r"[^\W_]")


def fts_terms(text: str) -> list[str]:
    """The distinct lower-cased words of arbitrary user text (at most MAX_FTS_TERMS)."""
    terms: dict[str, None] = {}
    for term in _TERM.findall(text.lower()):
        if HAS_ALNUM.search(term):
            terms.setdefault(term, None)
            if len(terms) == MAX_FTS_TERMS:
                break
    return list(terms)


@frozen
class _Doc:
    doc_uri: str
    text: str
    metadata_json: str


class VectorCollections:
    """`VectorStore` over a `VectorIndex`; collection settings files under `vectordb_dir`.

    A collection's settings file is created on its first write. In a folder that has none yet (a
    second checkout sharing a server database), the model the index already holds is the default,
    so two folders agree on a collection's model without copying files.
    """

    def __init__(self, index: VectorIndex, vectordb_dir: Path | str, default_model: str | None = None) -> None:
        self.index = index
        self._dir = Path(vectordb_dir)
        self._default_model = default_model
        self._staged = threading.local()  # this thread's staged settings: collection -> settings

    # --- settings ------------------------------------------------------------------------------

    def settings(self, collection: str, model: str | None = None) -> CollectionSettings:
        """The collection's settings, created (with `model`, else the stored or default model) if missing."""
        validate_collection(collection)
        existing = read_settings(self._dir, collection, self._default_model)
        if existing is not None:
            return existing
        staged = getattr(self._staged, "settings", {}).get(collection)
        if staged is not None:
            return staged
        claimed = self.index.claimed_model(collection)
        return ensure_settings(self._dir, collection, model or (claimed[0] if claimed else self._default_model))

    def stage_settings(self, collections: dict[str, str | None]) -> StagedSettings:
        """The settings of those `collections` (name -> model, None: the stored or default one) that
        have no settings file, held for this thread's writes instead of written: `commit()` writes
        the files, `discard()` forgets them. So writes that roll back leave no new settings file."""
        held: dict[str, CollectionSettings] = {}
        for name, model in collections.items():
            if read_settings(self._dir, validate_collection(name), self._default_model) is None:
                claimed = self.index.claimed_model(name)
                held[name] = CollectionSettings.defaults(model or (claimed[0] if claimed else self._default_model))
        self._staged.settings = held
        return StagedSettings(self, held)

    # --- writes --------------------------------------------------------------------------------

    def upsert(self, collection: str, doc_uri: str, text: str, metadata: dict[str, Any]) -> dict[str, Any]:
        result = self.upsert_many(collection, [(doc_uri, text, metadata)])
        return {"collection": collection, "doc_uri": doc_uri, "chunks": result["chunks"]}

    def upsert_many(self, collection: str, docs: DocBatch) -> dict[str, Any]:
        validate_collection(collection)
        prepared = _prepare(docs)
        settings = self.settings(collection)
        self._check_claim(collection, settings)
        embedder = get_embedder(settings.embedding_model)  # only after the check: a mismatch fails fast
        pieces = [[c.text for c in chunk_text(doc.text, settings.chunk_size, settings.chunk_overlap)]
                  for doc in prepared]
        vectors = _embed_all(embedder.embed, [text for texts in pieces for text in texts], settings.dimension)
        indexed, row = [], 0
        for doc, texts in zip(prepared, pieces, strict=True):
            indexed.append(IndexedDoc(doc.doc_uri, doc.text, doc.metadata_json, tuple(texts),
                                      vectors[row:row + len(texts)]))
            row += len(texts)
        # Embedding ran before the index's transaction: its write lock is held only for the inserts.
        self.index.upsert(collection, settings.embedding_model, settings.dimension, indexed)
        return {"collection": collection, "documents": len(prepared), "chunks": row}

    def delete(self, collection: str, doc_uri: str) -> bool:
        validate_collection(collection)
        validate_doc_uri(doc_uri)
        return self.index.delete(collection, doc_uri)

    # --- reads ---------------------------------------------------------------------------------

    def get(self, collection: str, doc_uri: str) -> dict[str, Any] | None:
        validate_collection(collection)
        validate_doc_uri(doc_uri)
        return self.index.document(collection, doc_uri)

    def list(self, collection: str | None = None) -> Records:
        if collection is not None:
            return self.index.documents(validate_collection(collection))
        found = {c["collection"]: c for c in self.index.collections()}
        if self._dir.is_dir():  # collections that have settings but no document yet
            for entry in self._dir.iterdir():
                if entry.name in found or not (entry / "collection.json").is_file():
                    continue
                try:
                    settings = read_settings(self._dir, entry.name, self._default_model)
                except (StorageError, InvalidParamsError):
                    continue
                if settings is not None:
                    found[entry.name] = {"collection": entry.name, "embedding_model": settings.embedding_model,
                                         "dimension": settings.dimension, "documents": 0, "chunks": 0}
        return [found[name] for name in sorted(found)]

    def generation(self) -> int:
        return self.index.generation()

    def prepare(self, collection: str, keyword: bool = False) -> bool:
        validate_collection(collection)
        claimed = self.index.claimed_model(collection)
        if claimed is None:
            return False
        # Side by side: the model (~70 ms) and, on the embedded stores, the matrix (~110 ms at 100k
        # chunks, which SQLite reads and copies outside the interpreter, stored_embeddings.py).
        with ThreadPoolExecutor(1, thread_name_prefix="prepare") as pool:
            index = pool.submit(self.index.prepare, collection, keyword)
            get_embedder(claimed[0])
            index.result()
        return True

    def search(self, collection: str, query: str, top_k: int = 5, min_score: float = 0.0,
               mode: str | None = "vector") -> Hits:
        validate_collection(collection)
        _check_search(query, top_k, min_score)
        if mode is None:
            settings = read_settings(self._dir, collection, self._default_model)
            mode = settings.search_mode if settings is not None else "vector"
        if mode not in SEARCH_MODES:
            raise InvalidParamsError(f"unknown search mode {mode!r}",
                                     [{"path": "/mode", "message": f"must be one of {', '.join(SEARCH_MODES)}"}])
        if top_k == 0:
            return []
        if mode == "vector":
            ranked = self._vector(collection, query, top_k, min_score)
        elif mode == "keyword":
            ranked = [(i, s) for i, s in self._keyword(collection, query, top_k) if s >= min_score]
        else:
            ranked = self._hybrid(collection, query, top_k, min_score)
        return self._hits(collection, ranked)

    # --- search legs ---------------------------------------------------------------------------

    def _vector(self, collection: str, query: str, limit: int, min_score: float) -> Ranked:
        if not HAS_ALNUM.search(query):
            return []
        claimed = self.index.claimed_model(collection)
        if claimed is None:
            return []
        q = get_embedder(claimed[0]).embed([query])[0]
        if not q.any():
            return []
        return self.index.nearest(collection, q, limit, min_score)

    def _keyword(self, collection: str, query: str, limit: int) -> Ranked:
        """Full-text ranks mapped to [0, 1): r / (1 + r), the same order whatever the backend's scale."""
        terms = fts_terms(query)
        if not terms:
            return []
        return [(i, s / (1.0 + s)) for i, s in self.index.full_text(collection, terms, limit)]

    def _hybrid(self, collection: str, query: str, top_k: int, min_score: float) -> Ranked:
        pool = max(HYBRID_POOL, 4 * top_k)
        fused: dict[int, float] = {}
        cosine = dict(self._vector(collection, query, pool, min_score))
        # with a floor, a keyword-only hit must also clear it (an irrelevant 0.05 hit stays out)
        keyword = [i for i, _ in self._keyword(collection, query, pool) if min_score <= 0 or i in cosine]
        for leg in (list(cosine), keyword):
            for rank, chunk_id in enumerate(leg, start=1):
                fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (RRF_K + rank)
        best = 2.0 / (RRF_K + 1)
        order = sorted(fused, key=lambda i: (-fused[i], -cosine.get(i, -2.0), i))[:top_k]
        return [(i, min(1.0, fused[i] / best)) for i in order]

    def _hits(self, collection: str, ranked: Ranked) -> Hits:
        if not ranked:
            return []
        found = self.index.chunks([i for i, _ in ranked])
        hits: Hits = []
        for chunk_id, score in ranked:
            row = found.get(chunk_id)
            if row is None:
                continue  # deleted by another process since the ranking
            hits.append({"id": hit_id(collection, row.doc_uri, row.ord), "doc_uri": row.doc_uri, "chunk": row.ord,
                         "text": row.text, "score": score, "metadata": row.metadata,
                         "source": source_uri(collection, row.doc_uri)})
        return hits

    def _check_claim(self, collection: str, settings: CollectionSettings) -> None:
        claimed = self.index.claimed_model(collection)
        if claimed is not None and claimed != (settings.embedding_model, settings.dimension):
            raise ConflictError(
                f"collection {collection!r} holds {claimed[0]} embeddings ({claimed[1]} dimensions), but "
                f"{settings_path(self._dir, collection)} names {settings.embedding_model} ({settings.dimension}); "
                "re-create the collection to change its model",
                {"collection": collection, "stored_model": claimed[0], "settings_model": settings.embedding_model})


class StagedSettings:
    """Collection settings `VectorCollections.stage_settings` holds back until `commit`."""

    def __init__(self, collections: VectorCollections, held: dict[str, CollectionSettings]) -> None:
        self._collections, self._held = collections, held

    def commit(self) -> int:
        try:
            for name, settings in self._held.items():
                ensure_settings(self._collections._dir, name, settings.embedding_model)
            return len(self._held)
        finally:
            self.discard()

    def discard(self) -> None:
        self._collections._staged.settings = {}
        self._held = {}


def _prepare(docs: DocBatch) -> list[_Doc]:
    """Validate the documents; a doc_uri given twice keeps its last text (in its first place)."""
    latest: dict[str, _Doc] = {}
    for n, item in enumerate(docs):
        try:
            doc_uri, text, metadata = item
        except (TypeError, ValueError):
            raise InvalidParamsError("each document is (doc_uri, text, metadata)",
                                     [{"path": f"/docs/{n}", "message": "expected a 3-item sequence"}]) from None
        validate_doc_uri(doc_uri)
        if not isinstance(text, str):
            raise InvalidParamsError("a document's text is a string",
                                     [{"path": f"/docs/{n}/text", "message": "expected a string"}])
        if not is_utf8(text) or not is_utf8(doc_uri) or "\x00" in text:
            raise InvalidParamsError("a document is valid Unicode text",
                                     [{"path": f"/docs/{n}", "message": "contains a lone surrogate or NUL"}])
        if not isinstance(metadata, dict):
            raise InvalidParamsError("a document's metadata is an object",
                                     [{"path": f"/docs/{n}/metadata", "message": "expected an object"}])
        try:
            metadata_json = orjson.dumps(metadata).decode()
        except TypeError as exc:
            raise InvalidParamsError("metadata must be plain JSON",
                                     [{"path": f"/docs/{n}/metadata", "message": str(exc)}]) from exc
        latest[doc_uri] = _Doc(doc_uri, text, metadata_json)
    return list(latest.values())


def _embed_all(embed: Any, texts: list[str], dimension: int) -> Matrix:
    out = np.empty((len(texts), dimension), dtype=np.float32)
    for start in range(0, len(texts), EMBED_BATCH):
        batch = embed(texts[start:start + EMBED_BATCH])
        if batch.shape != (min(EMBED_BATCH, len(texts) - start), dimension):
            raise StorageError(f"the embedder returned shape {batch.shape}, expected (n, {dimension})")
        out[start:start + len(batch)] = batch
    return out


def _check_search(query: object, top_k: object, min_score: object) -> None:
    problems = []
    top = current().search_top_k
    if not isinstance(query, str) or not is_utf8(query):
        problems.append({"path": "/query", "message": "expected a string of valid Unicode"})
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 0 <= top_k <= top:
        problems.append({"path": "/top_k", "message": f"expected an integer from 0 to {top} "
                                                      "(limits.search_top_k)"})
    if not isinstance(min_score, int | float) or isinstance(min_score, bool) or min_score != min_score:
        problems.append({"path": "/min_score", "message": "expected a number"})
    if problems:
        raise InvalidParamsError("invalid search parameters", problems)


def is_utf8(text: str) -> bool:
    # A lone surrogate (e.g. from surrogateescape) cannot be stored or tokenized.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
