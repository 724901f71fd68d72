"""Who holds the graph database, and for how long (SPEC §5.3, §11).

LadybugDB (like Kuzu, which it forks) lets one process open a database at a time, so every sidecar
opens it only while it holds the workspace lock `kuzu` (`.codebolt/.locks/kuzu.lock`) and closes it
before letting go: open → work → close. Closing checkpoints the write-ahead log into the file; a
process that dies mid-write leaves a WAL that the next open replays or discards, so the graph stays
readable and committed writes stay.

Cost, measured on the reference machine (2 cores, 12 to 10k nodes, medians, noisy): opening takes
3–11 ms and closing 2–25 ms (the checkpoint and its fsync). Open → work → close per operation made
a node lookup cost 9–35 ms and an upsert 13–55 ms; on a database kept open the lookup takes ~0.5 ms
and the upsert 3–15 ms (two fsyncs). So a process keeps the database (and the lock) while nobody
else asks for it. Processes that want it queue first come, first served and say so
(`workspace_lock`), and the holder (its `WantProbe`) closes once it has been idle for `hold_s`, or
after the job at hand once it has held the database for its share of `max_hold_s`: `max_hold_s`
divided among itself and those in line, never below `min_turn_s`, so one round of turns takes
about `max_hold_s` however many processes take part (up to `max_hold_s / min_turn_s` of them). A
holder that lets go with work left queues behind the waiters. Nobody waiting, it closes after
`idle_hold_s` without work (an agent's next turn, seconds later, finds it open: reopening cost
~5 ms of a ~10 ms assembly), or when the process is exiting. An idle holder looks for a waiter
every `poll_s`, so a waiter's turn comes within `hold_s` plus that and the line's 10 ms look. A
waiter fails ("still busy") only when the lock has not changed hands for `lock_timeout_s`: a holder
that does not let go, never a long line that moves. A crash while holding leaves a WAL for the next
opener to replay; `hold_s=0` gives strict open → work → close for each batch of queued calls.

All work of one `KuzuSessions` runs on an owner thread: the file lock is per thread and must be
released by the thread that took it, and engine connections are then only ever used by one thread.
The thread lives only as long as a session, so nothing lingers (or holds the lock) once closed.
"""

from __future__ import annotations

import contextlib
import enum
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import ladybug
from attrs import define, field, frozen

from ...errors import ContextAssemblyError, StorageError
from ...workspace.atomic import WantProbe, has_line, workspace_lock
from ...workspace.layout import WorkspaceLayout
from .migrate import migrate_from_kuzu, written_by_kuzu

T = TypeVar("T")

LOCK_NAME = "kuzu"
DATABASE_FILE = "graph.kuzu"
# Without a line (no `fcntl`: Windows) waiters poll the lock every 50 ms: a holder that let go with
# work left pauses longer than that, so a waiter sees the lock free once (it took it straight back)
_YIELD_S = 0.06


BUFFER_ENV = "CONTEXT_ASSEMBLY_GRAPH_BUFFER_MB"
DEFAULT_BUFFER_MB = 64


def buffer_pool_bytes() -> int:
    """The embedded graph's buffer pool: CONTEXT_ASSEMBLY_GRAPH_BUFFER_MB megabytes, else 64."""
    text = os.environ.get(BUFFER_ENV, "").strip()
    megabytes = int(text) if text.isdigit() and int(text) >= 16 else DEFAULT_BUFFER_MB
    return megabytes * 1024 * 1024


@frozen
class SessionSettings:
    hold_s: float = 0.2  # someone waiting: how long an idle session still waits for work (0: close at once)
    max_hold_s: float = 2.0  # someone waiting: one round of busy turns, shared among holder and waiters
    min_turn_s: float = 0.25  # someone waiting: the least a busy session keeps the database in a row
    idle_hold_s: float = 60.0  # nobody waiting: how long an idle session keeps the database
    poll_s: float = 0.1  # how often an idle session looks for a waiting process (and the process's exit)
    lock_timeout_s: float = 10.0  # a waiter fails once the lock has not changed hands this long
    query_timeout_s: float = 10.0
    # Kuzu's default is 80% of RAM, per process. A write transaction must fit in it: a sidecar's
    # writes do; `memory import` of a big graph (one transaction) asks for more (BUFFER_ENV)
    buffer_pool_bytes: int = field(factory=lambda: buffer_pool_bytes())
    max_threads: int = 2


class _End(enum.Enum):
    """Why `_next` ends a session."""

    IDLE = "idle"  # nobody needs it: no job without a session, unused for `idle_hold_s`, or the process exits
    WANTED = "wanted"  # another process waits, and this one has been idle for `hold_s`


@define
class _Job:
    work: Callable[[ladybug.Connection], Any]
    future: Future[Any]


@define
class _Session:
    stack: contextlib.ExitStack
    conn: ladybug.Connection
    since: float  # opened (monotonic)
    last: float  # its last job ended (monotonic)


def _give_way() -> None:
    """After letting go with work left: where waiters stand in line (POSIX) the next session queues
    behind them by itself; without a line, pause so that a polling waiter finds the lock free."""
    if not has_line():
        time.sleep(_YIELD_S)


class KuzuSessions:
    """Runs callables against an open connection, inside a session under the inter-process lock."""

    def __init__(self, layout: WorkspaceLayout, settings: SessionSettings | None = None,
                 on_open: Callable[[ladybug.Connection, bool], None] | None = None) -> None:
        """`on_open(conn, created)` runs at the start of each session (schema setup)."""
        self.layout = layout
        self.settings = settings or SessionSettings()
        self._on_open = on_open
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._mutex = threading.Lock()
        self._owner: threading.Thread | None = None
        self._current: ladybug.Connection | None = None

    @property
    def database_path(self) -> Path:
        return self.layout.kuzu_dir / DATABASE_FILE

    def run(self, work: Callable[[ladybug.Connection], T]) -> T:
        """`work(conn)` on the owner thread; its result or its exception."""
        if threading.current_thread() is self._owner and self._current is not None:
            return work(self._current)  # nested call from a job: already inside the session
        future: Future[T] = Future()
        with self._mutex:
            self._jobs.put(_Job(work, future))
            if self._owner is None:
                self._owner = threading.Thread(target=self._serve, name="kuzu-session", daemon=False)
                self._owner.start()
        return future.result()

    def close(self) -> None:
        """End the current session now (later calls open a new one)."""
        with self._mutex:
            owner = self._owner
            if owner is None:
                return
            self._jobs.put(None)
        if owner is not threading.current_thread():
            owner.join()

    # -- owner thread -------------------------------------------------------------------------

    def _serve(self) -> None:
        session: _Session | None = None
        waiting = WantProbe(self.layout, LOCK_NAME)  # whether another process asks for the lock
        try:
            while True:
                job = self._next(session, waiting)
                if isinstance(job, _End):
                    session = self._end(session)  # jobs come meanwhile: the next session queues behind waiters
                    if job is _End.WANTED and not self._jobs.empty():
                        _give_way()
                    with self._mutex:
                        if self._jobs.empty():
                            self._owner = None
                            return
                    continue
                if job is None:  # close(): end the session; the thread goes once the queue is empty
                    session = self._end(session)
                    continue
                if session is not None and self._turn_over(session, waiting):
                    session = self._end(session)  # the next session queues behind the waiters
                    _give_way()
                if session is None:
                    try:
                        session = self._begin()
                    except BaseException as exc:
                        job.future.set_exception(exc)
                        continue
                session = self._do(job, session)
                if session is not None:
                    session.last = time.monotonic()
                if self.settings.hold_s <= 0 and self._jobs.empty():
                    session = self._end(session)
        finally:
            self._end(session)
            waiting.close()
            with self._mutex:
                if self._owner is threading.current_thread():
                    self._owner = None

    def _turn_over(self, session: _Session, waiting: WantProbe) -> bool:
        """Whether a busy session has had its turn: someone waits, and it has held the database for
        its share of `max_hold_s` (never less than `min_turn_s`)."""
        settings = self.settings
        held = time.monotonic() - session.since
        least = min(settings.min_turn_s, settings.max_hold_s)
        if held <= least or not waiting.wanted():
            return False
        return held > max(settings.max_hold_s / (1 + waiting.waiting()), least)

    def _next(self, session: _Session | None, waiting: WantProbe) -> _Job | _End | None:
        """The next job, None (close), or why the session ends (`_End`)."""
        if session is None:
            try:
                return self._jobs.get_nowait()
            except queue.Empty:
                return _End.IDLE
        settings = self.settings
        while True:
            idle = time.monotonic() - session.last
            if idle >= settings.idle_hold_s or not threading.main_thread().is_alive():
                return _End.IDLE
            if idle >= settings.hold_s and waiting.wanted():
                return _End.WANTED
            wait = min(settings.poll_s, settings.idle_hold_s - idle)
            if idle < settings.hold_s:
                wait = min(wait, settings.hold_s - idle)
            try:
                return self._jobs.get(timeout=max(wait, 0.001))
            except queue.Empty:
                continue

    def _do(self, job: _Job, session: _Session) -> _Session | None:
        self._current = session.conn
        try:
            result = job.work(session.conn)
        except ContextAssemblyError as exc:
            job.future.set_exception(exc)
        except BaseException as exc:
            job.future.set_exception(exc)
            return self._end(session)  # an unexpected failure: start the next job on a fresh database
        else:
            job.future.set_result(result)
        finally:
            self._current = None
        return session

    def _begin(self) -> _Session:
        settings = self.settings
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(workspace_lock(self.layout, LOCK_NAME, timeout=settings.lock_timeout_s))
            path = self.database_path
            path.parent.mkdir(parents=True, exist_ok=True)
            if written_by_kuzu(path):
                migrate_from_kuzu(path)
            created = not path.exists()
            database = ladybug.Database(str(path), buffer_pool_size=settings.buffer_pool_bytes,
                                     max_num_threads=settings.max_threads)
            stack.callback(database.close)
            conn = ladybug.Connection(database, num_threads=settings.max_threads)
            stack.callback(conn.close)
            conn.set_query_timeout(int(settings.query_timeout_s * 1000))
            if self._on_open is not None:
                self._on_open(conn, created)
        except RuntimeError as exc:
            stack.close()
            raise StorageError(f"cannot open the knowledge graph: {exc}",
                               {"path": str(self.database_path)}) from exc
        except OSError as exc:
            stack.close()
            raise StorageError(f"cannot open the knowledge graph: {exc}",
                               {"path": str(self.database_path)}) from exc
        except BaseException:
            stack.close()
            raise
        now = time.monotonic()
        return _Session(stack=stack, conn=conn, since=now, last=now)

    @staticmethod
    def _end(session: _Session | None) -> None:
        if session is not None:
            # A close failure must not keep the lock: ExitStack still releases it.
            with contextlib.suppress(RuntimeError):
                session.stack.close()
        return None
