"""Approximate nearest-k for large collections of the embedded vector store: a usearch HNSW graph.

Exact search streams a collection's whole matrix per query (~75 ms at 1M chunks), so a collection
of `ANN_MIN_CHUNKS` chunks or more gets an HNSW index (usearch, the extra `ann`: when it cannot be
imported, search stays exact and the log says so once). The index only proposes
candidates: `SqliteVectorIndex` re-scores them from the stored float32 embeddings, so a returned
score is the exact cosine and a chunk that is gone from the table can never be returned.

The graph holds int8-quantised vectors keyed by chunk id (ids are never reused). It is a cache of
the table, persisted in `<database folder>/vector-ann/`: `<stem>.json` names the index file
and records the database's token for the collection (`vector_ann` table: a recreated database
has none, so a stale file is never trusted), the collection generation and the highest chunk id it
reflects; a file whose graph lacks the table's newest chunks up to that id, with their vectors, is
of another history of the database (one restored from an older copy and written again reuses
ids) and is rebuilt (`AnnSearch`, `Ann.holds`). Saving writes a new uniquely named index file,
flushes it, then atomically replaces the JSON, so a crash mid-save leaves the previous pair
intact; a file that cannot be read is rebuilt.

A file, once written, is never changed, so processes load it as a read-only memory-mapped view
(`Ann`): the pages are shared by every process of the database (a swarm's sidecars on one machine
hold one copy, not one each) and a view loads in ~0.1 s where a copy took ~0.6 s at 1M chunks.
The changes since the file was saved lie beside the view until they are a share of it; then
`ann_fold` writes a new file with them folded in and every process moves on to it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from attrs import define, field
from numpy.typing import NDArray

from ..embedding import Matrix
from .saved_files import (
    CollectionLocks,
    current_meta,
    file_stem,
    fsync_file,
    name_file,
    read_meta,
    stale,
    stale_temps,
)

if TYPE_CHECKING:
    from filelock import FileLock

log = logging.getLogger(__name__)

ANN_MIN_CHUNKS = 200_000  # below this, exact search is ~10 ms or less: no index to build or keep
CONNECTIVITY = 32  # HNSW M: 16 reached recall@10 ~0.9 on bench data even at high ef
EXPANSION_ADD = 128  # HNSW ef_construction: 48 gave recall@10 0.71 at 1M chunks, 0.87 at 200k (ef 256)
EXPANSION_SEARCH = 1536  # HNSW ef: recall@10 at 1M chunks 0.87 at 256, 0.92 at 512, 0.947 at 1024, 0.965 here (~9 ms)
CANDIDATES = 100  # proposed per search before the exact re-scoring (at least 2 x k)
MAX_LIMIT = 1_000  # a larger k is answered exactly
FORMAT = 2  # 2: ef_construction 128 (a format-1 index is rebuilt)
# int8 rounding keeps a unit vector's cosine with itself above 0.97 up to 4,096 dimensions (0.998 at 256)
HELD_COSINE = 0.9
EXIT_WAIT_S = 10.0  # at exit, usearch calls running in other threads are waited for this long at most

Ids = NDArray[np.int64]
_usearch: Any = None
_missing_said = False


def usearch_index() -> Any | None:
    """The `usearch.index` module, imported on first use (not at server start); None when missing."""
    global _usearch
    if _usearch is None:
        try:
            import usearch.index

            _usearch = usearch.index
        except ImportError:
            _usearch = False
    return _usearch or None


class Exiting(Exception):
    """The process is exiting: no usearch call starts in a thread other than the main one."""


_calls = 0  # usearch calls running now, in every thread
_exiting = False
_quiet = threading.Condition()


@contextlib.contextmanager
def native_call() -> Iterator[None]:
    """Around a call into usearch that may run in a thread of its own (a build's adds, a search,
    a save). At exit the process waits for those running and lets none start (`Exiting`): a
    thread still inside one as the interpreter ends aborts the process ("terminate called without
    an active exception", exit status 134; seen in add and search)."""
    global _calls
    with _quiet:
        if _exiting and threading.current_thread() is not threading.main_thread():
            raise Exiting("the process is exiting")
        _calls += 1
    try:
        yield
    finally:
        with _quiet:
            _calls -= 1
            _quiet.notify_all()


@atexit.register
def _wait_for_calls() -> None:
    global _exiting
    with _quiet:
        _exiting = True
        _quiet.wait_for(lambda: _calls == 0, timeout=EXIT_WAIT_S)


def say_missing(collection: str, chunks: int) -> None:
    global _missing_said
    if not _missing_said:
        _missing_said = True
        log.warning("usearch is not installed: collection %r (%d chunks) and any other large collection is "
                    "searched exactly, which is slower; install the extra `ann` (usearch) for the approximate "
                    "index", collection, chunks)


@define
class Ann:
    """One collection's HNSW graph and the table state it reflects.

    `index` is this process's own graph (built here: writable) or, once saved, a read-only view
    of the saved file: memory-mapped, so every process of the database shares its pages and a new
    one loads it in a fraction of the time a copy takes. A view is never changed (usearch crashes
    when asked to): the chunks added since it was saved go into `delta`, a small graph of their
    own, and the ones deleted from it into `hidden`, filtered from its candidates. `unsaved`
    counts both; past a share of the index a new file folds them in (`AnnSearch._save`)."""

    index: Any
    model: str
    dimension: int
    token: str
    generation: int
    max_id: int
    file: str | None = None  # the saved file `index` views; None: `index` is this process's own
    delta: Any = None
    hidden: set[int] = field(factory=set)
    unsaved: int = 0
    lock: threading.RLock = field(factory=threading.RLock)

    @property
    def viewed(self) -> bool:
        return self.file is not None

    def __len__(self) -> int:
        return len(self.index) - len(self.hidden) + (len(self.delta) if self.delta is not None else 0)

    def add(self, ids: Ids, vectors: Matrix, threads: int = 1) -> None:
        if len(ids):
            with self.lock, native_call():
                if self.viewed and self.delta is None:
                    self.delta = _graph(self.dimension)
                (self.delta if self.viewed else self.index).add(ids.astype(np.uint64), vectors, threads=threads)
                self.max_id = max(self.max_id, int(ids.max()))
                self.unsaved += len(ids)

    def remove(self, ids: Ids) -> None:
        if len(ids):
            with self.lock, native_call():
                keys = ids.astype(np.uint64)
                if not self.viewed:
                    self.index.remove(keys)
                else:
                    if self.delta is not None:
                        self.delta.remove(keys)
                    self.hidden.update(int(key) for key in keys[self.index.contains(keys)])
                self.unsaved += len(ids)

    def holds(self, ids: Ids, vectors: Matrix) -> bool:
        """Whether the graph it views or holds has these chunks, with these unit vectors up to its
        int8 rounding (a cosine of `HELD_COSINE` at least; other vectors score near 0). A vector
        that is not finite is only looked for."""
        if not len(ids):
            return True
        with self.lock, native_call():
            found = self.index.get(ids.astype(np.uint64))
        rows = list(found) if isinstance(found, tuple) or getattr(found, "ndim", 0) == 2 else [found]
        if len(rows) != len(ids) or any(row is None for row in rows):
            return False
        finite = np.isfinite(vectors).all(axis=1)
        held, vectors = np.stack(rows).astype(np.float32)[finite], vectors[finite]
        norms = np.linalg.norm(held, axis=1) * np.linalg.norm(vectors, axis=1)
        return bool(np.all(np.einsum("ij,ij->i", held, vectors) >= HELD_COSINE * norms))

    def keys(self) -> Ids:
        with self.lock:
            keys = np.asarray(self.index.keys, dtype=np.int64)
            if self.hidden:
                keys = keys[~np.isin(keys, np.fromiter(self.hidden, dtype=np.int64, count=len(self.hidden)))]
            if self.delta is not None:
                keys = np.concatenate([keys, np.asarray(self.delta.keys, dtype=np.int64)])
            return keys

    def candidates(self, query: Matrix, count: int) -> Ids:
        """The `count` nearest the graph proposes (of the view and its delta, none hidden)."""
        with self.lock, native_call():
            keys, distances = self._shown(query, count, count + min(len(self.hidden), count))
            if self.delta is not None and len(self.delta):
                self.delta.expansion_search = max(EXPANSION_SEARCH, count)
                near = self.delta.search(query, count, threads=1)
                keys = np.concatenate([keys, np.asarray(near.keys, dtype=np.int64)])
                distances = np.concatenate([distances, np.asarray(near.distances)])
                keys = keys[np.argsort(distances, kind="stable")]
            return keys[:count]

    def _shown(self, query: Matrix, count: int, asked: int) -> tuple[Ids, NDArray[np.float32]]:
        """The nearest of `index`, none hidden: `asked` of them, and more while fewer than `count`
        are left (the deleted chunks may crowd round the query): at most `count` + all hidden."""
        while True:
            self.index.expansion_search = max(EXPANSION_SEARCH, asked)
            found = self.index.search(query, asked, threads=1)
            keys, distances = np.asarray(found.keys, dtype=np.int64), np.asarray(found.distances)
            if self.hidden:
                shown = np.fromiter((int(key) not in self.hidden for key in keys), dtype=bool, count=len(keys))
                keys, distances = keys[shown], distances[shown]
            most = count + len(self.hidden)
            if len(keys) >= count or asked >= most:
                return keys, distances
            asked = min(4 * asked, most)

    def changes(self) -> tuple[Ids, Ids]:
        """A view's changes as they stand: the ids hidden from it and the ids in its delta."""
        with self.lock:
            hidden = np.fromiter(self.hidden, dtype=np.int64, count=len(self.hidden))
            added = np.asarray(self.delta.keys, dtype=np.int64) if self.delta is not None else np.empty(0, np.int64)
            return hidden, added


def _graph(dimension: int) -> Any:
    module = usearch_index()
    assert module is not None
    return module.Index(ndim=dimension, metric="cos", dtype="i8", connectivity=CONNECTIVITY,
                        expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)


def new_ann(model: str, dimension: int, token: str, generation: int) -> Ann:
    return Ann(_graph(dimension), model, dimension, token, generation, 0)


class AnnFiles:
    """The persisted indexes of one database: `<stem>.json` + the index file it names, the stem
    the collection's name and a hash of it (`saved_files.file_stem`). Files saved before the stem
    (`<collection>.json`, `<collection>~*.usearch`) are read until a save replaces them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._locks = CollectionLocks(folder, ".fold-lock")
        self._build_locks = CollectionLocks(folder, ".build-lock")

    def _meta_path(self, collection: str) -> Path:
        """Where the collection's description is: under its stem, or where an earlier version saved it."""
        path = self.folder / f"{file_stem(collection)}.json"
        legacy = self.folder / f"{collection}.json"
        return legacy if not path.exists() and legacy.exists() else path

    def meta_mtime(self, collection: str) -> float | None:
        """When the collection's index was last saved; None when it has none."""
        try:
            return self._meta_path(collection).stat().st_mtime
        except OSError:
            return None

    def load(self, collection: str, token: str | None) -> Ann | None:
        """The saved index, or None when there is none, it is not this database's, or it cannot be read."""
        module = usearch_index()
        meta_path = self._meta_path(collection)
        if module is None or token is None or not meta_path.is_file():
            return None
        try:
            meta = current_meta(meta_path)
            if meta.get("format") != FORMAT or meta.get("token") != token:
                return None
            # a view: files are written once under a new name and never changed, so a mapping
            # stays valid (on POSIX even after a newer save unlinks the file)
            index = module.Index.restore(str(self.folder / meta["file"]), view=True)
            if index is None or index.ndim != meta["dimension"] or len(index) != meta["count"]:
                raise ValueError("the index file does not match its description")
            index.expansion_add, index.expansion_search = EXPANSION_ADD, EXPANSION_SEARCH
            return Ann(index, meta["model"], int(meta["dimension"]), token, int(meta["generation"]),
                       int(meta["max_id"]), file=str(meta["file"]))
        except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
            log.warning("the ANN index of collection %r cannot be used (%s): it is rebuilt", collection, exc)
            return None

    def copy_of(self, file: str, count: int) -> Any | None:
        """A graph of its own (changeable) read from the saved `file` of `count` vectors; None when
        that file is gone (a newer save tidied it away). Raises when it is there but unreadable or
        does not hold what was viewed."""
        module = usearch_index()
        path = self.folder / file
        if module is None or not path.is_file():
            return None
        graph = module.Index.restore(str(path))
        if graph is None or len(graph) != count:
            raise ValueError(f"the ANN index file {file} does not hold the {count} vectors viewed")
        graph.expansion_add, graph.expansion_search = EXPANSION_ADD, EXPANSION_SEARCH
        return graph

    def saved(self, collection: str) -> tuple[str, int] | None:
        """(file, generation) of the index the collection's JSON names now; None: none, or unreadable."""
        try:
            meta = read_meta(self._meta_path(collection))
            return str(meta["file"]), int(meta["generation"])
        except (OSError, KeyError, TypeError, ValueError):
            return None

    def lock(self, collection: str) -> FileLock:
        """The lock every save of the collection's index holds, across processes: a save never tidies
        away a file another is about to name, and one fold runs at a time."""
        return self._locks(collection)

    def build_lock(self, collection: str) -> FileLock:
        """The lock a build of the collection's index holds from start to save, across processes:
        a swarm's sidecars crossing the size together build it once (minutes of every core at
        1M chunks), not once each; the others search exactly and view the file once it is saved."""
        return self._build_locks(collection)

    def free(self, collection: str) -> bool:
        """Whether no process is saving or folding the collection's index right now."""
        from filelock import Timeout

        try:
            with self.lock(collection).acquire(timeout=0):
                return True
        except Timeout:
            return False

    def save(self, collection: str, ann: Ann, wait: float = -1, reached: Callable[[], int] | None = None) -> bool:
        """Write `ann`'s own graph under a new name, then point the JSON at it (atomic replace), then
        tidy; holding the collection's lock (`wait` seconds at most, -1: as long as it takes;
        `filelock.Timeout` past that). False, saving nothing, when the JSON names a newer index of
        the same database already, one not past `reached()` (the collection's generation in the
        database, read once the lock is held: an index of a later one is of another history of the
        database, restored from an older copy, and is replaced). A process still viewing an older
        file keeps reading it (unlinked files stay mapped; where they cannot be unlinked yet, a
        later save tidies them)."""
        assert not ann.viewed, "a view is saved by folding its changes into a copy (AnnSearch._fold)"
        with self.lock(collection).acquire(timeout=wait):
            if self._newer_saved(collection, ann, reached):
                return False
            name = f"{file_stem(collection)}~{uuid.uuid4().hex[:12]}.usearch"
            path = self.folder / name
            try:
                with ann.lock, native_call():
                    ann.index.save(str(path))
                    meta = {"format": FORMAT, "file": name, "token": ann.token, "model": ann.model,
                            "dimension": ann.dimension, "generation": ann.generation, "max_id": ann.max_id,
                            "count": len(ann.index)}
                    ann.unsaved = 0
                fsync_file(path)
            except BaseException:
                path.unlink(missing_ok=True)  # a part-written file (disk full): the JSON still names the last one
                raise
            name_file(self.folder / f"{file_stem(collection)}.json", meta)
            self._tidy(collection, name)
            return True

    def _newer_saved(self, collection: str, ann: Ann, reached: Callable[[], int] | None) -> bool:
        try:
            meta = read_meta(self._meta_path(collection))
            named = int(meta["generation"])
            return bool(meta.get("token") == ann.token and ann.generation < named and (
                reached is None or named <= reached()))
        except (OSError, KeyError, TypeError, ValueError):
            return False

    def _tidy(self, collection: str, kept: str) -> None:
        """Every other index file of the collection (the lock is held: none is about to be named),
        and hand-over and JSON temp files an interrupted process left over an hour ago."""
        leftovers = [old for old in self.folder.glob(f"{file_stem(collection)}~*.usearch") if old.name != kept]
        leftovers += [*self.folder.glob(f"{collection}~*.usearch"), self.folder / f"{collection}.json"]  # before stems
        leftovers += [old for old in self.folder.glob(".fold-*.npz") if stale(old)] + stale_temps(self.folder)
        for old in leftovers:
            with contextlib.suppress(OSError):  # a file mapped elsewhere on Windows: the next save
                old.unlink(missing_ok=True)
