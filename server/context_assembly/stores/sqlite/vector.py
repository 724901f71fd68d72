"""The embedded vector store: documents, chunks and an FTS5 index in `project.db`, exact numpy search.

Tables: `vector_collections` (the model each collection was embedded with, so a collection never
mixes dimensions), `vector_documents`, `vector_chunks` (text + float32 little-endian embedding
BLOB) and `vector_chunks_fts` (FTS5, external content, kept in step by triggers) for BM25.

Search is exact: each collection's embeddings are held as one contiguous float32 matrix, scored
with a single matrix-vector product and cut with `argpartition`. The matrix is cached per process
and keyed on the collection's write generation (`generations` row `vector:<collection>`), so a
write by any process makes the next search reload it; this process's own writes patch the cached
matrix in place of a reload when nothing else wrote in between. Keyword search is exact BM25 (FTS5
`bm25()`), computed so that common query words do not make it score most of the index (see
`_bm25_split`). Score scales per mode: see `stores.vector`.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from attrs import define, frozen
from numpy.typing import NDArray

from ...errors import ConflictError, InvalidParamsError, StorageError
from ...limits import SEARCH_TOP_K
from ...workspace.layout import WorkspaceLayout
from ..chunking import chunk_text
from ..embedding import Matrix, get_embedder
from ..vector import (
    RRF_K,
    SEARCH_MODES,
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
from .database import Database

STORE = "vector"
EMBED_BATCH = 4096  # texts per embed call in bulk loads: bounds the padded token tensors
MAX_FTS_TERMS = 32
HYBRID_POOL = 50  # candidates per leg before fusion (at least 4 x top_k)
MIN_CHUNKS_TO_SPLIT = 1000  # below this, plain BM25 over every match is cheap enough
RARE_SHARE = 0.02  # a keyword in at most this share of all chunks is "rare" (see _bm25_split)
BM25_K1 = 1.2  # FTS5's bm25() constant

_BLOB = np.dtype("<f4")

# Module-level aliases: inside the class, `list` names the method.
Ranked = list[tuple[int, float]]
Ids = list[int]
Terms = list[str]
_TERM = re.compile(r"\w+")
_HAS_ALNUM = re.compile(r"[^\W_]")


def _migrate(conn: sqlite3.Connection) -> None:
    for statement in (
        "CREATE TABLE IF NOT EXISTS vector_collections (collection TEXT PRIMARY KEY, "
        "embedding_model TEXT NOT NULL, dimension INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS vector_documents (collection TEXT NOT NULL, doc_uri TEXT NOT NULL, "
        "text TEXT NOT NULL, metadata TEXT NOT NULL, updated REAL NOT NULL, PRIMARY KEY (collection, doc_uri))",
        # AUTOINCREMENT: a chunk id is never reused, so a cached id can never name another chunk.
        "CREATE TABLE IF NOT EXISTS vector_chunks (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "collection TEXT NOT NULL, doc_uri TEXT NOT NULL, ord INTEGER NOT NULL, text TEXT NOT NULL, "
        "embedding BLOB NOT NULL, UNIQUE (collection, doc_uri, ord))",
        "CREATE VIRTUAL TABLE IF NOT EXISTS vector_chunks_fts USING fts5(text, content='vector_chunks', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
        # (collection, id): loads a collection's matrix in id order without a sort, and answers the keyword
        # search's "is this chunk in the collection" from the index instead of the wide chunk rows.
        "CREATE INDEX IF NOT EXISTS vector_chunks_by_collection ON vector_chunks(collection, id)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS vector_chunks_vocab USING fts5vocab(vector_chunks_fts, row)",
        "CREATE TRIGGER IF NOT EXISTS vector_chunks_ai AFTER INSERT ON vector_chunks BEGIN "
        "INSERT INTO vector_chunks_fts(rowid, text) VALUES (new.id, new.text); END",
        "CREATE TRIGGER IF NOT EXISTS vector_chunks_ad AFTER DELETE ON vector_chunks BEGIN "
        "INSERT INTO vector_chunks_fts(vector_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    ):
        conn.execute(statement)


def _collection_store(collection: str) -> str:
    return f"{STORE}:{collection}"


def fts_terms(text: str) -> list[str]:
    """The distinct lower-cased words of arbitrary user text (at most MAX_FTS_TERMS)."""
    terms: dict[str, None] = {}
    for term in _TERM.findall(text.lower()):
        if _HAS_ALNUM.search(term):
            terms.setdefault(term, None)
            if len(terms) == MAX_FTS_TERMS:
                break
    return list(terms)


def fts_query(text: str | list[str]) -> str:
    """An FTS5 MATCH expression for arbitrary user text (or its terms): the words, each quoted, OR-ed.

    Quoting turns operators (`AND`, `NEAR`, `*`, `-`, `:`) into plain words; "" when the text has
    no word at all, and callers then skip the keyword search.
    """
    terms = fts_terms(text) if isinstance(text, str) else text
    return " OR ".join(f'"{term}"' for term in terms)


def cosine_scores(matrix: Matrix, query: Matrix) -> Matrix:
    """matrix @ query for unit rows, i.e. the cosines.

    numpy's einsum loop, not BLAS gemv: measured on a 2-core machine it streams a 100k x 256 matrix
    in ~5 ms, while OpenBLAS's threaded gemv took 10-20 ms (its threads fight for the two cores).
    """
    return np.einsum("ij,j->i", matrix, query)


@frozen
class _Index:
    """One collection's embeddings as of `generation`: row i of `matrix` is chunk `ids[i]`."""

    generation: int
    model: str
    ids: NDArray[np.int64]
    matrix: Matrix


@define
class _TermStats:
    """Chunk count and per-term document frequencies of the FTS index at one write generation."""

    generation: int
    total: int
    df: dict[str, int]

    def doc_count(self, conn: sqlite3.Connection, term: str) -> int:
        """Chunks holding `term`; 0 for a term the index tokenizes differently (it then counts as rare)."""
        count = self.df.get(term)
        if count is None:
            if len(self.df) > 100_000:
                self.df.clear()
            row = conn.execute("SELECT doc FROM vector_chunks_vocab WHERE term = ?", (term,)).fetchone()
            count = self.df[term] = int(row[0]) if row else 0
        return count


def _idf(total: int, hits: int) -> float:
    # FTS5's bm25(): log((N - n + 0.5) / (n + 0.5)), floored at 1e-6.
    return max(math.log((total - hits + 0.5) / (hits + 0.5)), 1e-6)


@frozen
class _Doc:
    doc_uri: str
    text: str
    metadata_json: str


class SqliteVectorStore:
    """`VectorStore` over the workspace database; settings files under `vectordb_dir`."""

    def __init__(self, db: Database, vectordb_dir: Path | str, default_model: str | None = None) -> None:
        self._db = db
        self._dir = Path(vectordb_dir)
        self._default_model = default_model
        self._indexes: dict[str, _Index] = {}
        self._term_stats: _TermStats | None = None
        self._lock = threading.Lock()
        db.register(STORE, _migrate)

    @classmethod
    def for_workspace(cls, layout: WorkspaceLayout, db: Database | None = None,
                      default_model: str | None = None) -> SqliteVectorStore:
        return cls(db if db is not None else Database(layout.db_path), layout.vectordb_dir, default_model)

    # --- writes ------------------------------------------------------------------------------

    def upsert(self, collection: str, doc_uri: str, text: str, metadata: dict[str, Any]) -> dict[str, Any]:
        result = self.upsert_many(collection, [(doc_uri, text, metadata)])
        return {"collection": collection, "doc_uri": doc_uri, "chunks": result["chunks"]}

    def upsert_many(self, collection: str, docs: DocBatch) -> dict[str, Any]:
        validate_collection(collection)
        prepared = _prepare(docs)
        settings = ensure_settings(self._dir, collection, self._default_model)
        self._check_model(self._db.connection(), collection, settings.embedding_model, settings.dimension)
        embedder = get_embedder(settings.embedding_model)  # only after the check: a mismatch fails fast
        pieces = [chunk_text(doc.text, settings.chunk_size, settings.chunk_overlap) for doc in prepared]
        texts = [chunk.text for chunks in pieces for chunk in chunks]
        vectors = _embed_all(embedder.embed, texts, settings.dimension)
        # Embedding ran outside the transaction: the write lock is held only for the inserts.
        now = time.time()
        with self._write() as conn:
            self._claim_model(conn, collection, settings.embedding_model, settings.dimension)
            before = _generation(conn, _collection_store(collection))
            removed: Ids = []
            new_ids: Ids = []
            row = 0
            for doc, chunks in zip(prepared, pieces, strict=True):
                removed += _delete_chunks(conn, collection, doc.doc_uri)
                conn.execute(
                    "INSERT INTO vector_documents(collection, doc_uri, text, metadata, updated) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT(collection, doc_uri) DO UPDATE SET text = excluded.text, "
                    "metadata = excluded.metadata, updated = excluded.updated",
                    (collection, doc.doc_uri, doc.text, doc.metadata_json, now))
                for chunk in chunks:
                    cursor = conn.execute(
                        "INSERT INTO vector_chunks(collection, doc_uri, ord, text, embedding) VALUES (?, ?, ?, ?, ?)",
                        (collection, doc.doc_uri, chunk.ord, chunk.text, vectors[row].tobytes()))
                    new_ids.append(int(cursor.lastrowid or 0))
                    row += 1
            self._bump(conn, collection)
        self._patch(collection, before, settings.embedding_model, removed, new_ids, vectors)
        return {"collection": collection, "documents": len(prepared), "chunks": len(texts)}

    def delete(self, collection: str, doc_uri: str) -> bool:
        validate_collection(collection)
        validate_doc_uri(doc_uri)
        with self._write() as conn:
            before = _generation(conn, _collection_store(collection))
            removed = _delete_chunks(conn, collection, doc_uri)
            gone = conn.execute("DELETE FROM vector_documents WHERE collection = ? AND doc_uri = ?",
                                (collection, doc_uri)).rowcount
            if not gone and not removed:
                return False
            self._bump(conn, collection)
            row = conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                               (collection,)).fetchone()
        if row is not None:
            self._patch(collection, before, row[0], removed, [], np.zeros((0, int(row[1])), dtype=np.float32))
        return True

    # --- reads -------------------------------------------------------------------------------

    def get(self, collection: str, doc_uri: str) -> dict[str, Any] | None:
        validate_collection(collection)
        validate_doc_uri(doc_uri)
        rows = self._db.read(
            "SELECT text, metadata, updated, (SELECT count(*) FROM vector_chunks c WHERE c.collection = d.collection "
            "AND c.doc_uri = d.doc_uri) FROM vector_documents d WHERE collection = ? AND doc_uri = ?",
            (collection, doc_uri))
        if not rows:
            return None
        text, metadata, updated, chunks = rows[0]
        return {"collection": collection, "doc_uri": doc_uri, "text": text, "metadata": orjson.loads(metadata),
                "updated": updated, "chunks": chunks}

    def list(self, collection: str | None = None) -> Records:
        if collection is None:
            return self._list_collections()
        validate_collection(collection)
        rows = self._db.read(
            "SELECT d.doc_uri, d.metadata, d.updated, length(d.text), (SELECT count(*) FROM vector_chunks c "
            "WHERE c.collection = d.collection AND c.doc_uri = d.doc_uri) FROM vector_documents d "
            "WHERE d.collection = ? ORDER BY d.doc_uri", (collection,))
        return [{"doc_uri": uri, "metadata": orjson.loads(meta), "updated": updated, "chars": chars, "chunks": n}
                for uri, meta, updated, chars, n in rows]

    def generation(self) -> int:
        return self._db.generation(STORE)

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

    # --- search legs -------------------------------------------------------------------------

    def _vector(self, collection: str, query: str, limit: int, min_score: float) -> Ranked:
        if not _HAS_ALNUM.search(query):
            return []
        index = self._index(collection)
        if index is None or not len(index.ids):
            return []
        q = get_embedder(index.model).embed([query])[0]
        if not q.any():
            return []
        scores = cosine_scores(index.matrix, q)
        n = len(scores)
        top = np.argpartition(scores, n - limit)[n - limit:] if limit < n else np.arange(n)
        top = top[scores[top] >= min_score]
        order = top[np.lexsort((index.ids[top], -scores[top]))]
        return [(int(index.ids[i]), float(scores[i])) for i in order]

    def _keyword(self, collection: str, query: str, limit: int) -> Ranked:
        terms = fts_terms(query)
        if not terms:
            return []
        try:
            stats = self._stats()
            if stats.total >= MIN_CHUNKS_TO_SPLIT:
                conn = self._db.connection()
                rare = [t for t in terms if stats.doc_count(conn, t) <= RARE_SHARE * stats.total]
                common = [t for t in terms if t not in rare]
                if rare and common:
                    ranked = self._bm25_split(collection, rare, common, limit, stats)
                    if ranked is not None:
                        return ranked
            return self._bm25(collection, fts_query(terms), limit)
        except sqlite3.Error as exc:
            raise StorageError(f"keyword search failed: {exc}") from exc

    def _bm25(self, collection: str, match: str, limit: int | None) -> Ranked:
        """(chunk id, BM25) of the collection's chunks matching `match`, best first (all when no limit)."""
        # CROSS JOIN pins the FTS match as the outer loop: left free, the planner may walk the whole
        # collection and probe the FTS index once per chunk.
        sql = ("SELECT c.id, -bm25(vector_chunks_fts) AS s FROM vector_chunks_fts "
               "CROSS JOIN vector_chunks c INDEXED BY vector_chunks_by_collection ON c.id = vector_chunks_fts.rowid "
               "WHERE vector_chunks_fts MATCH ? AND c.collection = ?")
        if limit is None:
            rows = self._db.connection().execute(sql, (match, collection)).fetchall()
        else:
            rows = self._db.connection().execute(sql + " ORDER BY s DESC, c.id LIMIT ?",
                                                 (match, collection, limit)).fetchall()
        return [(int(i), float(s)) for i, s in rows]

    def _bm25_split(self, collection: str, rare: Terms, common: Terms, limit: int,
                    stats: _TermStats) -> Ranked | None:
        """The exact BM25 top `limit` without scoring every chunk that holds a common term.

        A query word found in a quarter of a 100k-chunk index made FTS5 score ~50k rows (30-60 ms).
        Instead: score the chunks holding a rare term, over all the terms (BM25 sums per term, so
        `(rare) AND (common)` gives those chunks their full score); a chunk holding only common
        terms scores below sum(idf) * (k1 + 1), so if the limit-th score found reaches that bound,
        nothing was missed. None when it does not: the caller then runs the full query.
        """
        rare_match, common_match = fts_query(rare), fts_query(common)
        scores = dict(self._bm25(collection, rare_match, None))
        if len(scores) < limit:
            return None
        scores.update(self._bm25(collection, f"({rare_match}) AND ({common_match})", None))
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
        conn = self._db.connection()
        bound = (BM25_K1 + 1) * sum(_idf(stats.total, stats.doc_count(conn, t)) for t in common)
        return ranked if ranked[-1][1] >= bound else None

    def _stats(self) -> _TermStats:
        generation = self._db.generation(STORE)
        stats = self._term_stats
        if stats is None or stats.generation != generation:
            total = int(self._db.connection().execute("SELECT count(*) FROM vector_chunks").fetchone()[0])
            stats = self._term_stats = _TermStats(generation, total, {})
        return stats

    def _hybrid(self, collection: str, query: str, top_k: int, min_score: float) -> Ranked:
        pool = max(HYBRID_POOL, 4 * top_k)
        fused: dict[int, float] = {}
        cosine: dict[int, float] = {}
        for chunk_id, score in self._vector(collection, query, pool, min_score):
            cosine[chunk_id] = score
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
        found: dict[int, Any] = {}
        for start in range(0, len(ranked), 500):  # stay far below SQLite's bound-parameter limit
            batch = tuple(i for i, _ in ranked[start:start + 500])
            marks = ",".join("?" * len(batch))
            rows = self._db.read(
                "SELECT c.id, c.doc_uri, c.ord, c.text, d.metadata FROM vector_chunks c JOIN vector_documents d "
                f"ON d.collection = c.collection AND d.doc_uri = c.doc_uri WHERE c.id IN ({marks})", batch)
            found.update((row[0], row) for row in rows)
        hits: Hits = []
        for chunk_id, score in ranked:
            row = found.get(chunk_id)
            if row is None:
                continue  # deleted by another process since the matrix was loaded
            _, doc_uri, ord_, text, metadata = row
            hits.append({"id": hit_id(collection, doc_uri, ord_), "doc_uri": doc_uri, "chunk": ord_, "text": text,
                         "score": score, "metadata": orjson.loads(metadata),
                         "source": source_uri(collection, doc_uri)})
        return hits

    # --- the in-memory matrix ----------------------------------------------------------------

    def _index(self, collection: str) -> _Index | None:
        generation = self._db.generation(_collection_store(collection))
        index = self._indexes.get(collection)
        if index is not None and index.generation == generation:
            return index
        with self._lock:
            index = self._indexes.get(collection)
            if index is not None and index.generation == generation:
                return index
            index = self._load(collection)
            if index is None:
                self._indexes.pop(collection, None)
            else:
                self._indexes[collection] = index
            return index

    def _load(self, collection: str) -> _Index | None:
        with self._snapshot() as conn:
            generation = _generation(conn, _collection_store(collection))
            row = conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                               (collection,)).fetchone()
            if row is None:
                return None
            rows = conn.execute("SELECT id, embedding FROM vector_chunks WHERE collection = ? ORDER BY id",
                                (collection,)).fetchall()
        model, dimension = str(row[0]), int(row[1])
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=_BLOB).astype(np.float32, copy=False)
        return _Index(generation, model, ids, matrix.reshape(len(rows), dimension))

    def _patch(self, collection: str, before: int, model: str, removed: Ids, new_ids: Ids,
               vectors: Matrix) -> None:
        """Apply this process's own write to the cached matrix, if it was current just before it."""
        with self._lock:
            index = self._indexes.get(collection)
            if index is None or index.generation != before or index.model != model:
                return  # not loaded, or another writer came between: the next search reloads
            ids, matrix = index.ids, index.matrix
            if removed:
                keep = ~np.isin(ids, np.asarray(removed, dtype=np.int64))
                ids, matrix = ids[keep], matrix[keep]
            if new_ids:
                ids = np.concatenate((ids, np.asarray(new_ids, dtype=np.int64)))
                matrix = np.concatenate((matrix, vectors))
            self._indexes[collection] = _Index(before + 1, model, ids, np.ascontiguousarray(matrix))

    # --- plumbing ----------------------------------------------------------------------------

    def _claim_model(self, conn: sqlite3.Connection, collection: str, model: str, dimension: int) -> None:
        """Record the collection's model on its first write; refuse a write with another model."""
        if not self._check_model(conn, collection, model, dimension):
            conn.execute("INSERT INTO vector_collections(collection, embedding_model, dimension) VALUES (?, ?, ?)",
                         (collection, model, dimension))

    def _check_model(self, conn: sqlite3.Connection, collection: str, model: str, dimension: int) -> bool:
        """False for a new collection; raises ConflictError when the stored model differs."""
        try:
            row = conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                               (collection,)).fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"vector store read failed: {exc}") from exc
        if row is None:
            return False
        if (row[0], row[1]) != (model, dimension):
            raise ConflictError(
                f"collection {collection!r} holds {row[0]} embeddings ({row[1]} dimensions), but "
                f"{settings_path(self._dir, collection)} names {model} ({dimension}); re-create the collection "
                "to change its model", {"collection": collection, "stored_model": row[0], "settings_model": model})
        return True

    def _bump(self, conn: sqlite3.Connection, collection: str) -> None:
        self._db.bump(conn, STORE)
        self._db.bump(conn, _collection_store(collection))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        try:
            with self._db.transaction() as conn:
                yield conn
        except sqlite3.Error as exc:
            raise StorageError(f"vector store write failed: {exc}") from exc

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every SELECT inside sees the same committed state."""
        conn = self._db.connection()
        if conn.in_transaction:
            yield conn
            return
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StorageError(f"vector store read failed: {exc}") from exc

    def _list_collections(self) -> Records:
        rows = self._db.read(
            "SELECT v.collection, v.embedding_model, v.dimension, "
            "(SELECT count(*) FROM vector_documents d WHERE d.collection = v.collection), "
            "(SELECT count(*) FROM vector_chunks c WHERE c.collection = v.collection) "
            "FROM vector_collections v")
        found = {name: {"collection": name, "embedding_model": model, "dimension": dim, "documents": docs,
                        "chunks": chunks} for name, model, dim, docs, chunks in rows}
        # Collections that have settings but no document yet.
        if self._dir.is_dir():
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
        if not _is_utf8(text) or not _is_utf8(doc_uri):
            raise InvalidParamsError("a document is valid Unicode text",
                                     [{"path": f"/docs/{n}", "message": "contains a lone surrogate"}])
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


def _delete_chunks(conn: sqlite3.Connection, collection: str, doc_uri: str) -> list[int]:
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM vector_chunks WHERE collection = ? AND doc_uri = ?",
                                           (collection, doc_uri))]
    if ids:
        conn.execute("DELETE FROM vector_chunks WHERE collection = ? AND doc_uri = ?", (collection, doc_uri))
    return ids


def _generation(conn: sqlite3.Connection, store: str) -> int:
    row = conn.execute("SELECT value FROM generations WHERE store = ?", (store,)).fetchone()
    return int(row[0]) if row else 0


def _check_search(query: object, top_k: object, min_score: object) -> None:
    problems = []
    if not isinstance(query, str) or not _is_utf8(query):
        problems.append({"path": "/query", "message": "expected a string of valid Unicode"})
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 0 <= top_k <= SEARCH_TOP_K:
        problems.append({"path": "/top_k", "message": f"expected an integer from 0 to {SEARCH_TOP_K} "
                                                      "(limits.search_top_k)"})
    if not isinstance(min_score, int | float) or isinstance(min_score, bool) or min_score != min_score:
        problems.append({"path": "/min_score", "message": "expected a number"})
    if problems:
        raise InvalidParamsError("invalid search parameters", problems)


def _is_utf8(text: str) -> bool:
    # A lone surrogate (e.g. from surrogateescape) cannot be stored or tokenized.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
