"""The one embedded database of a workspace: `.codebolt/db/project.db`, SQLite in WAL mode.

Several sidecar processes may open it at once. Every write runs in a `BEGIN IMMEDIATE`
transaction (one writer at a time, readers never blocked, a crash mid-write rolls back), with a
busy timeout so concurrent writers queue instead of failing. Connections are per thread, since
the server runs blocking store work on worker threads. The `generations` table counts writes per
store kind; caches key on it, so a write in any process invalidates what other processes cached.

`batch()` makes many writes of every store on this database (KV, JSON, working memory, blobs,
the event log, episodic turns, vector documents) one transaction: inside it, each store's own
transaction on the same thread becomes a savepoint of the batch, so the batch commits or rolls
back as a whole.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import StorageError

BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (store TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

Migration = Callable[[sqlite3.Connection], None]


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _migrate(conn: sqlite3.Connection, migration: Migration) -> None:
    # Deferred, not IMMEDIATE: tables that exist already need no write lock, so a connection opens
    # (and reads) while another holds a long write transaction, such as a `memory import` batch.
    conn.execute("BEGIN")
    try:
        migration(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class Database:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._migrations: dict[str, Migration] = {}
        self._lock = threading.Lock()

    def register(self, name: str, migration: Migration) -> None:
        """Tables a store needs; created (idempotently) on first use by each connection."""
        with self._lock:
            self._migrations[name] = migration
        conn = getattr(self._local, "connection", None)
        if conn is not None:
            if self.in_batch():  # inside this thread's batch: a savepoint of it
                with self.transaction():
                    migration(conn)
                return
            try:
                _migrate(conn, migration)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                with self.transaction():  # tables to create and a writer in the way: queue behind it
                    migration(conn)

    def connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "connection", None)
        if conn is None:
            conn = self._open()
            self._local.connection = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        delay = 0.01
        while True:
            try:
                return self._open_once()
            except sqlite3.OperationalError as exc:
                # Switching to WAL (or creating tables) while another process does the same can
                # answer "locked" at once, without SQLite's busy handler: wait and try again.
                if not _is_busy(exc) or time.monotonic() + delay > deadline:
                    raise StorageError(f"cannot open the database {self.path}: {exc}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot open the database {self.path}: {exc}") from exc

    def _open_once(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, never torn
            conn.execute("PRAGMA foreign_keys=ON")
            conn.executescript(_SCHEMA)
            with self._lock:
                migrations = list(self._migrations.values())
            for migration in migrations:
                _migrate(conn, migration)
        except BaseException:
            conn.close()
            raise
        return conn

    def in_batch(self) -> bool:
        """Whether this thread's writes are inside a `batch()` (not committed until it ends)."""
        return bool(getattr(self._local, "batch", 0))

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around every write made on this thread until the block ends: all of them
        commit at its end, or none (an exception rolls the batch back). A batch inside a batch joins it."""
        if self.in_batch():
            yield
            return
        try:
            with self.transaction():
                self._local.batch, self._local.savepoints = 1, 0
                try:
                    yield
                finally:
                    self._local.batch = 0
        except sqlite3.Error as exc:  # the COMMIT itself failed (disk full, say): rolled back
            raise StorageError(f"database write failed: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: all or nothing, one writer at a time across processes (inside a
        `batch()`, a savepoint of the batch)."""
        conn = self.connection()
        if self.in_batch():
            with self._savepoint(conn):
                yield conn
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"the database is busy or unavailable: {exc}") from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:  # SQLite rolls back by itself on some errors (a full disk)
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):  # a statement or the COMMIT failed: a storage error, not a bug
                raise StorageError(f"database write failed and was rolled back: {exc}") from exc
            raise

    @contextmanager
    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[None]:
        self._local.savepoints += 1
        name = f"write_{self._local.savepoints}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            if conn.in_transaction:  # this write only; the batch decides about the rest
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")

    def read(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        try:
            cursor = self.connection().execute(sql, params)
            return cursor.fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"database read failed: {exc}") from exc

    def bump(self, conn: sqlite3.Connection, store: str) -> None:
        """Count a write to `store` (call inside the write's transaction)."""
        conn.execute("INSERT INTO generations(store, value) VALUES (?, 1) "
                     "ON CONFLICT(store) DO UPDATE SET value = value + 1", (store,))

    def generation(self, store: str) -> int:
        rows = self.read("SELECT value FROM generations WHERE store = ?", (store,))
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        conn = getattr(self._local, "connection", None)
        if conn is not None:
            conn.close()
            self._local.connection = None
