"""Busy polling: the event loop looks for the next message a little while before it sleeps.

Agents send requests in bursts (an evaluation, an assembly, memory reads, back to back) and
editors one per keystroke. Between two of them the sidecar blocks in `epoll_wait`, and on the
virtual machines measured here being woken from there, with the caches gone cold meanwhile, cost
~50 µs of a ~0.5 ms `evaluateRules` round trip (`bench/README.md`). After any event,
`PollingSelector` polls without blocking for up to `window` seconds (`serve --busy-poll-ms`,
2 ms by default), yielding the CPU between polls, before it blocks as the plain selector does:
a message that arrives meanwhile is read at once, and an idle sidecar does not poll at all.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from collections.abc import Callable
from typing import Any

DEFAULT_MS = 2.0  # `serve --busy-poll-ms` (which reads it without importing asyncio)
_yield: Callable[[], None] = getattr(os, "sched_yield", lambda: None)


class PollingSelector(selectors.DefaultSelector):
    """The platform's default selector, polling for `window` seconds after the last event before
    a blocking wait; a timeout the event loop passes (its next timer) is kept exactly."""

    def __init__(self, window: float) -> None:
        super().__init__()
        self.window = window
        self._last = -float("inf")  # when an event was last returned (time.monotonic)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None or timeout > 0:
            start = time.monotonic()
            until = self._last + self.window
            if start < until:
                if timeout is not None:
                    until = min(until, start + timeout)
                ready = self._poll(until)
                if ready:
                    return ready
                if timeout is not None:
                    timeout = max(0.0, timeout - (time.monotonic() - start))
        return self._seen(super().select(timeout))

    def _poll(self, until: float) -> list[tuple[selectors.SelectorKey, int]]:
        poll = super().select
        while True:
            ready = poll(0)
            if ready or time.monotonic() >= until:
                return self._seen(ready)
            _yield()  # another runnable process on this CPU goes first

    def _seen(self, ready: list[tuple[selectors.SelectorKey, int]]) -> list[tuple[selectors.SelectorKey, int]]:
        if ready:
            self._last = time.monotonic()
        return ready


def loop_factory(window: float) -> Callable[[], Any] | None:
    """A factory of event loops that poll for `window` seconds after each event (`asyncio.Runner`'s
    `loop_factory`); None (the default loop) when `window` is 0, and on Windows, whose default loop
    reads pipes with its proactor."""
    if window <= 0 or sys.platform == "win32":
        return None

    def new_loop() -> Any:
        import asyncio

        return asyncio.SelectorEventLoop(PollingSelector(window))

    return new_loop
