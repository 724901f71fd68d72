"""Busy polling: the event loop looks for the next message a little while before it sleeps.

Agents send requests in bursts (an evaluation, an assembly, memory reads, back to back) and
editors one per keystroke. Between two of them the sidecar blocks in `epoll_wait`, and on the
virtual machines measured here being woken from there, with the caches gone cold meanwhile, cost
~25-45 µs of a ~0.5 ms `evaluateRules` round trip (`bench/README.md`, "Busy polling").
`PollingSelector` polls without blocking for up to `window` seconds (`serve --busy-poll-ms`)
before it blocks as the plain selector does, yielding the CPU between polls; it does so only while
the client answers quickly: when the last wait for a message outlasted the window, it blocks at
once until a wait is short again. A client that reads a large answer for milliseconds before it
sends the next request would only be slowed by a poller beside it on a shared core, and an agent
that waits seconds for its model costs no polling at all.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from collections.abc import Callable
from typing import Any

DEFAULT_MS = 0.5  # `serve --busy-poll-ms` (which reads it without importing asyncio)
_yield: Callable[[], None] = getattr(os, "sched_yield", lambda: None)

Ready = list[tuple[selectors.SelectorKey, int]]


class PollingSelector(selectors.DefaultSelector):
    """The platform's default selector, polling for up to `window` seconds before a blocking wait
    while the waits for an event are shorter than that; a timeout the event loop passes (its next
    timer) is kept exactly."""

    def __init__(self, window: float) -> None:
        super().__init__()
        self.window = window
        self.quick = False  # the last wait that ended in an event was shorter than the window

    def select(self, timeout: float | None = None) -> Ready:
        if timeout is not None and timeout <= 0:
            return super().select(timeout)
        start = time.monotonic()
        if self.quick:
            ready = self._poll(start + self.window if timeout is None else start + min(self.window, timeout))
            if ready:
                return ready
            if timeout is not None:
                timeout = max(0.0, timeout - (time.monotonic() - start))
        ready = super().select(timeout)
        if ready:
            self.quick = time.monotonic() - start < self.window
        return ready

    def _poll(self, until: float) -> Ready:
        poll = super().select
        while True:
            ready = poll(0)
            if ready or time.monotonic() >= until:
                return ready
            _yield()  # another runnable process on this CPU goes first


def loop_factory(window: float) -> Callable[[], Any] | None:
    """A factory of event loops that poll as `PollingSelector` does (`asyncio.Runner`'s
    `loop_factory`); None (the default loop) when `window` is 0, and on Windows, whose default loop
    reads pipes with its proactor."""
    if window <= 0 or sys.platform == "win32":
        return None

    def new_loop() -> Any:
        import asyncio

        return asyncio.SelectorEventLoop(PollingSelector(window))

    return new_loop
