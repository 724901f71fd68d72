"""Keeping the in-memory postings (stores.sqlite.postings) in step with the FTS index.

The same mechanism as the ANN index (stores.sqlite.vector_ann): the snapshot records the vector
store's write generation (`generations` row `vector`, bumped by every write of any collection in
any process); when it moved, the snapshot catches up from the table inside one read transaction:
chunk ids only grow in commit order, so the chunks it lacks are those above its highest id
(tokenized here), and when the counts then differ, the ids the FTS index no longer holds are
marked deleted. A catch-up that would not end in step (FTS totals differ from the snapshot's own) drops
the snapshot; so does a large catch-up (a bulk import): the index is then rebuilt from the FTS
index in a background thread, and searches use FTS5's own ranking until it is ready.

Inside a `Database.batch()` the thread sees its own uncommitted writes, which a rollback may undo:
the snapshot is neither used nor moved there (FTS5 answers, seeing exactly what the batch sees).
Building the snapshot reads the FTS index (~1.7 s at 100k chunks, see bench/README.md), so a
build saves it (stores.sqlite.postings_files) for the next process to map and catch up; it is
built only for an index of `min_chunks` chunks or more, and by one process at a time: a build
holds a lock across processes from its read to its save, another process finding it held leaves
the read to that one (FTS5 answers meanwhile), and any process maps a file saved since it last
looked instead of reading the index itself.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager

import numpy as np

from .database import Database
from .many_rows import ids_of
from .postings import (
    EMPTY,
    FTS,
    STORE,
    Postings,
    Snapshot,
    chunk_rows,
    fts_totals,
    indexed_ids,
    postings_of,
    read_transaction,
    store_generation,
    tokenize,
)
from .postings_files import FOLDER, PostingsFiles, save_quietly
from .stored_embeddings import stored_ids

log = logging.getLogger(__name__)

POSTINGS_MIN_CHUNKS = 5_000  # below this, FTS5's bm25() over every match takes a few ms at most (bench/README)
CATCH_UP_MAX = 5_000  # chunks tokenized in the searching thread; more, and the index is rebuilt
TAIL_SHARE = 0.2  # chunks added since the build, as a share of it, before a rebuild folds them in
BUILD_BUSY_S = 5.0  # another process reading the postings: no read of this one's own for this long
UNSEEN = object()  # the description's version before the first look
READ_SPAN = 2_000_000  # token occurrences read from the FTS index per query while building
INSTANCES = "vector_chunks_instances"


class BuiltElsewhere(Exception):
    """Another process holds the build lock: it is reading the postings, and will save them."""


class OutOfStep(Exception):
    """The FTS index and the table disagree with what was read from them (a rebuild decides)."""


class PostingsKeeper:
    """The postings snapshot of one database, built on first need and kept current."""

    def __init__(self, db: Database, min_chunks: int = POSTINGS_MIN_CHUNKS, background: bool = True,
                 saved: bool = True) -> None:
        self._db = db
        self.min_chunks = min_chunks
        self.background = background  # False: the search that needs the postings reads them (tests)
        # saved: a build saves its postings, and the first need loads them (postings_files.py)
        self.files = PostingsFiles(db.path.parent / FOLDER) if saved else None
        self._file_seen: tuple[int, int] | None | object = UNSEEN  # the description's version when last looked at
        self._elsewhere_until = 0.0  # another process is reading them: no build of its own before this
        self._snapshot: Snapshot | None = None
        self._removed: set[int] = set()  # ids this process deleted (committed) since the last catch-up
        self._lock = threading.RLock()
        self._build: threading.Thread | None = None

    def current(self) -> Snapshot | None:
        """The snapshot at the current generation; None when there is none (yet) or inside a batch."""
        if self._db.in_batch():
            return None
        snapshot = self._snapshot
        generation = self._db.generation(STORE)
        if snapshot is not None and snapshot.generation == generation:
            return snapshot
        with self._lock:
            snapshot = self._snapshot
            if snapshot is None and self._build is None and self._file_changed() and self._large_enough():
                snapshot = self._snapshot = self._saved()
            if snapshot is not None and snapshot.generation != generation:
                try:
                    snapshot = self._catch_up(snapshot)
                except OutOfStep as exc:
                    log.warning("the keyword postings are out of step with the FTS index (%s): they are rebuilt",
                                exc)
                    snapshot = None
                self._snapshot = snapshot
            if snapshot is None:
                if self._build is None and time.monotonic() >= self._elsewhere_until and self._large_enough():
                    self.start_build(self.background)
                snapshot = self._snapshot
            return snapshot if snapshot is not None and snapshot.generation == generation else None

    def forget(self, ids: list[int]) -> None:
        """Chunks this process deleted and committed: marked deleted at the next catch-up."""
        if ids and self._snapshot is not None:
            with self._lock:
                self._removed.update(ids)

    def _saved(self) -> Snapshot | None:
        """The postings a build saved (then caught up as usual), looked for again only once another
        build replaced the description (`_file_changed`)."""
        if self.files is None:
            return None
        self._file_seen = self.files.version()
        return self.files.load(self._db.connection())

    def _file_changed(self) -> bool:
        """Whether a build (of any process) saved postings since this process last looked."""
        return self.files is not None and self.files.version() != self._file_seen

    def _large_enough(self) -> bool:
        rows, _ = fts_totals(self._db.connection())
        return rows >= self.min_chunks

    # --- building --------------------------------------------------------------------------------

    def start_build(self, background: bool = True) -> None:
        """Read the snapshot from the FTS index (once at a time; in a thread by default)."""
        with self._lock:
            if self._build is not None:
                return
            self._build = threading.Thread(target=self._run_build, daemon=True, name="keyword-postings-build")
        if background:
            self._build.start()
        else:
            self._build.run()

    def build_now(self) -> bool:
        """Build in this thread, whatever the index's size (bench and tests), or map the file another
        process saved since this one last looked; whether there are postings now (False: none, as
        when another process is reading them)."""
        self.wait()
        self.start_build(background=False)
        return self._snapshot is not None

    def wait(self, timeout: float | None = None) -> None:
        thread = self._build
        if thread is not None and thread.is_alive():
            thread.join(timeout)

    def _run_build(self) -> None:
        try:
            with self._exclusive():
                if self._file_changed():  # another process saved them meanwhile: mapped, not read
                    with self._lock:
                        loaded = self._saved()
                        if loaded is not None and self._snapshot is None:
                            self._snapshot = loaded
                            self._removed.clear()
                            return
                snapshot = self._read()
                with self._lock:
                    current = self._snapshot
                    if current is None or current.generation <= snapshot.generation:
                        self._snapshot = snapshot
                        self._removed.clear()
                if self.files is not None:  # (outside the lock: searches go on while it is written)
                    self._map_saved(snapshot, save_quietly(self.files, self._db, snapshot))
                    self._file_seen = self.files.version()  # its own save is nothing to look at again
        except BuiltElsewhere:  # FTS5 answers until that process's file is saved
            self._elsewhere_until = time.monotonic() + BUILD_BUSY_S
        except Exception:  # FTS5 keeps answering; the next search after a write tries again
            log.exception("building the keyword postings failed")
        finally:
            with self._lock:
                self._build = None

    def _exclusive(self) -> AbstractContextManager[object]:
        """The build lock (`PostingsFiles.build_lock`), taken at once or `BuiltElsewhere`; nothing
        when nothing is saved, or no lock file can be made (the save then says why)."""
        from filelock import Timeout

        if self.files is None:
            return contextlib.nullcontext()
        try:
            return self.files.build_lock().acquire(timeout=0)
        except Timeout:
            raise BuiltElsewhere from None
        except OSError:
            return contextlib.nullcontext()

    def _map_saved(self, built: Snapshot, saved: Postings | None) -> None:
        """The postings `built` read, as mapped from the file they were saved in (or one of the same
        generation), in place of this process's copy wherever the current snapshot still holds it
        (a catch-up keeps its `main`): the same words, numbers and arrays, shared with the other
        processes instead of held alone."""
        if saved is not None:
            with self._lock:
                current = self._snapshot
                if current is not None and current.main is built.main:
                    current.main = saved

    def _read(self) -> Snapshot:
        conn = self._db.connection()
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{INSTANCES} USING fts5vocab(main, {FTS}, instance)")
        with read_transaction(conn):
            generation = store_generation(conn)
            rows, tokens = fts_totals(conn)
            ids, collections, codes = _chunk_collections(conn)
            words, counts = _vocabulary(conn)
            docs = np.concatenate([_instances(conn, words[start], words[end - 1])
                                   for start, end in _spans(counts.tolist())] or [np.zeros(0, np.int64)])
        if int(counts.sum()) != len(docs):
            raise OutOfStep("the FTS vocabulary and its instances differ")
        positions = np.searchsorted(ids, docs)
        if len(docs) and (int(positions.max()) >= len(ids) or not np.array_equal(ids[positions], docs)):
            raise OutOfStep("the FTS index holds chunks the table does not")
        main = postings_of(words, np.repeat(np.arange(len(words), dtype=np.int64), counts), positions)
        lengths = np.bincount(positions, minlength=len(ids)).astype(np.float64)
        snapshot = Snapshot(generation, ids, collections, codes, np.ones(len(ids), dtype=np.bool_), lengths, rows,
                            tokens, main)
        _check(snapshot)
        return snapshot

    # --- catching up -----------------------------------------------------------------------------

    def _catch_up(self, old: Snapshot) -> Snapshot | None:
        """`old` brought to the table's state, or None when that takes a rebuild."""
        conn = self._db.connection()
        with read_transaction(conn):
            generation = store_generation(conn)
            rows, tokens = fts_totals(conn)
            added = chunk_rows(conn, "WHERE id > ? ORDER BY id LIMIT ?", (old.max_id, CATCH_UP_MAX + 1))
            if len(added) > CATCH_UP_MAX or len(old.tail_rows) + len(added) > max(
                    CATCH_UP_MAX, TAIL_SHARE * (len(old.ids) - len(old.tail_rows))):
                return None
            live = old.live.copy()
            if self._removed:
                live[np.isin(old.ids, np.fromiter(self._removed, dtype=np.int64))] = False
            if rows != int(np.count_nonzero(live)) + len(added):  # deleted by another process (or a batch)
                live &= np.isin(old.ids, indexed_ids(conn, old.max_id))
            tokens_of = tokenize(conn, [(int(r[0]), str(r[2])) for r in added])
        self._removed.clear()
        codes = dict(old.codes)
        start = len(old.ids)
        new_rows = [(start + n, tokens_of[int(r[0])]) for n, r in enumerate(added)]
        snapshot = Snapshot(
            generation,
            np.concatenate((old.ids, np.fromiter((r[0] for r in added), dtype=np.int64, count=len(added)))),
            np.concatenate((old.collections, np.fromiter((codes.setdefault(str(r[1]), len(codes)) for r in added),
                                                         dtype=np.int32, count=len(added)))),
            codes,
            np.concatenate((live, np.ones(len(added), dtype=np.bool_))),
            np.concatenate((old.lengths, np.fromiter((len(t) for _, t in new_rows), dtype=np.float64,
                                                     count=len(new_rows)))),
            rows, tokens, old.main,
            _tail(old.tail_rows + new_rows) if new_rows else old.tail,
            old.tail_rows + new_rows)
        _check(snapshot)
        return snapshot


def _tail(rows: list[tuple[int, list[str]]]) -> Postings:
    if not rows:
        return EMPTY
    vocab: dict[str, int] = {}
    term_of = np.fromiter((vocab.setdefault(t, len(vocab)) for _, tokens in rows for t in tokens), dtype=np.int64)
    positions = np.repeat(np.fromiter((p for p, _ in rows), dtype=np.int64, count=len(rows)),
                          [len(tokens) for _, tokens in rows])
    return postings_of(list(vocab), term_of, positions)


def _check(snapshot: Snapshot) -> None:
    """The snapshot's own counts must be the FTS index's totals, or `bm25()` would score otherwise."""
    live = snapshot.live
    if int(np.count_nonzero(live)) != snapshot.rows or int(snapshot.lengths[live].sum()) != snapshot.tokens:
        raise OutOfStep(f"{int(np.count_nonzero(live))} chunks / {int(snapshot.lengths[live].sum())} tokens against "
                        f"the FTS index's {snapshot.rows} / {snapshot.tokens}")


def _spans(counts: list[int]) -> Iterator[tuple[int, int]]:
    """[start, end) runs of words holding about READ_SPAN occurrences each."""
    start, held = 0, 0
    for n, count in enumerate(counts):
        held += count
        if held >= READ_SPAN:
            yield start, n + 1
            start, held = n + 1, 0
    if start < len(counts):
        yield start, len(counts)


def _chunk_collections(conn: sqlite3.Connection) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Every chunk's id, ascending, and its collection's code (numbered in the order of their first
    chunks): a statement per collection, not a step per chunk (see stores.sqlite.stored_embeddings)."""
    names = [str(row[0]) for row in conn.execute("SELECT DISTINCT collection FROM vector_chunks")]
    held = sorted(((stored_ids(conn, name), name) for name in names), key=lambda pair: int(pair[0][0]))
    codes = {name: code for code, (_, name) in enumerate(held)}
    ids = np.concatenate([chunk_ids for chunk_ids, _ in held] or [np.zeros(0, np.int64)])
    collections = np.concatenate([np.full(len(chunk_ids), codes[name], dtype=np.int32) for chunk_ids, name in held]
                                 or [np.zeros(0, np.int32)])
    order = np.argsort(ids, kind="stable")
    return ids[order], collections[order], codes


def _vocabulary(conn: sqlite3.Connection) -> tuple[list[str], np.ndarray]:
    """The FTS vocabulary's words (its order) and how often each occurs, in one statement. The
    tokenizer never puts a control character in a word, so U+001F parts them."""
    terms, counts = conn.execute("SELECT group_concat(term, char(31)), group_concat(cnt) "
                                 "FROM vector_chunks_vocab").fetchone()
    if terms is None:
        return [], np.zeros(0, dtype=np.int64)
    words, occurrences = str(terms).split("\x1f"), np.fromstring(str(counts), dtype=np.int64, sep=",")
    if len(words) != len(occurrences):
        raise OutOfStep("a word of the FTS vocabulary holds U+001F")
    return words, occurrences


def _instances(conn: sqlite3.Connection, first: str, last: str) -> np.ndarray:
    """The chunk id of every occurrence of the words `first`..`last`, by word then chunk (FTS5's order)."""
    return ids_of(conn.execute(f"SELECT group_concat(doc) FROM temp.{INSTANCES} WHERE term >= ? AND term <= ?",
                               (first, last)).fetchone()[0])
