"""A runtime shared by sessions (the network server's connections) closes with its last session,
and gives its memory back."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from context_assembly.errors import ContextAssemblyError
from context_assembly.methods import Session, call
from context_assembly.methods.session import SharedRuntimes

from ..lsp.support import REQUEST


def test_a_runtime_closed_by_its_last_session_gives_its_memory_back(example_copy: Path) -> None:
    """Frozen with the compiled engines (`gc.freeze`), a closed runtime's object graph (cycles) was
    never collected: ~1,100 objects, ~180 KB, kept for good per connection that closed last."""
    runtimes = SharedRuntimes()

    def connection() -> None:
        session = Session(example_copy, runtimes=runtimes)
        try:
            call(session, "contextAssembly/evaluateRules", REQUEST)  # compiled, and frozen
            call(session, "memory/read", {"uri": "kv://users/u-ada"})  # the stores open
        finally:
            session.close()

    for _ in range(3):  # what is made once per process (imports, module caches) is made
        connection()
    frozen = gc.get_freeze_count()
    for _ in range(10):
        connection()
    assert len(runtimes) == 0
    assert gc.get_freeze_count() - frozen < 1_000  # (11,000 and more when each stayed)


def test_a_runtime_lingers_for_the_next_session_then_closes(example_copy: Path) -> None:
    """A client that reconnects for each task found nothing built: the runtime was made and closed
    per connection (55 connections a second; 94-114 now, bench/rpc/churn.py)."""
    runtimes = SharedRuntimes(linger_s=0.3)
    first = runtimes.acquire(example_copy)
    runtimes.release(first)
    assert len(runtimes) == 1  # lingering
    again = runtimes.acquire(example_copy)
    assert again is first  # the same runtime, built once
    runtimes.release(again)
    deadline = time.monotonic() + 10
    while len(runtimes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(runtimes) == 0  # closed once no session came back in time
    fresh = runtimes.acquire(example_copy)
    assert fresh is not first
    runtimes.release(fresh)
    held = runtimes.acquire(example_copy)
    runtimes.close()  # the process stops: what lingers closes now, what is held when released
    assert len(runtimes) == 1
    runtimes.release(held)
    assert len(runtimes) == 0
    with pytest.raises(ContextAssemblyError, match="stopping"):  # (a late refusal log, a late request)
        runtimes.acquire(example_copy)


def test_a_second_initialize_gives_the_replaced_runtime_back(example_copy: Path) -> None:
    """Over stdio a session owns its runtime: one replaced by a second `initialize` stayed, frozen."""
    from context_assembly.lsp.server import build_server
    from context_assembly.methods import call as call_method

    server = build_server()
    try:
        def initialize() -> None:
            server.open(example_copy, {}, llm_offered=False)
            call_method(server.require_session(), "contextAssembly/evaluateRules", REQUEST)

        for _ in range(3):
            initialize()
        frozen = gc.get_freeze_count()
        for _ in range(10):
            initialize()
        assert gc.get_freeze_count() - frozen < 1_000
    finally:
        server.close()
