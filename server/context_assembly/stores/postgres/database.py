"""One PostgreSQL database shared by many sidecars: a connection pool, migrations, write generations.

Connections come from a `psycopg_pool.ConnectionPool` opened on the first call (a workspace opens
at once even when the server is away). Every failure to reach the database becomes a
StorageError (-32006) for that call only; the pool drops a connection that broke and opens new ones
when the server is back, so the sidecar recovers by itself. (Checking each connection before
lending it would cost a round trip per call; after a restart, a call on a stale connection fails
once instead.)

Every row carries the project key (`stores.project`), so one database holds many projects. The
`ca_generations` table counts writes per (project, store); a write bumps it in its own
transaction. A cache asks `generation()` before it uses a result: one indexed read, so a write
committed by any sidecar on any machine is seen by the very next assembly. (A LISTEN/NOTIFY push
was weighed and left out: a notification reaches the other sidecars asynchronously after the
commit, so a cache trusting it could serve a stale result inside that window.)

`batch()` holds one pooled connection for the thread until the block ends: every store's write
on that thread joins its transaction (as a savepoint), so the batch commits or rolls back whole.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
import psycopg_pool

from ...errors import ContextAssemblyError, StorageError
from .migrations import migrate

SWARM_PROJECT = "*swarm*"  # the project key of the swarm-level namespace, shared by every project
CONNECT_TIMEOUT_S = 3
POOL_TIMEOUT_S = 3.0
RETRY_AFTER_S = 2.0  # after a failure to connect, calls fail at once for this long (no pile-up of waits)


class PgDatabase:
    def __init__(self, dsn: str | None, project: str, *, max_size: int = 8, missing_dsn: str = "no DSN") -> None:
        self.dsn = dsn
        self.project = project
        self._missing_dsn = missing_dsn
        self._pool = psycopg_pool.ConnectionPool(
            dsn or "", open=False, min_size=1, max_size=max_size, timeout=POOL_TIMEOUT_S,
            kwargs={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "context-assembly"},
            name="context-assembly")
        self._opened = False
        self._migrated = False
        self.applied: list[int] = []  # the migrations this process applied on its first connect
        self._down: tuple[float, str] | None = None  # (monotonic deadline, message) after a failure
        self._lock = threading.Lock()
        self._held = threading.local()  # the connection of this thread's batch()

    def _ready(self) -> psycopg_pool.ConnectionPool:
        if not self.dsn:
            raise StorageError(self._missing_dsn, {"backend": "postgres"})
        down = self._down
        if down is not None and time.monotonic() < down[0]:
            raise StorageError(down[1], {"backend": "postgres", "retry_after_s": RETRY_AFTER_S})
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        if not self._migrated:
            with self._lock, self._pool.connection() as conn:
                if not self._migrated:
                    self.applied = migrate(conn)
                    self._migrated = True
        return self._pool

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
        (inside a `batch()`, the batch's connection, in a savepoint)."""
        held = getattr(self._held, "conn", None)
        try:
            if held is not None:
                with held.transaction():
                    yield held
                return
            with self._ready().connection() as conn:
                yield conn
            self._down = None
        except ContextAssemblyError:
            raise
        except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as exc:
            message = (f"the PostgreSQL database is unreachable ({_where(self.dsn or '')}): "
                       + (f"no connection within {POOL_TIMEOUT_S:g} s" if isinstance(exc, psycopg_pool.PoolTimeout)
                          else _first_line(exc)) + "; the sidecar reconnects when it is back")
            self._down = (time.monotonic() + RETRY_AFTER_S, message)
            self._drop_broken()
            raise StorageError(message, {"backend": "postgres"}) from exc
        except psycopg.errors.RaiseException as exc:  # a trigger refusing a change (append-only log)
            raise StorageError(f"the database refused the change: {exc.diag.message_primary}",
                               {"backend": "postgres"}) from exc
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL failed: {_first_line(exc)}", {"backend": "postgres"}) from exc

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
        conn.execute("INSERT INTO ca_generations(project, store, value) VALUES (%s, %s, 1) "
                     "ON CONFLICT (project, store) DO UPDATE SET value = ca_generations.value + 1",
                     (project, store))

    def migrate(self) -> dict[str, Any]:
        """Connect (which applies missing migrations) and say what was applied and where the schema is."""
        with self.connection() as conn:
            row = conn.execute("SELECT max(version) FROM ca_schema_version").fetchone()
        return {"backend": "postgres", "project": self.project, "applied": list(self.applied),
                "schema_version": int(row[0]) if row and row[0] is not None else 0}

    def generation(self, store: str) -> int:
        """The write count of `store` in this project plus the swarm namespace, read from the database."""
        rows = self.read("SELECT coalesce(sum(value), 0) FROM ca_generations WHERE project IN (%s, %s) "
                         "AND store = %s", (self.project, SWARM_PROJECT, store))
        return int(rows[0][0])

    def close(self) -> None:
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
