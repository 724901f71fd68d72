"""Pausing CPython's cyclic garbage collector around work that makes many objects and no cycles.

A compiled workspace, a trace answer: tens of thousands of dicts and lists that form no cycle.
With the collector running, every few hundred allocations start a collection that walks the ones
made so far. Paused, none does; but CPython keeps counting the allocations (and takes back the
deallocations), so re-enabling it with those objects still alive makes the very next allocation
walk all of them once: ~20 ms, a third of building a full `evaluateRules` trace on `large`. A
pause that lasts until the answer is written and dropped (lsp/protocol.py) leaves nothing to walk.

Pauses nest and may overlap across threads (the event loop and the workers answer at once): the
collector runs again when the last one ends, and only if it ran when the first began. Overlapping
pauses that together last longer than `MAX_PAUSE_S` collect the youngest generation as one ends,
so a steady stream of them cannot keep cyclic garbage from being collected.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_PAUSE_S = 1.0  # overlapping pauses longer than this collect the young objects as one ends

_lock = threading.Lock()
_depth = 0  # pauses running
_resume = False  # whether the collector ran when the first of them began
_since = 0.0  # when it began, or when overlapping pauses last collected


@contextmanager
def paused() -> Iterator[None]:
    """No automatic cyclic collection until this and every overlapping pause have ended."""
    global _depth, _resume, _since
    with _lock:
        if not _depth:
            _resume, _since = gc.isenabled(), time.monotonic()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            overdue = bool(_depth) and _resume and time.monotonic() - _since > MAX_PAUSE_S
            if overdue:
                _since = time.monotonic()
            elif not _depth and _resume:
                gc.enable()
        if overdue:  # (outside the lock: finalizers run by the collection may pause too)
            gc.collect(0)


def collect_frozen() -> None:
    """A full collection that reaches frozen objects too, then the survivors frozen again.

    What `gc.freeze` holds (the compiled engines, rules/engine.py `pin_compiled`; freezes that skip
    the full collection) is never examined by the collector: an object in it that becomes garbage
    in a cycle is never freed. A runtime's whole object graph is such garbage once it is closed:
    ~180 KB kept for good each time the last connection of a workspace closed on a network server
    (a runtime built and closed per connection: 600 connections, +200 MiB). Costs a full
    collection (tens of ms): call it where a runtime closes, not per request.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
