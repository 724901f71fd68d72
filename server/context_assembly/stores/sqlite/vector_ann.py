"""The ANN side of the embedded vector index: which collections have an approximate index, keeping
it in step with the table, building it, and re-scoring its candidates exactly.

`SqliteVectorIndex` (stores.sqlite.vector) asks `current(collection)` before each nearest-k; a
collection without an index is searched exactly, and once its matrix holds `min_chunks` rows
`start_build` makes one in a background thread from that matrix. This process's own writes
`patch` the index; any other change (another process, a file saved some writes ago) is caught up
from the table by chunk id (ids only grow) when the collection's generation moved.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ...errors import StorageError
from ..embedding import Matrix
from ..vector_index import Ranked
from .ann import CANDIDATES, Ann, AnnFiles, Exiting, new_ann, say_missing, usearch_index
from .ann_fold import fold
from .database import Database
from .matrix import MatrixIndex, cosine_scores
from .postings import store_generation
from .stored_embeddings import embeddings_of, newest_embeddings, read_embeddings, stored_ids

log = logging.getLogger(__name__)

SAVE_SHARE = 0.02  # an index is saved again once this share of it changed (a new process catches up the rest)
SAVE_MIN = 2_000
BUILD_BUSY_S = 5.0  # another process is building the collection's index: not asked again for this long
BUILD_SAVE_WAIT_S = 60.0  # a build's save waits this long for another process's save or fold (~16 s at 1M)
PARALLEL_BUILD_FROM = 1_000  # chunks from which a build uses every core (below: one, <0.1 s, one graph every time)
BUILD_BATCH = 2_000  # chunks a build adds at a time (~1 s at 1M): what a process exiting meanwhile waits for

Ids = list[int]
Connection = Callable[[], AbstractContextManager[sqlite3.Connection]]


def collection_store(collection: str) -> str:
    """The `generations` row counting writes to one collection."""
    return f"vector:{collection}"


class AnnSearch:
    """The ANN indexes of one database's collections, kept in step with its tables."""

    def __init__(self, db: Database, snapshot: Connection, write: Connection,
                 on_built: Callable[[str], None]) -> None:
        self._db = db
        self._snapshot = snapshot
        self._write = write
        self._on_built = on_built
        self._anns: dict[str, Ann] = {}
        self._files = AnnFiles(db.path.parent / "vector-ann")
        self._lock = threading.RLock()
        self._unusable: dict[str, tuple[float, str | None]] = {}  # collection -> the saved index that failed to load
        self._background: dict[str, threading.Thread] = {}  # collection -> its build or fold, one at a time
        self._built_elsewhere: dict[str, float] = {}  # collection -> when to ask again whether another builds it
        # collection -> the index named (file, generation) when `current` last found none usable:
        # a build asked for then takes a file saved since instead of building
        self._looked: dict[str, tuple[str, int] | None] = {}

    def current(self, collection: str) -> Ann | None:
        """The collection's ANN index brought up to the current generation; None when it has none."""
        ann = self._anns.get(collection)
        if ann is None and (self._files.meta_mtime(collection) is None or usearch_index() is None):
            self._looked[collection] = None  # (none saved when looked: a build asked for now builds)
            return None  # a small collection never imports usearch
        if ann is not None and (self._db.in_batch() or ann.generation == self._db.generation(
                collection_store(collection))):
            return ann  # in a batch: as committed (the batch may roll back); its candidates are re-scored inside it
        with self._lock:
            ann = self._anns.get(collection)
            saved = self._files.saved(collection)
            if ann is not None and saved is not None and saved[0] != ann.file and saved[1] >= ann.generation:
                ann = self._load(collection) or ann  # another process saved since: catch up from its file
            if ann is None:
                ann = self._load(collection)
                if ann is None:
                    self._looked[collection] = saved  # (the index named when looked: not usable)
                    return None
            self._anns[collection] = ann
            if ann.generation != self._db.generation(collection_store(collection)) and not self._catch_up(
                    collection, ann):
                self._anns.pop(collection, None)
                self._looked[collection] = saved
                return None
            return ann

    def has_index(self, collection: str) -> bool:
        """Whether the collection has an ANN index, in this process or saved (perhaps one to catch
        up), not one this process found unusable (rebuilt meanwhile)."""
        if collection in self._anns:
            return True
        named = self._named(collection)
        return named is not None and self._unusable.get(collection) != named

    def _load(self, collection: str) -> Ann | None:
        meta = self._named(collection)
        if meta is None or self._unusable.get(collection) == meta:
            return None
        rows = self._db.read("SELECT token FROM vector_ann WHERE collection = ?", (collection,))
        ann = self._files.load(collection, str(rows[0][0]) if rows else None)
        if ann is not None and not self._of_this_history(collection, ann):
            log.warning("the ANN index of collection %r holds other vectors than the table under the same chunk ids "
                        "(a database restored from an older copy?): it is rebuilt", collection)
            ann = None
        if ann is None:
            self._unusable[collection] = meta  # not read again until a build replaces it
        return ann

    def _named(self, collection: str) -> tuple[float, str | None] | None:
        """Which description is there: when it was saved, and the file it names (two saves within
        one tick of a coarse clock name two files); None: none."""
        mtime = self._files.meta_mtime(collection)
        if mtime is None:
            return None
        saved = self._files.saved(collection)
        return mtime, saved[0] if saved is not None else None

    def _of_this_history(self, collection: str, ann: Ann) -> bool:
        """Whether the newest chunks of the table up to the index's highest id are in it with their
        stored vectors (`stored_embeddings.newest_embeddings`)."""
        with self._snapshot() as conn:
            newest = newest_embeddings(conn, collection, ann.max_id, ann.dimension)
        return newest is not None and ann.holds(*newest)

    def _catch_up(self, collection: str, ann: Ann) -> bool:
        """Bring `ann` to the table's state: add the chunks written since, remove the deleted ones.

        Chunk ids only grow, so the chunks it lacks are those above its highest id; when the counts
        then differ, the ids it holds that the table no longer does are removed. False when the
        index cannot be trusted (another model, or still out of step): it is dropped and rebuilt.
        """
        store = collection_store(collection)
        with self._snapshot() as conn:
            generation = store_generation(conn, store)
            row = conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = ?",
                               (collection,)).fetchone()
            if row is None or (str(row[0]), int(row[1])) != (ann.model, ann.dimension):
                return False
            ids, matrix = read_embeddings(conn, collection, ann.dimension, after=ann.max_id)
            count = int(conn.execute("SELECT count(*) FROM vector_chunks WHERE collection = ?",
                                     (collection,)).fetchone()[0])
            present = None
            if count != len(ann) + len(ids):
                present = stored_ids(conn, collection)
        ann.add(ids, matrix)
        if present is not None:
            ann.remove(np.setdiff1d(ann.keys(), present))
        if len(ann) != count:
            log.warning("the ANN index of collection %r is out of step with the table: it is rebuilt", collection)
            self._unusable[collection] = self._named(collection) or (0.0, None)
            return False
        ann.generation = generation
        self._save(collection, ann)
        return True

    def nearest(self, collection: str, ann: Ann, q: Matrix, limit: int, min_score: float) -> Ranked:
        """The ANN's candidates re-scored exactly from the stored embeddings (a deleted chunk has none)."""
        proposed = ann.candidates(q, max(CANDIDATES, 2 * limit))
        if not len(proposed):
            return []
        try:
            ids, matrix = embeddings_of(self._db.connection(), collection, proposed.tolist(), ann.dimension)
        except sqlite3.Error as exc:
            raise StorageError(f"database read failed: {exc}") from exc
        scores = cosine_scores(matrix, q)
        keep = scores >= min_score
        ids, scores = ids[keep], scores[keep]
        order = np.lexsort((ids, -scores))[:limit]
        return [(int(ids[i]), float(scores[i])) for i in order]

    def patch(self, collection: str, before: int, model: str, removed: Ids, new_ids: Ids,
              vectors: Matrix) -> None:
        """Apply this process's own committed write, if the index was current just before it."""
        with self._lock:
            ann = self._anns.get(collection)
            if ann is None or ann.generation != before or ann.model != model:
                return  # the next search catches up from the table
            ann.remove(np.asarray(removed, dtype=np.int64))
            ann.add(np.asarray(new_ids, dtype=np.int64), vectors)
            ann.generation = before + 1
            self._save(collection, ann)

    def _save(self, collection: str, ann: Ann, force: bool = False, background: bool = True, wait: float = 0) -> None:
        """Save `ann` once enough of it changed: this process's own graph as it is, a view by folding
        its changes into a copy of the graph it views (in the background by default)."""
        if not (force or ann.unsaved >= max(SAVE_MIN, SAVE_SHARE * len(ann))):
            return
        if ann.viewed:
            self._start(collection, self._fold, ann, background)
            return
        from filelock import Timeout

        try:
            self._files.save(collection, ann, wait=wait,
                             reached=lambda: self._db.generation(collection_store(collection)))
        except Timeout:
            pass  # another process is saving: tried again at the next write
        except (OSError, RuntimeError) as exc:  # the table stays the truth: a later save or a rebuild catches up
            log.warning("cannot save the ANN index of collection %r: %s", collection, exc)

    def _fold(self, collection: str, ann: Ann) -> None:
        """Save the file `ann` views with its changes folded in (`ann_fold`, in a process of its
        own), then let go of `ann`: the next search views the newest file and catches up from it.
        When another process saved a newer file meanwhile, only the letting go is left to do; when
        another is saving or folding now, or the fold fails, it is tried again after as many
        changes more (the view serves meanwhile, and moves to the other's file at a catch-up)."""
        saved = self._files.saved(collection)
        try:
            done = saved is None or saved[0] != ann.file or (self._files.free(collection)
                                                             and self._fold_now(collection, ann))
        except Exception as exc:  # a background fold: logged, the view serves on
            log.warning("cannot fold the changes of collection %r into a new ANN index file: %s", collection, exc)
            done = False
        if not done:
            ann.unsaved = 0
            return
        with self._lock:
            if self._anns.get(collection) is ann:
                del self._anns[collection]

    def _fold_now(self, collection: str, ann: Ann) -> bool:
        with self._lock:  # the changes exactly as of `ann.generation`
            generation, max_id = ann.generation, ann.max_id
            hidden, added = ann.changes()
        with self._snapshot() as conn:  # a chunk deleted since is absent: the catch-up agrees
            ids, matrix = embeddings_of(conn, collection, added.tolist(), ann.dimension)
        return fold(self._files, collection, ann, generation, max_id, hidden, ids, matrix)

    def start_build(self, collection: str, index: MatrixIndex, background: bool = True, anew: bool = False) -> None:
        """Build the collection's ANN index from its loaded matrix (once; in a thread by default),
        unless another process saves one meanwhile: since `current` last found none usable, or
        with `anew`, since now."""
        if self._db.in_batch():
            return  # the matrix holds the batch's writes, which may roll back
        if usearch_index() is None:
            say_missing(collection, index.size)
            return
        if time.monotonic() < self._built_elsewhere.get(collection, 0.0):
            return  # (searched exactly until the other process's file is saved)
        if not anew and self.current(collection) is not None:
            return  # (a search of more than `MAX_LIMIT` chunks, answered exactly: the index is there)
        seen = self._looked[collection] if collection in self._looked and not anew else self._files.saved(collection)
        self._start(collection, self._build, (index, seen), background)

    def _start(self, collection: str, work: Callable[[str, Any], None], subject: Any, background: bool) -> None:
        """Run `work(collection, subject)` unless the collection's build or fold is already running."""
        with self._lock:
            if collection in self._background:
                return
            thread = threading.Thread(target=self._run, args=(collection, work, subject), daemon=True,
                                      name=f"ann-{work.__name__.strip('_')}-{collection}")
            self._background[collection] = thread
        if background:
            thread.start()
        else:
            thread.run()

    def _run(self, collection: str, work: Callable[[str, Any], None], subject: Any) -> None:
        try:
            work(collection, subject)
        except Exiting:  # (left to the next process)
            log.info("the ANN index of collection %r: %s stopped, the process is exiting", collection,
                     work.__name__.strip("_"))
        except Exception:  # exact search (or the last saved index) keeps working; a later search retries
            log.exception("the ANN index of collection %r: %s failed", collection, work.__name__.strip("_"))
        finally:
            with self._lock:
                self._background.pop(collection, None)

    def _build(self, collection: str, asked: tuple[MatrixIndex, tuple[str, int] | None]) -> None:
        """Build the index from the matrix and save it, unless another process is building it (this
        one then searches exactly until that file is saved) or saved a usable one since the build
        was asked for (`asked`: the matrix, and the index then named)."""
        from filelock import Timeout

        index, seen = asked
        held: AbstractContextManager[object]
        try:
            held = self._files.build_lock(collection).acquire(timeout=0)
        except Timeout:
            self._built_elsewhere[collection] = time.monotonic() + BUILD_BUSY_S
            return
        except OSError:  # no lock file can be made (the folder): built alone, and the save says why
            held = contextlib.nullcontext()
        with held:
            saved = self._files.saved(collection)
            if saved is not None and saved != seen and self.current(collection) is not None:
                self._on_built(collection)  # another process saved one since: viewed instead
                return
            self._build_locked(collection, index)

    def _build_locked(self, collection: str, index: MatrixIndex) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO vector_ann(collection, token) VALUES (?, ?)",
                         (collection, uuid.uuid4().hex))
            token = str(conn.execute("SELECT token FROM vector_ann WHERE collection = ?",
                                     (collection,)).fetchone()[0])
        ann = new_ann(index.model, index.dimension, token, index.generation)
        ids, matrix = index.rows()
        threads = 0 if len(ids) >= PARALLEL_BUILD_FROM else 1  # (one: as fast, and the same graph every time)
        for start in range(0, len(ids), BUILD_BATCH):  # (`Exiting` between two when the process exits)
            ann.add(ids[start:start + BUILD_BATCH], matrix[start:start + BUILD_BATCH], threads=threads)
        self._save(collection, ann, force=True, wait=BUILD_SAVE_WAIT_S)  # (a save or fold elsewhere: waited for)
        with self._lock:
            self._unusable.pop(collection, None)
            saved = self._load(collection)  # the file just saved (or a newer one) as a view: the graph built let go
            if saved is not None and saved.generation >= ann.generation:
                ann = saved
            current = self._anns.get(collection)
            if current is None or current.generation <= ann.generation:
                self._anns[collection] = ann
        self._on_built(collection)  # searches go to the ANN index now: the matrix can go

    def build_now(self, collection: str, index: MatrixIndex) -> bool:
        self.start_build(collection, index, background=False, anew=True)
        return collection in self._anns

    def wait(self, timeout: float | None = None) -> None:
        with self._lock:
            threads = list(self._background.values())
        for thread in threads:
            thread.join(timeout)
