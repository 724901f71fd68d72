"""The backend-neutral vector store: collections, chunking, embedding, search modes, hybrid fusion.

`VectorCollections` implements `VectorStore` over any `VectorIndex` (embedded SQLite + numpy, or
PostgreSQL + pgvector), so both backends chunk, embed, fuse and score alike: a hit's `score` means
the same whichever backend answered (see `stores.vector` for the scales).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from attrs import evolve, frozen

from ..errors import ConflictError, InvalidParamsError, StorageError
from ..limits import current
from .chunking import chunk_text
from .embedding import Matrix, get_embedder
from .vector import (
    RRF_K,
    SEARCH_MODES,
    Admit,
    CollectionSettings,
    DocBatch,
    Hits,
    Records,
    hit_id,
    read_settings,
    settings_of_claim,
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

    The database decides a collection's model: its claim, committed by the collection's first write
    (or by `settings`), names it once and for all. The settings file is written only after that
    claim has committed, and from it, so a file never names a model that a write racing in another
    process (a `memory import` creating the collection, say) then claims otherwise. In a folder that
    has no file yet (a second checkout sharing a server database), the claim gives the file.
    """

    def __init__(self, index: VectorIndex, vectordb_dir: Path | str, default_model: str | None = None) -> None:
        self.index = index
        self._dir = Path(vectordb_dir)
        self._default_model = default_model
        self._staged = threading.local()  # this thread's staged settings: collection -> settings

    # --- settings ------------------------------------------------------------------------------

    def settings(self, collection: str, model: str | None = None) -> CollectionSettings:
        """The collection's settings: this thread's staged ones (`stage_settings`), else its
        settings file's, else those of the model the database holds, the file then written from it.
        A collection that holds nothing yet is claimed first, with `model` (else the default model),
        in a transaction of its own, so that later writes in any process use that model: that waits
        for a writer holding the database (an import creating the collection), and whoever committed
        a claim first decides the model, which is then what this returns, whatever `model` asked."""
        validate_collection(collection)
        found, pending = self._settings_for_write(collection, model)
        if not pending:
            return found
        with contextlib.suppress(ConflictError):  # claimed meanwhile with another model: that one holds
            self.index.upsert(collection, found.embedding_model, found.dimension, [])
        return settings_of_claim(self._dir, collection, self.index.claimed_model(collection), found)

    def _settings_for_write(self, collection: str, model: str | None = None) -> tuple[CollectionSettings, bool]:
        """(settings, pending): this thread's staged settings, the file's, or the committed claim's
        (the file written from it when missing); else (pending) defaults with `model`, to be claimed
        by the write, which writes nothing to the file before its claim commits."""
        staged = getattr(self._staged, "settings", {}).get(collection)
        if staged is not None:  # this thread's import: its own model, whatever a file says meanwhile
            if collection in getattr(self._staged, "unnamed", ()):  # no model named: the held one follows
                claimed = self.index.claimed_model(collection)  # a claim committed since it was staged
                if claimed is not None and claimed != (staged.embedding_model, staged.dimension):
                    staged = evolve(staged, embedding_model=claimed[0], dimension=claimed[1])
                    self._staged.settings[collection] = staged
            return staged, False
        existing = read_settings(self._dir, collection, self._default_model)
        if existing is not None:
            return existing, False
        preferred = CollectionSettings.defaults(model or self._default_model)
        claimed = self.index.claimed_model(collection)
        if claimed is None:
            return preferred, True
        return settings_of_claim(self._dir, collection, claimed, preferred), False

    def stage_settings(self, collections: Mapping[str, str | Mapping[str, Any] | None]) -> StagedSettings:
        """The settings of those `collections` (name -> model, or the settings wanted: an export's
        `{embedding_model, chunk_size, chunk_overlap, search_mode}`; None or no model: the stored or
        default one) that have no settings file, held for this thread's writes instead of written:
        `commit()` writes the files once the writes have committed (following the claims then
        committed), `discard()` forgets them. So writes that roll back leave no new settings file."""
        held: dict[str, CollectionSettings] = {}
        wanted = {name: ({"embedding_model": given} if not isinstance(given, Mapping) else dict(given))
                  for name, given in collections.items()}
        for name, settings in wanted.items():
            if read_settings(self._dir, validate_collection(name), self._default_model) is None:
                claimed = self.index.claimed_model(name)
                model = settings.get("embedding_model") or (claimed[0] if claimed else self._default_model)
                held[name] = CollectionSettings.from_json({**settings, "embedding_model": model}, model)
        self._staged.settings = held
        self._staged.unnamed = {name for name, settings in wanted.items() if not settings.get("embedding_model")}
        return StagedSettings(self, held)

    # --- writes --------------------------------------------------------------------------------

    def upsert(self, collection: str, doc_uri: str, text: str, metadata: dict[str, Any]) -> dict[str, Any]:
        result = self.upsert_many(collection, [(doc_uri, text, metadata)])
        return {"collection": collection, "doc_uri": doc_uri, "chunks": result["chunks"]}

    def upsert_many(self, collection: str, docs: DocBatch) -> dict[str, Any]:
        """A collection that holds nothing yet is claimed by this write's transaction with the
        default model. When another process claimed it meanwhile (an import creating it with
        another model), the documents are embedded again with that model and written: the write
        waits for the import and follows it. The settings file is written once the claim has
        committed, never before."""
        validate_collection(collection)
        prepared = _prepare(docs)
        settings, pending = self._settings_for_write(collection)
        self._check_claim(collection, settings)
        try:
            chunks = self._embed_and_store(collection, settings, prepared)
        except ConflictError:
            claimed = self.index.claimed_model(collection) if pending else None
            if claimed is None:
                raise
            settings = settings_of_claim(self._dir, collection, claimed, settings)
            self._check_claim(collection, settings)
            chunks = self._embed_and_store(collection, settings, prepared)  # a claim never changes: once
        else:
            if pending:  # this write made the claim: the file follows it now it has committed
                settings_of_claim(self._dir, collection, self.index.claimed_model(collection), settings)
        return {"collection": collection, "documents": len(prepared), "chunks": chunks}

    def _embed_and_store(self, collection: str, settings: CollectionSettings, prepared: list[_Doc]) -> int:
        """Chunk and embed `prepared` with `settings`, then write them; the number of chunks."""
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
        return row

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
               mode: str | None = "vector", admit: Admit | None = None) -> Hits:
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
        if admit is not None:
            return self._hits(collection, self._admitted(collection, query, top_k, min_score, mode, admit))
        if mode == "vector":
            ranked = self._vector(collection, query, top_k, min_score)
        elif mode == "keyword":
            ranked = [(i, s) for i, s in self._keyword(collection, query, top_k) if s >= min_score]
        else:
            ranked = self._hybrid(collection, query, top_k, min_score)
        return self._hits(collection, ranked)

    # --- search legs ---------------------------------------------------------------------------

    def _vector(self, collection: str, query: str, limit: int, min_score: float) -> Ranked:
        q = self._embedded_query(collection, query)
        return [] if q is None else self.index.nearest(collection, q, limit, min_score)

    def _embedded_query(self, collection: str, query: str) -> Matrix | None:
        """The query in the collection's model (None: nothing to search for)."""
        if not HAS_ALNUM.search(query):
            return None
        claimed = self.index.claimed_model(collection)
        if claimed is None:
            return None
        q = get_embedder(claimed[0]).embed([query])[0]
        return q if q.any() else None

    def _keyword(self, collection: str, query: str, limit: int) -> Ranked:
        """Full-text ranks mapped to [0, 1): r / (1 + r), the same order whatever the backend's scale."""
        terms = fts_terms(query)
        if not terms:
            return []
        return [(i, s / (1.0 + s)) for i, s in self.index.full_text(collection, terms, limit)]

    def _hybrid(self, collection: str, query: str, top_k: int, min_score: float) -> Ranked:
        pool = max(HYBRID_POOL, 4 * top_k)
        return _fused(self._vector(collection, query, pool, min_score), self._keyword(collection, query, pool),
                      top_k, min_score)

    def _admitted(self, collection: str, query: str, top_k: int, min_score: float, mode: str,
                  admit: Admit) -> Ranked:
        """A restricted caller's search: each leg ranked over the documents it may see only, so
        neither what is cut nor a fused score depends on the others. A leg is read deeper (x4)
        until it holds enough admitted hits or the collection has no more; `admit` is asked once
        per document. Keyword scores still weigh terms by the whole collection (BM25's document
        frequencies)."""
        wanted = top_k if mode != "hybrid" else max(HYBRID_POOL, 4 * top_k)
        admitted = _Admitted(self.index, collection, admit)

        def leg(fetch: Callable[[int], Ranked]) -> Ranked:
            depth = max(HYBRID_POOL, 4 * wanted)
            while True:
                ranked = fetch(depth)
                kept = admitted.of(ranked)
                if len(kept) >= wanted or len(ranked) < depth:  # enough, or nothing more to read
                    return kept
                depth *= 4

        q = self._embedded_query(collection, query) if mode != "keyword" else None
        cosine = leg(lambda k: self.index.nearest(collection, q, k, min_score)) if q is not None else []
        if mode == "vector":
            return cosine[:top_k]
        keyword = leg(lambda k: self._keyword(collection, query, k))
        if mode == "keyword":
            return [(i, s) for i, s in keyword if s >= min_score][:top_k]
        return _fused(cosine[:wanted], keyword[:wanted], top_k, min_score)

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
        if claimed is None or claimed == (settings.embedding_model, settings.dimension):
            return
        staged = getattr(self._staged, "settings", {}).get(collection) is settings
        named_by = ("this import names" if staged else
                    f"{settings_path(self._dir, collection)} names")
        raise ConflictError(
            f"collection {collection!r} holds {claimed[0]} embeddings ({claimed[1]} dimensions), the model it was "
            f"first written with, but {named_by} {settings.embedding_model} ({settings.dimension}); "
            "re-create the collection to change its model",
            {"collection": collection, "stored_model": claimed[0], "settings_model": settings.embedding_model})


class StagedSettings:
    """Collection settings `VectorCollections.stage_settings` holds back until `commit`."""

    def __init__(self, collections: VectorCollections, held: dict[str, CollectionSettings]) -> None:
        self._collections, self._held = collections, held

    def commit(self) -> int:
        """Write the held settings files, once the writes using them have committed: each follows
        its collection's claim as committed now (a file another process wrote meanwhile with another
        model is replaced)."""
        try:
            index, folder = self._collections.index, self._collections._dir
            for name, settings in self._held.items():
                settings_of_claim(folder, name, index.claimed_model(name), settings)
            return len(self._held)
        finally:
            self.discard()

    def discard(self) -> None:
        self._collections._staged.settings = {}
        self._collections._staged.unnamed = set()
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


def _fused(vector: Ranked, keyword: Ranked, top_k: int, min_score: float) -> Ranked:
    """Reciprocal-rank fusion of the two legs, scaled so a hit first in both scores 1."""
    fused: dict[int, float] = {}
    cosine = dict(vector)
    # with a floor, a keyword-only hit must also clear it (an irrelevant 0.05 hit stays out)
    words = [i for i, _ in keyword if min_score <= 0 or i in cosine]
    for leg in (list(cosine), words):
        for rank, chunk_id in enumerate(leg, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (RRF_K + rank)
    best = 2.0 / (RRF_K + 1)
    order = sorted(fused, key=lambda i: (-fused[i], -cosine.get(i, -2.0), i))[:top_k]
    return [(i, min(1.0, fused[i] / best)) for i in order]


class _Admitted:
    """Which chunks of a collection a restricted caller may see, asked once per document."""

    def __init__(self, index: VectorIndex, collection: str, admit: Admit) -> None:
        self.index, self.collection, self.admit = index, collection, admit
        self.chunks: dict[int, bool] = {}
        self.documents: dict[str, bool] = {}

    def of(self, ranked: Ranked) -> Ranked:
        """`ranked` without the chunks the caller may not see (nor those deleted meanwhile)."""
        unseen = [i for i, _ in ranked if i not in self.chunks]
        for chunk_id, row in self.index.chunks(unseen, text=False).items():
            if row.doc_uri not in self.documents:
                self.documents[row.doc_uri] = self.admit(source_uri(self.collection, row.doc_uri), row.metadata)
            self.chunks[chunk_id] = self.documents[row.doc_uri]
        return [(i, s) for i, s in ranked if self.chunks.get(i)]
