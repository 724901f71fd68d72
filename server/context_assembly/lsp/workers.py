"""The worker threads that run handlers, bounded per process.

Over stdio a server has its own pool. Over TCP and WebSocket every connection gets a
`ConnectionWorkers` over one shared pool (`serve --workers`), so N clients use at most that many
threads, not N pools: a connection's view submits to the shared threads, and closing the
connection cancels what it queued and has not started, while the pool goes on for the others.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any, TypeVar

T = TypeVar("T")

WORKERS = 8  # threads of one pool: a stdio server's, or the one every network connection shares


class ConnectionClosed(RuntimeError):
    """Work submitted after its connection closed (a request that arrived as the client left)."""


def pool(workers: int = WORKERS) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc")


class ConnectionWorkers(Executor):
    """One connection's share of the process's pool (an Executor, for `run_in_executor`)."""

    def __init__(self, shared: ThreadPoolExecutor) -> None:
        self.shared = shared
        self._lock = threading.Lock()
        self._pending: set[Future[Any]] = set()
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the connection is closed: no new work")
            future = self.shared.submit(fn, *args, **kwargs)
            self._pending.add(future)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        if cancel_futures:
            for future in pending:
                future.cancel()  # only what has not started; running work finishes on its thread
        if wait:
            wait_for(pending)

    def __len__(self) -> int:
        """Work of this connection queued or running."""
        with self._lock:
            return len(self._pending)
