"""Pausing the cyclic collector (collector.py): nesting, threads, and what a pause leaves behind."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from context_assembly import collector
from context_assembly.collector import paused


def _answer(size: int = 20_000) -> list[dict[str, list[str]]]:
    """Containers like a trace answer's: many, none in a cycle."""
    return [{"memories": [str(i)], "conditions": []} for i in range(size)]


def _collections() -> int:
    """Collections of any generation so far (one triggered may take the older ones along)."""
    return sum(int(stats["collections"]) for stats in gc.get_stats())


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


@pytest.mark.usefixtures("collector")
def test_nested_pauses_resume_the_collector_when_the_outermost_ends() -> None:
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_overlapping_pauses_on_two_threads_resume_it_when_both_ended() -> None:
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with paused():
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(5)
    with paused():
        pass
    assert not gc.isenabled()  # the other thread's pause still runs
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector")
def test_objects_dropped_inside_a_pause_leave_nothing_to_collect() -> None:
    gc.collect()
    with paused():
        answer = _answer()
        del answer
        before = _collections()
    _answer(10)  # a few allocations after the pause
    assert _collections() == before
    with paused():
        kept = _answer()  # alive when the pause ends: the next allocation walks it
        before = _collections()
    _answer(10)
    assert _collections() > before
    del kept


@pytest.mark.usefixtures("collector")
def test_pauses_overlapping_past_the_limit_collect_cyclic_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "MAX_PAUSE_S", 0.0)
    with paused():
        node = _Node()
        gone = weakref.ref(node)
        del node
        with paused():
            pass  # ends while another pause runs, past the limit: the young generation is collected
        assert gone() is None
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_an_exception_inside_a_pause_still_resumes_the_collector() -> None:
    with pytest.raises(ValueError), paused():
        raise ValueError("failed")
    assert gc.isenabled()
