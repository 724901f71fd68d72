"""One PostgreSQL database shared by many sidecars: a connection pool, migrations, write generations.

Connections come from a `psycopg_pool.ConnectionPool` opened on the first call (a workspace opens
at once even when the server is away). Every failure to reach the database becomes a
StorageError (-32006) for that call only; the pool drops a connection that broke and opens new ones
when the server is back, so the sidecar recovers by itself. (Checking each connection before
lending it would cost a round trip per call; after a restart, a call on a stale connection fails
once instead.)

Every row carries the project key (`stores.project`), so one database holds many projects. The
`ca_generations` table counts writes per (project, store); a write bumps it in its own
transaction and, once committed, announces the new count with `NOTIFY` on the project's channel.
A cache asks `generation()` before it uses a result. With `stores.invalidation` "notify" (the
default) the answer comes from memory, kept by a `GenerationListener` while it proves itself live,
and from one indexed read of the database otherwise; with "read" always from the database.

The NOTIFY goes in a transaction of its own right after the write's commit, not inside it:
PostgreSQL serialises the commits of notifying transactions under one lock held through the
flush to disk, which would cost concurrent writers their overlapping flushes. The listeners
re-read the counts every few seconds, which covers a writer dying between the two.

`batch()` holds one pooled connection for the thread until the block ends: every store's write
on that thread joins its transaction (as a savepoint), so the batch commits or rolls back whole.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
import psycopg_pool

from ...errors import ContextAssemblyError, StorageError
from .listener import GenerationListener, announcement, channel
from .migrations import migrate

SWARM_PROJECT = "*swarm*"  # the project key of the swarm-level namespace, shared by every project
CONNECT_TIMEOUT_S = 3
POOL_TIMEOUT_S = 3.0
# TCP: a server that stops answering (a partition, a frozen host) fails a call in about half a
# minute rather than the kernel's ~15; a local socket has no such timer (the README says so)
KEEPALIVES: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
              "tcp_user_timeout": 30_000}
PROBE_WAIT_S = 0.5  # how long a failing call waits for the reason connecting fails
WHY_KEPT_S = 60.0  # how long the reason a connection failed is reused before it is looked for again
RETRY_AFTER_S = 2.0  # after a failure to connect, calls fail at once for this long (no pile-up of waits)
INVALIDATION = ("notify", "read")  # stores.invalidation: generations pushed by the database, or read per use


# `\u0000` in JSON text (a U+0000 of a string), not the end of an escaped backslash (`\\u0000`)
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def jsonb_text(text: str) -> str:
    """JSON text jsonb accepts: U+0000 (which jsonb cannot hold) as U+FFFD. The jsonb copy only
    narrows searches in the database; the exact text beside it is what is read back."""
    return _NUL_ESCAPE.sub(r"\1\\ufffd", text) if "\\u0000" in text else text


def _unreachable(exc: Exception) -> bool:
    """Whether a failure means the database cannot be reached (no connection, a connection lost or
    refused, the server shutting down), as opposed to one statement failing on a live connection:
    only the former makes the next calls fail at once for a while."""
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return True
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class PgDatabase:
    def __init__(self, dsn: str | None, project: str, *, max_size: int = 8, missing_dsn: str = "no DSN",
                 invalidation: str = "notify") -> None:
        self.dsn = dsn
        self.project = project
        self._missing_dsn = missing_dsn
        self._pool = psycopg_pool.ConnectionPool(
            dsn or "", open=False, min_size=1, max_size=max_size, timeout=POOL_TIMEOUT_S,
            kwargs={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "context-assembly", **KEEPALIVES},
            name="context-assembly")
        self.listener = GenerationListener(dsn, (project, SWARM_PROJECT), connect_kwargs={
            "connect_timeout": CONNECT_TIMEOUT_S, "application_name": f"context-assembly {channel(project)}"}
        ) if dsn and invalidation == "notify" else None
        self.generation_reads = 0  # generations read from the database (the listener saves these)
        self._writes = threading.local()  # the counts the current transaction bumped, announced after commit
        self._opened = False
        self._migrated = False
        self.applied: list[int] = []  # the migrations this process applied on its first connect
        self._down: tuple[float, str] | None = None  # (monotonic deadline, message) after a failure
        self._why: tuple[float, str] | None = None  # (monotonic deadline, why connecting failed)
        self._probe: threading.Thread | None = None  # the attempt that finds it
        self._probe_lock = threading.Lock()
        self._lock = threading.Lock()
        self._held = threading.local()  # the connection of this thread's batch()

    def _ready(self) -> psycopg_pool.ConnectionPool:
        if not self.dsn:
            raise StorageError(self._missing_dsn, {"backend": "postgres"})
        self._fail_fast()
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        if not self._migrated:
            with self._lock:
                self._fail_fast()  # a call that waited for the lock meanwhile fails at once, as later calls do
                if not self._migrated:
                    try:
                        with self._pool.connection() as conn:
                            self.applied = migrate(conn)
                            self._migrated = True
                    except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as exc:
                        if _unreachable(exc):  # marked before the lock goes: the calls queued on it fail at once
                            raise self._outage(exc) from exc
                        raise
        return self._pool

    def _fail_fast(self) -> None:
        down = self._down
        if down is not None and time.monotonic() < down[0]:
            raise StorageError(down[1], {"backend": "postgres", "retry_after_s": RETRY_AFTER_S})

    def _outage(self, exc: Exception) -> StorageError:
        """The database cannot be reached: calls fail at once for RETRY_AFTER_S, each with this error."""
        message = (f"the PostgreSQL database is unreachable ({_where(self.dsn or '')}): "
                   + (f"no connection within {POOL_TIMEOUT_S:g} s{self._last_connect_error()}"
                      if isinstance(exc, psycopg_pool.PoolTimeout) else _first_line(exc))
                   + "; the sidecar reconnects when it is back")
        self._down = (time.monotonic() + RETRY_AFTER_S, message)
        self._drop_broken()
        return StorageError(message, {"backend": "postgres"})

    def in_batch(self) -> bool:
        """Whether this thread's writes are inside a `batch()` (not committed until it ends)."""
        return getattr(self._held, "conn", None) is not None

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around every write made on this thread until the block ends: all of them
        commit at its end, or none (an exception rolls the batch back). A batch inside a batch joins it."""
        if self.in_batch():
            yield
            return
        with self.connection() as conn, conn.transaction():  # the outer block: inner ones are savepoints
            self._held.conn = conn
            try:
                yield
            finally:
                self._held.conn = None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction: committed on success, rolled back on error
        (inside a `batch()`, the batch's connection, in a savepoint). The write counts bumped in it are
        announced once it commits (a batch's, when the whole batch commits)."""
        held = getattr(self._held, "conn", None)
        outer = getattr(self._writes, "bumped", None)
        bumped: list[tuple[str, str, int]] = []
        self._writes.bumped = bumped
        try:
            if held is not None:
                with held.transaction():
                    yield held
                if outer is not None:  # the savepoint held: its counts go with the batch's
                    outer.extend(bumped)
                return
            with self._ready().connection() as conn:
                yield conn
                if bumped:
                    conn.commit()
                    self._announce(conn, bumped)
            self._down = None
        except ContextAssemblyError:
            raise
        except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as exc:
            if not _unreachable(exc):  # a deadlock, a serialisation failure, a cancelled statement: this call's
                raise StorageError(f"PostgreSQL failed: {_first_line(exc)}", {"backend": "postgres"}) from exc
            raise self._outage(exc) from exc
        except psycopg.errors.RaiseException as exc:  # a trigger refusing a change (append-only log)
            raise StorageError(f"the database refused the change: {exc.diag.message_primary}",
                               {"backend": "postgres"}) from exc
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL failed: {_first_line(exc)}", {"backend": "postgres"}) from exc
        finally:
            self._writes.bumped = outer

    def _last_connect_error(self) -> str:
        """Why connecting fails (a wrong database name, a refused password: a pool timeout alone read
        as an outage that would pass), found by one attempt of its own at most once a minute, on a
        thread: the failing call waits PROBE_WAIT_S for it at most (a refusal comes at once; a
        server that never answers is not waited for again, and its reason comes with a later call)."""
        now = time.monotonic()
        if self._why is not None and now < self._why[0]:
            return self._why[1]
        with self._probe_lock:  # (not `_lock`: `_ready` holds that while it waits for a connection)
            probe = self._probe
            if probe is None or not probe.is_alive():
                probe = self._probe = threading.Thread(target=self._find_why, name="pg-why", daemon=True)
                probe.start()
        probe.join(PROBE_WAIT_S)
        return self._why[1] if self._why is not None else ""

    def _find_why(self) -> None:
        try:
            with psycopg.connect(self.dsn or "", connect_timeout=CONNECT_TIMEOUT_S, **KEEPALIVES):
                why = ""
        except psycopg.Error as exc:
            why = f" ({_first_line(exc)})"
        self._why = (time.monotonic() + WHY_KEPT_S, why)

    def _announce(self, conn: psycopg.Connection[Any], bumped: list[tuple[str, str, int]]) -> None:
        """After the write's commit: tell the listeners (this process's at once) what it counted."""
        if self.listener is not None:
            self.listener.merge(bumped)
        try:
            for project, store, value in bumped:
                conn.execute("SELECT pg_notify(%s, %s)", (channel(project), announcement(project, store, value)))
            conn.commit()
        except psycopg.Error:  # the write is committed; the listeners' periodic re-read covers the lost NOTIFY
            conn.rollback()

    def _drop_broken(self) -> None:
        """Discard the pool's idle connections that died with the server, so none fails a later call."""
        if self._opened:
            with suppress(psycopg.Error):
                self._pool.check()

    def read(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        with self.connection() as conn:
            return conn.execute(sql, params).fetchall()

    def bump(self, conn: psycopg.Connection[Any], store: str, project: str | None = None) -> None:
        """Count a write to `store` (inside the write's transaction, so it counts only if it commits)."""
        project = self.project if project is None else project
        row = conn.execute("INSERT INTO ca_generations(project, store, value) VALUES (%s, %s, 1) "
                           "ON CONFLICT (project, store) DO UPDATE SET value = ca_generations.value + 1 "
                           "RETURNING value", (project, store)).fetchone()
        bumped = getattr(self._writes, "bumped", None)
        if bumped is not None and row is not None:
            bumped.append((project, store, int(row[0])))

    def migrate(self) -> dict[str, Any]:
        """Connect (which applies missing migrations) and say what was applied and where the schema is."""
        with self.connection() as conn:
            row = conn.execute("SELECT max(version) FROM ca_schema_version").fetchone()
        return {"backend": "postgres", "project": self.project, "applied": list(self.applied),
                "schema_version": int(row[0]) if row and row[0] is not None else 0}

    def generation(self, store: str) -> int:
        """The write count of `store` in this project plus the swarm namespace: from the listener while it
        can be trusted, else read from the database."""
        listener = self.listener
        if listener is not None:
            value = listener.value(store)
            if value is not None:
                return value
        rows = self.read("SELECT project, value FROM ca_generations WHERE project IN (%s, %s) AND store = %s",
                         (self.project, SWARM_PROJECT, store))
        self.generation_reads += 1
        if listener is not None:
            listener.merge((str(project), store, int(value)) for project, value in rows)
            listener.start()  # once the schema exists (the read above migrated it)
        return sum(int(value) for _, value in rows)

    def close(self) -> None:
        if self.listener is not None:
            self.listener.stop()
        with self._lock:
            if self._opened:
                self._pool.close()
                self._opened = False


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _where(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "invalid DSN"
    host = info.get("host") or "local socket"
    return f"host {host}" + (f", port {info['port']}" if info.get("port") else "") + \
        (f", database {info['dbname']}" if info.get("dbname") else "")
