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
that waits seconds for its model costs no polling at all. It also stops polling, for that wait,
as soon as a yield gave the CPU to another process: on a machine with more busy processes than
CPUs (many sidecars, or the client on the same CPU) a poller would take time from one of them.
The client's event loop polls the same way for answers (`client/event_loop.py`).
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from collections.abc import Callable
from typing import Any

DEFAULT_MS = 0.5  # `serve --busy-poll-ms` and the client's (which read it without importing asyncio)
MAX_MS = 1000.0
# A yield that took longer than this gave the CPU to another process (alone, one takes ~0.5 µs here;
# another process keeps a CPU it was given for a time slice, a millisecond or more).
SHARED_S = 50e-6
_yield: Callable[[], None] = getattr(os, "sched_yield", lambda: None)

Ready = list[tuple[selectors.SelectorKey, int]]


class PollingSelector(selectors.DefaultSelector):
    """The platform's default selector, polling for up to `window` seconds before a blocking wait
    while the waits for an event are shorter than that (an event already there when the wait began
    counts as neither); a timeout the event loop passes (its next timer) is kept exactly."""

    def __init__(self, window: float) -> None:
        super().__init__()
        self.window = window
        self.quick = False  # the last wait that ended in a new event was shorter than the window

    def select(self, timeout: float | None = None) -> Ready:
        if timeout is not None and timeout <= 0:
            return super().select(timeout)
        start = time.monotonic()
        if self.quick:
            ready = self._poll(start + self.window if timeout is None else start + min(self.window, timeout))
            if not ready:
                ready = super().select(None if timeout is None else max(0.0, timeout - (time.monotonic() - start)))
        else:
            # An event already pending says nothing of the peer's pace: counted, the rest of a large
            # answer (asyncio reads a pipe 256 KiB at a time) turned polling on, and the poller then
            # spun beside a peer busy with the next answer.
            ready = super().select(0)
            if ready:
                return ready
            ready = super().select(timeout)
        if ready:  # (a poll can find it late too: a yield gave the CPU away for longer than the window)
            self.quick = time.monotonic() - start < self.window
        return ready

    def _poll(self, until: float) -> Ready:
        poll = super().select
        while True:
            ready = poll(0)
            now = time.monotonic()
            if ready or now >= until:
                return ready
            _yield()  # another runnable process on this CPU goes first
            if time.monotonic() - now > SHARED_S:  # and one did: this CPU has better use than a poller
                return ready


def window_s(ms: float) -> float:
    """A polling window given in milliseconds, in seconds; ValueError outside 0 (no polling) to 1000."""
    if not 0 <= ms <= MAX_MS:  # (NaN fails too)
        raise ValueError(f"must be from 0 to {MAX_MS:g}, got {ms:g}")
    return ms / 1000


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
