"""The event loop an agent runs the client on: one that polls for the sidecar's answer.

Most answers arrive within a millisecond (`evaluateRules` on a few thousand rules: ~0.5 ms).
Blocking in `epoll_wait` until one does, and being woken from there, cost ~40 µs of that on the
virtual machines measured here (`bench/README.md`, "The client polls for its answer"), as it does
on the sidecar's side (`serve --busy-poll-ms`). `run` is `asyncio.run` on a loop that polls the
same way (`lsp/polling.py`): for at most `busy_poll_ms` after each event, yielding the CPU
between polls, and only while the waits are shorter than that, so an agent waiting seconds for
its model, or a slow answer, costs no polling. The sync client's own loop polls the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..lsp.polling import DEFAULT_MS, loop_factory, window_s

T = TypeVar("T")


def event_loop_factory(busy_poll_ms: float = DEFAULT_MS) -> Callable[[], asyncio.AbstractEventLoop]:
    """New event loops that poll for up to `busy_poll_ms` (0 to 1000; 0: the default loop), for
    `asyncio.Runner(loop_factory=...)` (and, from Python 3.12, `asyncio.run(..., loop_factory=...)`).
    ValueError for a value out of range."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = loop_factory(window_s(busy_poll_ms))
    return factory if factory is not None else asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], *, busy_poll_ms: float = DEFAULT_MS, debug: bool | None = None) -> T:
    """`asyncio.run(main)` on a loop from `event_loop_factory(busy_poll_ms)`."""
    try:
        factory = event_loop_factory(busy_poll_ms)
    except ValueError:
        main.close()  # never awaited: no warning about it on top of the error
        raise
    with asyncio.Runner(debug=debug, loop_factory=factory) as runner:
        return runner.run(main)
