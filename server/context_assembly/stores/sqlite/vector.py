"""The embedded vector index: documents, chunks and an FTS5 index in `project.db`, exact numpy search.

Tables: `vector_collections` (the model each collection was embedded with, so a collection never
mixes dimensions), `vector_documents`, `vector_chunks` (text + float32 little-endian embedding
BLOB) and `vector_chunks_fts` (FTS5, external content, kept in step by triggers) for BM25.

`SqliteVectorIndex` is the `VectorIndex` (stores.vector_index) that `VectorCollections` chunks,
embeds and fuses over; `SqliteVectorStore` is the two put together. Nearest-k is exact: each
collection's embeddings are held as one contiguous float32 matrix, scored with a single
matrix-vector product and cut with `argpartition`. The matrix is cached per process and keyed on
the collection's write generation (`generations` row `vector:<collection>`): this process's own
writes patch it when nothing else wrote in between, and the next search after another process's
write catches it up from the table by chunk id (`_caught_up`: the rows added since, the ids
deleted found by count) instead of reading it whole. A collection of `ann.ANN_MIN_CHUNKS` chunks or
more gets an approximate index (`stores.sqlite.ann`, built in the background from the matrix, then
persisted and kept in step the same way: own writes patch it, others' are caught up from the
table); its candidates are re-scored exactly here. Full-text-k is exact BM25 (FTS5 `bm25()`),
computed so that common query words do not make it score most of the index (`stores.sqlite.keyword`:
from postings held in memory for a large index, kept in step the same way).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from numpy.typing import NDArray

from ...errors import ConflictError, StorageError
from ...workspace.layout import WorkspaceLayout
from ..embedding import Matrix
from ..vector import Records
from ..vector_collections import VectorCollections, fts_terms
from ..vector_index import ChunkRow, IndexedDoc, Ranked
from . import matrix as matrix_module
from .ann import ANN_MIN_CHUNKS, MAX_LIMIT, Ann, usearch_index
from .database import Database
from .keyword import KeywordSearch
from .keyword import fts_query as keyword_query
from .many_rows import ids_of, in_lists, insert_rows
from .matrix import MatrixFiles
from .matrix import MatrixIndex as _Index
from .postings import store_generation as _generation
from .postings_files import database_token, made_token
from .postings_keeper import POSTINGS_MIN_CHUNKS, PostingsKeeper
from .stored_embeddings import newest_rows_agree, read_embeddings, stored_ids
from .vector_ann import AnnSearch, cosine_scores
from .vector_ann import collection_store as _collection_store

if TYPE_CHECKING:
    from filelock import FileLock

__all__ = ["SqliteVectorIndex", "SqliteVectorStore", "cosine_scores", "fts_query"]

log = logging.getLogger(__name__)

STORE = "vector"


CATCH_UP_MAX = 20_000  # chunks another process added that a cached matrix takes in; more: read whole
MANY_GONE = 1_000  # chunks another process deleted that a cached matrix drops run by run; more: read whole
NONE = np.zeros(0, dtype=np.int64)  # no positions
SAVE_BUSY_S = 60.0  # another process held the collection's matrix lock past matrix.SAVE_WAIT_S: not tried again sooner
SAVE_FAILED_S = 600.0  # a save of the collection's matrix failed (disk full, read-only): not tried again sooner


def best_positions(scores: Any, ids: Any, limit: int) -> Any:
    """The positions of the `limit` best scores, a tie at the edge cut by the smaller ids (not by
    the partition's order: a deeper search's first `limit` are then these). Linear in the scores.
    A NaN (a corrupt row) counts as no match, as -inf does: it must not become the edge."""
    if np.isnan(scores).any():
        scores = np.where(np.isnan(scores), -np.inf, scores)
    edge = scores[np.argpartition(scores, len(scores) - limit)[len(scores) - limit:]].min()
    better = np.flatnonzero(scores > edge)
    tied = np.flatnonzero(scores == edge)
    wanted = limit - len(better)
    if len(tied) > wanted:
        tied = tied[np.argpartition(ids[tied], wanted - 1)[:wanted]]
    return np.concatenate((better, tied))


class ReadElsewhere(Exception):
    """Another process is reading the collection's matrix whole, and will save it (`count`: its chunks)."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


class Claimed(Exception):
    """The collection's first-read lock was taken just now: look for a saved file once more."""


# Module-level aliases: inside the class, `list` names the method.
Ids = list[int]
Terms = list[str]


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
        # The token an ANN index file must carry to be trusted (a recreated database has none).
        "CREATE TABLE IF NOT EXISTS vector_ann (collection TEXT PRIMARY KEY, token TEXT NOT NULL)",
        # The token the saved keyword postings must carry to be trusted (postings_files.py).
        "CREATE TABLE IF NOT EXISTS vector_postings (id INTEGER PRIMARY KEY CHECK (id = 1), token TEXT NOT NULL)",
    ):
        conn.execute(statement)


def fts_query(text: str | list[str]) -> str:
    """An FTS5 MATCH expression for arbitrary user text (or its terms): the words, each quoted, OR-ed.

    Quoting turns operators (`AND`, `NEAR`, `*`, `-`, `:`) into plain words; "" when the text has
    no word at all, and callers then skip the keyword search.
    """
    terms = fts_terms(text) if isinstance(text, str) else text
    return keyword_query(terms)


class SqliteVectorIndex:
    """`VectorIndex` over the workspace database: exact cosine over a cached matrix (an ANN index
    proposing candidates for large collections), FTS5 BM25."""

    def __init__(self, db: Database, ann_min_chunks: int | None = ANN_MIN_CHUNKS,
                 postings_min_chunks: int = POSTINGS_MIN_CHUNKS) -> None:
        self._db = db
        self._indexes: dict[str, _Index] = {}
        # per collection: buffers with room after its cached matrix, and the ids view they back (`_grown`)
        self._room: dict[str, tuple[NDArray[np.int64], Matrix, NDArray[np.int64]]] = {}
        self._matrix_files = MatrixFiles(db.path.parent / "vector-matrix")
        self._saves: dict[str, float] = {}  # collection -> when its matrix save started (monotonic; cleared when done)
        self._claims: dict[str, FileLock] = {}  # collection -> its first-read lock, held until its save ends
        self._save_after: dict[str, float] = {}  # collection -> no save tried before this (after a failed one)
        self._ann_served: set[str] = set()  # collections whose ANN index has served a search here
        self._build_after_save: set[str] = set()  # collections whose ANN build a search left to the save running
        self._keywords = KeywordSearch(db, postings_min_chunks)
        self._lock = threading.Lock()
        self.ann_min_chunks = ann_min_chunks  # None: always exact, even where an index was persisted
        self.ann = AnnSearch(db, self._snapshot, self._write, self._forget_matrix)
        db.register(STORE, _migrate)

    # --- writes ------------------------------------------------------------------------------

    def claimed_model(self, collection: str) -> tuple[str, int] | None:
        try:
            row = self._db.connection().execute(
                "SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                (collection,)).fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"vector store read failed: {exc}") from exc
        return None if row is None else (str(row[0]), int(row[1]))

    def upsert(self, collection: str, model: str, dimension: int, docs: list[IndexedDoc]) -> None:
        now = time.time()
        with self._write() as conn:
            self._claim_model(conn, collection, model, dimension)
            before = _generation(conn, _collection_store(collection))
            removed = _delete_chunks(conn, collection, [doc.doc_uri for doc in docs])
            insert_rows(conn, "INSERT INTO vector_documents(collection, doc_uri, text, metadata, updated)",
                        [(collection, doc.doc_uri, doc.text, doc.metadata_json, now) for doc in docs],
                        "ON CONFLICT(collection, doc_uri) DO UPDATE SET text = excluded.text, "
                        "metadata = excluded.metadata, updated = excluded.updated")
            new_ids = _insert_chunks(conn, [(collection, doc.doc_uri, ord_, text, vector.tobytes()) for doc in docs
                                            for ord_, (text, vector) in enumerate(zip(doc.chunks, doc.vectors,
                                                                                      strict=True))])
            self._bump(conn, collection)
        if self._db.in_batch():
            return  # not committed yet (it may roll back): the next search reloads instead
        vectors = np.concatenate([doc.vectors for doc in docs]) if docs else np.zeros((0, dimension), np.float32)
        self._patch(collection, before, model, removed, new_ids, vectors)

    def delete(self, collection: str, doc_uri: str) -> bool:
        with self._write() as conn:
            before = _generation(conn, _collection_store(collection))
            removed = _delete_chunks(conn, collection, [doc_uri])
            gone = conn.execute("DELETE FROM vector_documents WHERE collection = ? AND doc_uri = ?",
                                (collection, doc_uri)).rowcount
            if not gone and not removed:
                return False
            self._bump(conn, collection)
            row = conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                               (collection,)).fetchone()
        if row is not None and not self._db.in_batch():
            self._patch(collection, before, row[0], removed, [], np.zeros((0, int(row[1])), dtype=np.float32))
        return True

    # --- reads -------------------------------------------------------------------------------

    def document(self, collection: str, doc_uri: str) -> dict[str, Any] | None:
        rows = self._db.read(
            "SELECT text, metadata, updated, (SELECT count(*) FROM vector_chunks c WHERE c.collection = d.collection "
            "AND c.doc_uri = d.doc_uri) FROM vector_documents d WHERE collection = ? AND doc_uri = ?",
            (collection, doc_uri))
        if not rows:
            return None
        text, metadata, updated, chunks = rows[0]
        return {"collection": collection, "doc_uri": doc_uri, "text": text, "metadata": orjson.loads(metadata),
                "updated": updated, "chunks": chunks}

    def documents(self, collection: str) -> Records:
        rows = self._db.read(
            "SELECT d.doc_uri, d.metadata, d.updated, length(d.text), (SELECT count(*) FROM vector_chunks c "
            "WHERE c.collection = d.collection AND c.doc_uri = d.doc_uri) FROM vector_documents d "
            "WHERE d.collection = ? ORDER BY d.doc_uri", (collection,))
        return [{"doc_uri": uri, "metadata": orjson.loads(meta), "updated": updated, "chars": chars, "chunks": n}
                for uri, meta, updated, chars, n in rows]

    def collections(self) -> Records:
        rows = self._db.read(
            "SELECT v.collection, v.embedding_model, v.dimension, "
            "(SELECT count(*) FROM vector_documents d WHERE d.collection = v.collection), "
            "(SELECT count(*) FROM vector_chunks c WHERE c.collection = v.collection) "
            "FROM vector_collections v ORDER BY v.collection")
        return [{"collection": name, "embedding_model": model, "dimension": dim, "documents": docs,
                 "chunks": chunks} for name, model, dim, docs, chunks in rows]

    def generation(self) -> int:
        return self._db.generation(STORE)

    def nearest(self, collection: str, query: Matrix, k: int, min_score: float) -> Ranked:
        return self._vector(collection, query, k, min_score)

    def full_text(self, collection: str, terms: Terms, k: int) -> Ranked:
        return self._keyword(collection, terms, k)

    def chunks(self, ids: Ids, *, text: bool = True) -> dict[int, ChunkRow]:
        found: dict[int, ChunkRow] = {}
        column = "c.text" if text else "''"
        for start in range(0, len(ids), 500):  # stay far below SQLite's bound-parameter limit
            batch = tuple(ids[start:start + 500])
            marks = ",".join("?" * len(batch))
            rows = self._db.read(
                f"SELECT c.id, c.collection, c.doc_uri, c.ord, {column}, d.metadata FROM vector_chunks c "
                "JOIN vector_documents d ON d.collection = c.collection AND d.doc_uri = c.doc_uri "
                f"WHERE c.id IN ({marks})", batch)
            found.update((row[0], ChunkRow(row[1], row[2], row[3], row[4], orjson.loads(row[5]))) for row in rows)
        return found

    # --- search legs -------------------------------------------------------------------------

    def _vector(self, collection: str, q: Matrix, limit: int, min_score: float) -> Ranked:
        if limit <= MAX_LIMIT and self.ann_min_chunks is not None:
            ann = self._ann_serving(collection)
            if ann is not None:
                return self.ann.nearest(collection, ann, q, limit, min_score)
        index = self._index(collection)
        if index is None or not index.size:
            return []
        if self.ann_min_chunks is not None and index.size >= self.ann_min_chunks:
            self._start_build(collection, index)
        scores, ids = index.scores(q), index.every_id
        n = len(scores)
        top = best_positions(scores, ids, limit) if limit < n else np.arange(n)
        top = top[(scores[top] >= min_score) & (scores[top] > -np.inf)]  # -inf: a masked row of a saved matrix
        order = top[np.lexsort((ids[top], -scores[top]))]
        return [(int(ids[i]), float(scores[i])) for i in order]

    def _keyword(self, collection: str, terms: Terms, limit: int) -> Ranked:
        try:
            return self._keywords.top(collection, terms, limit)
        except sqlite3.Error as exc:
            raise StorageError(f"keyword search failed: {exc}") from exc

    def _bm25(self, collection: str, match: str, limit: int | None) -> Ranked:
        """FTS5's own BM25 ranking of every match: the reference the keyword leg equals."""
        return self._keywords.bm25(collection, match, limit)

    # --- the in-memory matrix ----------------------------------------------------------------

    def _index(self, collection: str) -> _Index | None:
        index = self._indexes.get(collection)
        if index is not None and index.generation == self._db.generation(_collection_store(collection)):
            return index
        try:
            return self._index_locked(collection, claim=True)
        except ReadElsewhere as busy:  # waited for outside `_lock`: this process's saves let their claims go meanwhile
            self._matrix_files.wait_for_first_read(collection, matrix_module.first_read_wait_s(busy.count))
        return self._index_locked(collection, claim=False)

    def _index_locked(self, collection: str, claim: bool) -> _Index | None:
        """The collection's matrix at the current generation, loaded under `_lock` when it is not
        held yet (`claim`: see `_load`)."""
        generation = self._db.generation(_collection_store(collection))
        with self._lock:
            index = self._indexes.get(collection)
            if index is not None and index.generation == generation:
                return index
            if self._db.in_batch():  # it holds the batch's writes, which may roll back: neither kept nor saved
                return self._load(collection, index)
            try:
                index = self._load(collection, index, claim)
                if index is None:
                    self._indexes.pop(collection, None)
                else:
                    self._indexes[collection] = index
                    self._save_when_due(collection, index)
                self._release_room(collection, index)
                return index
            finally:
                self._end_claim(collection)  # (unless a save started, which took it)

    def _load(self, collection: str, previous: _Index | None = None, claim: bool = False) -> _Index | None:
        """The collection's matrix as the table holds it now: `previous` (this process's, of an
        earlier generation) caught up when it can be, else read whole. With `claim`, a matrix
        that will be saved is read whole only under the collection's first-read lock (kept in
        `_claims` for the save to take and let go); `ReadElsewhere` while another process holds it."""
        try:
            return self._load_once(collection, previous, claim)
        except Claimed:  # looked for again in a new read transaction, which sees the file and the
            # database's token of a process that read, saved and let go since the first look
            return self._load_once(collection, previous, claim=False)

    def _load_once(self, collection: str, previous: _Index | None, claim: bool) -> _Index | None:
        with self._snapshot() as conn:
            generation = _generation(conn, _collection_store(collection))
            row = conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                               (collection,)).fetchone()
            if row is None:
                return None
            model, dimension = str(row[0]), int(row[1])
            caught = None
            if previous is not None and previous.model == model and previous.dimension == dimension:
                caught = _caught_up(conn, collection, previous, generation, self._grown)
            if caught is None or caught.wants_new_file():  # the newest saved matrix, mapped, if it is another
                caught = self._saved_caught_up(conn, collection, model, dimension, generation, caught)
            if caught is None and claim and self._claim_first_read(conn, collection):
                raise Claimed
            if caught is not None:
                return caught
            ids, matrix = read_embeddings(conn, collection, dimension)
        return _Index(generation, model, ids, matrix)

    def _saved_caught_up(self, conn: sqlite3.Connection, collection: str, model: str, dimension: int,
                         generation: int, caught: _Index | None) -> _Index | None:
        """The collection's saved matrix mapped and caught up, when it is usable and another file
        than `caught`'s; `caught` otherwise."""
        saved = self._matrix_files.load(collection, database_token(conn), model, dimension, generation)
        if saved is not None and saved.shared is not None and (
                caught is None or caught.shared is None or caught.shared.file != saved.shared.file) and \
                newest_rows_agree(conn, collection, saved.shared.ids, saved.shared.matrix):
            return _caught_up(conn, collection, saved, generation, self._grown) or caught
        return caught

    def _claim_first_read(self, conn: sqlite3.Connection, collection: str) -> bool:
        """Take the collection's first-read lock before reading its matrix whole: True when taken
        now; False when this process holds it already or needs none (a matrix no file will be
        saved for, or no lock file can be made); `ReadElsewhere` while another process holds it.
        The caller holds `_lock`."""
        from filelock import Timeout

        if collection in self._claims:
            return False
        count = int(conn.execute("SELECT count(*) FROM vector_chunks WHERE collection = ?",
                                 (collection,)).fetchone()[0])
        if not self._saves_matrix_of(collection, count):
            return False
        try:
            lock = self._matrix_files.first_read_lock(collection)
            lock.acquire(timeout=0)
        except Timeout:
            raise ReadElsewhere(count) from None
        except OSError:  # no lock file (no folder, a read-only one): no file will be saved either
            return False
        self._claims[collection] = lock
        return True

    def _end_claim(self, collection: str) -> None:
        """Let go of the collection's first-read lock, if this process holds it. The caller holds `_lock`."""
        _let_go(self._claims.pop(collection, None))

    def _saves_matrix_of(self, collection: str, size: int) -> bool:
        """Whether a matrix of `size` live rows is saved once held: large enough, no ANN index
        serving the collection, no failed save of it lately, outside a batch. (While a large
        collection's ANN index is first built, minutes at 1M chunks, every process searches it
        exactly: its matrix is saved, so that they map one file instead of ~1 GB each.)"""
        if self._db.in_batch() or size < matrix_module.FILE_MIN_CHUNKS \
                or time.monotonic() < self._save_after.get(collection, 0.0):
            return False
        return not self._ann_serves(collection, size)

    def _ann_serves(self, collection: str, size: int) -> bool:
        """Whether an ANN index serves the collection's searches (of `size` live rows), here or saved."""
        return self.ann_min_chunks is not None and size >= self.ann_min_chunks and usearch_index() is not None \
            and self.ann.has_index(collection)

    def _save_when_due(self, collection: str, index: _Index) -> None:
        """Save the matrix in the background once it wants a new file (`matrix.MatrixIndex.wants_new_file`):
        one save at a time per collection, none inside a batch, none for a while after one failed.
        The caller holds `_lock`."""
        if not index.wants_new_file() or collection in self._saves or not self._saves_matrix_of(collection, index.size):
            return  # (an ANN index serving it: this matrix is let go once that is built)
        self._saves[collection] = time.monotonic()
        claim = self._claims.pop(collection, None)  # the save lets it go once the file is named
        # not a daemon: a process that exits meanwhile (a CLI command) finishes the save, which the
        # next one then maps, instead of leaving a part-written file behind
        try:
            threading.Thread(target=self._save_matrix, args=(collection, index, claim), daemon=False,
                             name=f"matrix-save-{collection}").start()
        except RuntimeError as exc:  # no new threads (the interpreter is exiting): searches go on from memory
            _let_go(claim)
            del self._saves[collection]
            self._save_after[collection] = time.monotonic() + SAVE_FAILED_S
            log.info("the matrix of collection %r is not saved: %s", collection, exc)

    def _of_this_history(self, collection: str, named: _Index) -> bool:
        """Whether a saved matrix another process named is the database's, as `_load` takes one."""
        shared = named.shared
        with self._snapshot() as conn:
            return shared is not None and named.generation <= _generation(conn, _collection_store(collection)) \
                and newest_rows_agree(conn, collection, shared.ids, shared.matrix)

    def _save_matrix(self, collection: str, index: _Index, claim: FileLock | None = None) -> None:
        """Write `index` as the collection's saved matrix, then let go of the first-read lock
        `claim` (without `_lock`, which a load may hold for a while: other processes wait for that
        file); then search the file's mapped rows (caught up at the next search, when writes came
        meanwhile) instead of the rows of its own; and when a search asked meanwhile for the
        collection's ANN index (`_start_build`), build it from them."""
        build: _Index | None = None  # the file's rows, to build the ANN index a search asked for from
        wanted = False
        try:
            try:
                saved = self._matrix_files.save(collection, made_token(self._db), index,
                                                agrees=lambda named: self._of_this_history(collection, named))
            finally:
                _let_go(claim)
            with self._lock:
                wanted = collection in self._build_after_save
                self._build_after_save.discard(collection)
                current = self._indexes.get(collection)
                if saved is None:  # another process held the lock all along: not tried again for a while
                    self._save_after[collection] = time.monotonic() + SAVE_BUSY_S
                elif self._ann_serves(collection, index.size):  # an ANN index was saved meanwhile: it goes again
                    self._matrix_files.discard(collection, wait=0)
                elif current is index or (current is not None and current.generation <= saved.generation
                                          and (current.model, current.dimension) == (saved.model, saved.dimension)):
                    self._indexes[collection] = saved  # (of an older generation: the next search catches it up)
                    self._release_room(collection, None)
                    build = saved
                elif current is not None and current.model == saved.model and saved.shared is not None and (
                        current.shared is None or current.shared.file != saved.shared.file):
                    rebased = current.rebased(saved)  # written to meanwhile: those writes kept, over the file
                    if rebased is not None:
                        self._indexes[collection] = rebased
                        self._release_room(collection, None)
                        build = saved  # (the index then catches up the writes, as from any older file)
        except Exception as exc:  # a background save: logged, searches go on from memory
            self._save_after[collection] = time.monotonic() + SAVE_FAILED_S
            log.warning("cannot save the matrix of collection %r: %s", collection, exc)
        finally:
            try:
                if wanted and build is not None:  # (started before the save is over: `wait_for_saves`)
                    self.ann.start_build(collection, build)
            except Exception as exc:  # (the next search asks again)
                log.warning("cannot start building the ANN index of collection %r: %s", collection, exc)
            with self._lock:
                self._build_after_save.discard(collection)
                self._saves.pop(collection, None)

    def wait_for_saves(self, timeout: float = 60.0) -> None:
        """Until no matrix save is running (tests and bench)."""
        deadline = time.monotonic() + timeout
        while self._saves and time.monotonic() < deadline:
            time.sleep(0.01)

    def _patch(self, collection: str, before: int, model: str, removed: Ids, new_ids: Ids,
               vectors: Matrix) -> None:
        """Apply this process's own write to the cached matrix and ANN index, if current just before it."""
        if self._db.in_batch():
            return  # not committed yet (the batch may roll back): the next search reloads or catches up
        self.ann.patch(collection, before, model, removed, new_ids, vectors)
        self._keywords.postings.forget(removed)
        with self._lock:
            index = self._indexes.get(collection)
            if index is None or index.generation != before or index.model != model:
                return  # not loaded, or another writer came between: the next search reloads
            gone = np.flatnonzero(np.isin(index.every_id, np.asarray(removed, dtype=np.int64))) if removed else NONE
            grown = self._grown(collection, index, before + 1, np.asarray(new_ids, dtype=np.int64), vectors, gone)
            self._indexes[collection] = grown
            self._save_when_due(collection, grown)

    def _grown(self, collection: str, index: _Index, generation: int, new_ids: NDArray[np.int64], rows: Matrix,
               gone: NDArray[np.int64] = NONE) -> _Index:
        """`index` without the rows at positions `gone` and with `rows` appended, as of
        `generation`. Rows of a saved matrix are masked, not copied. Rows only added are written
        into the room kept after the matrix of its own when `index` is the one that room was made
        for, so a write that adds a few chunks copies them, not the matrix. Otherwise the rows kept
        are copied, run by run between the ones gone, into new buffers with a quarter more room. An
        earlier `_Index` (a search may still read it) keeps its rows: only rows past its end are
        ever written. The caller holds `_lock`."""
        shared = index.shared
        if shared is not None and len(gone):
            in_file = gone[gone < len(shared.ids)]
            shared = shared.masked(in_file) if len(in_file) else shared
            gone = gone[gone >= len(shared.ids)] - len(shared.ids)
        n, k = len(index.ids), len(new_ids)
        if not k and not len(gone):
            self._release_room(collection, index)
            return _Index(generation, index.model, index.ids, index.matrix, shared)
        kept = n - len(gone)
        room = self._room.get(collection)
        if len(gone) or room is None or room[2] is not index.ids or len(room[0]) < n + k:
            capacity = kept + k + max(k, (kept + k) // 4)
            room = (np.empty(capacity, dtype=np.int64), np.empty((capacity, index.matrix.shape[1]), dtype=np.float32),
                    index.ids)
            _copy_kept(index, gone, room[0], room[1])
        room[0][kept:kept + k], room[1][kept:kept + k] = new_ids, rows
        grown = _Index(generation, index.model, room[0][:kept + k], room[1][:kept + k], shared)
        self._room[collection] = (room[0], room[1], grown.ids)
        return grown

    def build_ann(self, collection: str) -> bool:
        """Build the collection's ANN index now, in this thread, whatever its size (bench and tests);
        False when there is none after (as when another process is building it)."""
        index = self._index(collection)
        return index is not None and self.ann.build_now(collection, index)

    @property
    def postings(self) -> PostingsKeeper:
        """The keyword leg's in-memory postings (their size threshold and build mode can be set)."""
        return self._keywords.postings

    def prepare(self, collection: str, keyword: bool) -> None:
        """The collection's ANN index or matrix loaded (an ANN build started where `_vector` would
        start one), and with `keyword` the keyword postings (loaded from their file, or their read
        started), as a first search would."""
        if self.ann_min_chunks is None or self._ann_serving(collection) is None:
            index = self._index(collection)
            if index is not None and self.ann_min_chunks is not None and index.size >= self.ann_min_chunks:
                self._start_build(collection, index)
        if keyword:
            self._keywords.postings.current()

    def build_postings(self) -> bool:
        """Read the keyword postings now, in this thread, whatever the index's size (bench and tests)."""
        return self._keywords.postings.build_now()

    def _release_room(self, collection: str, index: _Index | None) -> None:
        """Let go of the room after an earlier matrix once `index` is not the one it backs."""
        room = self._room.get(collection)
        if room is not None and (index is None or room[2] is not index.ids):
            del self._room[collection]

    def _forget_matrix(self, collection: str, wait: float = matrix_module.SAVE_WAIT_S) -> None:
        """The collection's ANN index is built: its matrix, held or saved, can go (the saved one
        once no other process saves it, waited for `wait` seconds at most)."""
        with self._lock:
            self._indexes.pop(collection, None)
            self._release_room(collection, None)
        self._matrix_files.discard(collection, wait)

    def _start_build(self, collection: str, index: _Index) -> None:
        """Build the collection's ANN index from `index`, unless this process is saving its matrix:
        the save starts the build from the file once it is there, so that the rows of its own go
        (~1 GB at 1M chunks, held for the minutes a build takes)."""
        with self._lock:
            if collection in self._saves:
                self._build_after_save.add(collection)
                return
        self.ann.start_build(collection, index)

    def _ann_serving(self, collection: str) -> Ann | None:
        """The collection's ANN index, when one serves its searches. The first time one does in
        this process, what its exact searches held before goes (`_forget_matrix`, not waiting):
        an index another process built ends them too, not only one built here."""
        ann = self.ann.current(collection)
        if ann is None:
            self._ann_served.discard(collection)  # (found unusable: once rebuilt, it serves anew)
        elif collection not in self._ann_served:
            self._ann_served.add(collection)
            self._forget_matrix(collection, wait=0)
        return ann

    # --- plumbing ----------------------------------------------------------------------------

    def _claim_model(self, conn: sqlite3.Connection, collection: str, model: str, dimension: int) -> None:
        """Record the collection's model on its first write; refuse a write with another model."""
        row = conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                           (collection,)).fetchone()
        if row is None:
            conn.execute("INSERT INTO vector_collections(collection, embedding_model, dimension) VALUES (?, ?, ?)",
                         (collection, model, dimension))
        elif (row[0], row[1]) != (model, dimension):
            raise ConflictError(f"collection {collection!r} holds {row[0]} embeddings ({row[1]} dimensions), "
                                f"not {model} ({dimension}); re-create the collection to change its model",
                                {"collection": collection, "stored_model": row[0], "settings_model": model})

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


def _let_go(lock: FileLock | None) -> None:
    """Release a first-read lock (quietly: it is only a hint to other processes)."""
    if lock is not None:
        with suppress(OSError):
            lock.release()


Grow = Callable[[str, _Index, int, NDArray[np.int64], Matrix, NDArray[np.int64]], _Index]


def _caught_up(conn: sqlite3.Connection, collection: str, index: _Index, generation: int, grow: Grow) -> _Index | None:
    """`index` brought to the table's state inside the caller's read transaction, as the ANN index
    and the keyword postings are: the chunks written since are those above its highest id (ids
    only grow), and when the counts then differ, the ids it holds that the table no longer does are
    dropped (`grow`: in place when only added). Another process's write then costs reading what it
    wrote, and when it deleted one copy of the matrix (~20 ms at 100k chunks), not reading the whole
    matrix (~110 ms; 170 ms as rows). None when more than `CATCH_UP_MAX` chunks were added or
    `MANY_GONE` deleted (reading it whole is as cheap), or the counts still differ."""
    highest = index.highest
    new_ids, new_rows = read_embeddings(conn, collection, index.dimension, after=highest, limit=CATCH_UP_MAX + 1)
    if len(new_ids) > CATCH_UP_MAX:
        return None
    count = int(conn.execute("SELECT count(*) FROM vector_chunks WHERE collection = ?", (collection,)).fetchone()[0])
    gone = NONE
    if count != index.size + len(new_ids):  # chunks deleted since
        present = stored_ids(conn, collection, highest)
        keep = np.isin(index.every_id, present, assume_unique=True)
        if index.shared is not None and index.shared.gone is not None:  # masked before: not gone again
            keep[:len(index.shared.ids)] |= index.shared.gone
        kept = int(np.count_nonzero(keep)) - (len(index.shared.ids) - index.shared.live if index.shared else 0)
        gone = np.flatnonzero(~keep)
        if kept + len(new_ids) != count or (len(gone) > MANY_GONE and index.shared is None):
            return None
    return grow(collection, index, generation, new_ids, new_rows, gone)


def _copy_kept(index: _Index, gone: NDArray[np.int64], ids: NDArray[np.int64], matrix: Matrix) -> None:
    """The rows of `index` but those at positions `gone` (ascending), into the heads of `ids` and
    `matrix`: run by run between the rows gone (a memcpy each; `np.compress` along the rows took
    245 ms for 100k rows of 256), or through one temporary when many are gone."""
    kept = len(index.ids) - len(gone)
    if len(gone) > MANY_GONE:
        ids[:kept], matrix[:kept] = np.delete(index.ids, gone), np.delete(index.matrix, gone, axis=0)
        return
    at = 0
    for start, end in zip(np.concatenate(([0], gone + 1)), np.append(gone, len(index.ids)), strict=True):
        ids[at:at + end - start], matrix[at:at + end - start] = index.ids[start:end], index.matrix[start:end]
        at += end - start


def _delete_chunks(conn: sqlite3.Connection, collection: str, doc_uris: list[str]) -> Ids:
    """Delete the chunks of these documents; their ids. A few statements, not a step a row
    (stores.sqlite.many_rows)."""
    removed: Ids = []
    for marks, part in in_lists(doc_uris):
        text = conn.execute(f"SELECT group_concat(id) FROM vector_chunks WHERE collection = ? AND doc_uri IN ({marks})",
                            (collection, *part)).fetchone()[0]
        if text:
            removed += ids_of(text).tolist()
            conn.execute(f"DELETE FROM vector_chunks WHERE collection = ? AND doc_uri IN ({marks})",
                         (collection, *part))
    return removed


def _insert_chunks(conn: sqlite3.Connection, rows: list[tuple[str, str, int, str, bytes]]) -> Ids:
    """Insert the chunks, in order; their ids. Inside the write transaction every id above the
    table's highest before is one of these (ids only grow), so one statement reads them all back."""
    highest = conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0] or 0
    insert_rows(conn, "INSERT INTO vector_chunks(collection, doc_uri, ord, text, embedding)", rows)
    text = conn.execute("SELECT group_concat(id) FROM vector_chunks WHERE id > ?", (highest,)).fetchone()[0]
    ids = ids_of(text or "")
    if len(ids) != len(rows):
        raise StorageError(f"{len(rows)} chunks written, {len(ids)} found: the table changed during the write")
    return ids.tolist()


class SqliteVectorStore(VectorCollections):
    """The embedded vector store: `VectorCollections` over a `SqliteVectorIndex` of the workspace database."""

    def __init__(self, db: Database, vectordb_dir: Path | str, default_model: str | None = None) -> None:
        super().__init__(SqliteVectorIndex(db), vectordb_dir, default_model)

    @classmethod
    def for_workspace(cls, layout: WorkspaceLayout, db: Database | None = None,
                      default_model: str | None = None) -> SqliteVectorStore:
        return cls(db if db is not None else Database(layout.db_path), layout.vectordb_dir, default_model)
