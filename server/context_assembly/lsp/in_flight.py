"""How many of a network connection's requests are in progress, and the wait for room below the cap.

A client that pipelines requests faster than they are answered held each one (its parsed params,
its task, its queued job) until its turn: 100k pipelined reads grew the server by 727 MiB. Over TCP
and WebSocket, a connection's next message is read only while fewer than `most` of its requests
are unanswered (`serve --max-in-flight`); the rest wait in the client's socket, as TCP flow control
has them wait. One exception: while a handler waits for this client's own answer (`llm/complete`),
reading stops for nothing until the answer is read, or the answer that would free the handler could
never be read; then a request over the cap is refused at once (`admit`), and answers and
notifications go through.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

MAX_IN_FLIGHT = 64  # per connection: 8× the default worker threads, room for a pipelining client


class InFlight:
    """One connection's unanswered requests by id (ids may repeat: each request counts). Requests
    are counted on the event loop; answers from any thread (a stdio worker writes its own)."""

    def __init__(self, most: int = MAX_IN_FLIGHT) -> None:
        self.most = most
        self._ids: Counter[Any] = Counter()
        self._count = 0
        self._asking: set[Any] = set()  # ids of server-to-client requests a handler waits on, unanswered
        self._lock = threading.Lock()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None

    def __len__(self) -> int:
        return self._count

    def admit(self, msg_id: Any) -> bool:
        """Count a request about to be handled; False (not counted) when `most` are in progress."""
        with self._lock:
            if self._count >= self.most:
                return False
            self._ids[msg_id] += 1
            self._count += 1
            return True

    def answered(self, msg_id: Any) -> None:
        """An answer to `msg_id` was written (one that was never counted is ignored)."""
        with self._lock:
            left = self._ids.get(msg_id)
            if not left:
                return
            if left == 1:
                del self._ids[msg_id]
            else:
                self._ids[msg_id] = left - 1
            self._count -= 1
            waiter = self._waiter if self._count < self.most else None
            if waiter is not None:
                self._waiter = None
        if waiter is not None:
            _wake(waiter)

    @property
    def waiting_on_client(self) -> bool:
        return bool(self._asking)

    def full(self) -> bool:
        """Whether the next message waits for room (`room`)."""
        with self._lock:
            return self._count >= self.most and not self._asking

    @contextlib.contextmanager
    def asking(self, msg_id: Any) -> Iterator[None]:
        """Around the server-to-client request `msg_id` a handler waits on: reading goes on until
        its answer is read (`replied`) or the handler gives up."""
        with self._lock:
            self._asking.add(msg_id)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            _wake(waiter)
        try:
            yield
        finally:
            self.replied(msg_id)

    def replied(self, msg_id: Any) -> None:
        """The client's answer to `msg_id` was read: the handler waiting on it no longer waits on the
        client (the message after the answer is held again at the cap)."""
        with self._lock:
            self._asking.discard(msg_id)

    async def room(self) -> None:
        """Wait (on the event loop) until the next message may be read."""
        while True:
            with self._lock:
                if self._count < self.most or self._asking:
                    return
                loop = asyncio.get_running_loop()
                waiting = loop.create_future()
                self._waiter = (loop, waiting)
            try:
                await waiting
            finally:
                with self._lock:
                    if self._waiter is not None and self._waiter[1] is waiting:
                        self._waiter = None


def _wake(waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]) -> None:
    loop, waiting = waiter
    loop.call_soon_threadsafe(_resolve, waiting)


def _resolve(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():
        waiting.set_result(None)
