"""The worker threads that run handlers, bounded per process.

Over stdio a server has its own pool. Over TCP and WebSocket every connection gets a
`ConnectionWorkers` over one `SharedWorkers` (`serve --workers`), so N clients use at most that
many threads, not N pools. The threads are shared in turn: each connection queues its own work, and
a thread that comes free takes the oldest job of the next connection with work waiting, so a client
that pipelines thousands of requests delays another's next request by about one job per busy
connection, not by its whole backlog (it did: 13-19 s behind 100k queued reads). Closing a
connection cancels what it queued and has not started, while the threads go on for the others.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any, TypeVar

from attrs import frozen

T = TypeVar("T")

WORKERS = 8  # threads of one pool: a stdio server's, or the one every network connection shares


class ConnectionClosed(RuntimeError):
    """Work submitted after its connection closed (a request that arrived as the client left)."""


def pool(workers: int = WORKERS) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc")


@frozen
class _Job:
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class SharedWorkers(Executor):
    """The threads every network connection shares, handed to the connections in turn. At most
    `size` jobs are with the threads at once, so the threads' own queue never holds a backlog;
    `submit` itself (the access log's writes) goes straight to the threads, outside the turns."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.size = workers
        self.threads = pool(workers)
        # guards the turns and every connection's queue; re-entered by a future's done callback
        # (`ConnectionWorkers._finished`) when a job fails under it
        self.lock = threading.RLock()
        self._busy = 0  # jobs handed to the threads and not finished
        self._turns: deque[ConnectionWorkers] = deque()  # the connections with queued jobs, next first

    def connection(self) -> ConnectionWorkers:
        return ConnectionWorkers(self)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self.threads.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self.lock:
            queued = [job.future for connection in self._turns for job in connection.queue]
            for connection in self._turns:
                connection.queue.clear()
            self._turns.clear()
        for future in queued:  # never to run: the threads are going away
            future.cancel()
        self.threads.shutdown(wait=wait)  # (jobs handed over start as a thread frees: left to finish)

    def queued(self, connection: ConnectionWorkers) -> None:
        """`connection` queued a job (under `lock`): it takes its turn, and a free thread starts."""
        if len(connection.queue) == 1:  # it had none: not in the turns yet
            self._turns.append(connection)
        self._dispatch()

    def withdraw(self, connection: ConnectionWorkers) -> None:
        """`connection` dropped its queue (under `lock`)."""
        if connection in self._turns:
            self._turns.remove(connection)

    def _dispatch(self) -> None:
        while self._busy < self.size and self._turns:
            connection = self._turns.popleft()
            job = connection.queue.popleft()
            if connection.queue:
                self._turns.append(connection)  # the back of the line: one job a turn
            if not job.future.set_running_or_notify_cancel():
                continue  # cancelled while it waited
            try:
                self.threads.submit(self._run, job)
            except RuntimeError as exc:  # the threads were shut down: the process is stopping
                job.future.set_exception(ConnectionClosed(str(exc)))
                continue
            self._busy += 1

    def _run(self, job: _Job) -> None:
        try:
            result = job.fn(*job.args, **job.kwargs)
        except BaseException as exc:  # as ThreadPoolExecutor does: the future carries it
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)
        finally:
            with self.lock:
                self._busy -= 1
                self._dispatch()


class ConnectionWorkers(Executor):
    """One connection's share of the shared threads (an Executor, for `run_in_executor`): its jobs
    queue here, in order, until their turn."""

    def __init__(self, shared: SharedWorkers) -> None:
        self.shared = shared
        self.queue: deque[_Job] = deque()  # guarded by `shared.lock`
        self._pending: set[Future[Any]] = set()  # queued or running
        self._closed = False
        self._on_idle: list[Callable[[], None]] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self.shared.lock:
            if self._closed:
                raise ConnectionClosed("the connection is closed: no new work")
            self._pending.add(future)
            self.queue.append(_Job(future, fn, args, kwargs))
            self.shared.queued(self)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, future: Future[Any]) -> None:
        with self.shared.lock:
            self._pending.discard(future)
            idle, self._on_idle = (self._on_idle, []) if not self._pending else ([], self._on_idle)
        for callback in idle:
            callback()

    def when_idle(self, callback: Callable[[], None]) -> None:
        """Call `callback` once none of this connection's work is queued or running: now, or on the
        thread that finishes the last of it (a closed connection's session is closed so: its
        running requests had their stores shut under them)."""
        with self.shared.lock:
            if self._pending:
                self._on_idle.append(callback)
                return
        callback()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self.shared.lock:
            self._closed = True
            pending = list(self._pending)
            queued: list[Future[Any]] = []
            if cancel_futures:
                queued = [job.future for job in self.queue]
                self.queue.clear()
                self.shared.withdraw(self)
        for future in queued:  # outside the lock: their callbacks take it
            future.cancel()  # only what has not started; running work finishes on its thread
        if wait:
            wait_for(pending)

    def __len__(self) -> int:
        """Work of this connection queued or running."""
        with self.shared.lock:
            return len(self._pending)
