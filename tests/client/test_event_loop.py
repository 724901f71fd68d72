"""The client's event loop (client/event_loop.py): `run` and the sync client poll for the sidecar's
answers as the sidecar polls for requests, `busy_poll_ms=0` is asyncio's default loop, and a value
out of range is refused before anything starts."""

from __future__ import annotations

import asyncio
import inspect
import selectors
import threading
from pathlib import Path

import pytest

from context_assembly.client import ContextAssemblyClient, SyncContextAssemblyClient, event_loop_factory, run
from context_assembly.lsp.polling import PollingSelector
from tests.lsp.support import REQUEST

NONE = {**REQUEST, "explain": "none"}


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each polling stretch of any PollingSelector: its window, in the order they ran."""
    seen: list[float] = []
    plain = PollingSelector._poll

    def poll(self: PollingSelector, until: float) -> list[tuple[selectors.SelectorKey, int]]:
        seen.append(self.window)
        return plain(self, until)

    monkeypatch.setattr(PollingSelector, "_poll", poll)
    return seen


async def selector_kind() -> tuple[str, float | None]:
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    return type(selector).__name__, getattr(selector, "window", None)


def test_run_polls_for_half_a_millisecond_by_default() -> None:
    assert run(selector_kind()) == ("PollingSelector", 0.0005)
    assert run(selector_kind(), busy_poll_ms=2) == ("PollingSelector", 0.002)


def test_run_with_zero_is_asyncios_default_loop() -> None:
    kind, window = run(selector_kind(), busy_poll_ms=0)
    assert kind != "PollingSelector" and window is None
    assert event_loop_factory(0) is asyncio.new_event_loop


def test_run_returns_the_result_and_raises_the_error() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise KeyError("boom")

    async def answers() -> int:
        await asyncio.sleep(0.01)
        return 42

    assert run(answers()) == 42
    with pytest.raises(KeyError, match="boom"):
        run(fails())


@pytest.mark.parametrize("value", [-1, 1000.5, float("nan")])
def test_a_value_out_of_range_is_refused_before_the_loop_starts(value: float) -> None:
    main = selector_kind()
    with pytest.raises(ValueError, match="must be from 0 to 1000"):
        run(main, busy_poll_ms=value)
    assert inspect.getcoroutinestate(main) == inspect.CORO_CLOSED  # not left un-awaited
    with pytest.raises(ValueError, match="must be from 0 to 1000"):
        event_loop_factory(value)


# (a 50 ms window in the tests below: on a busy host an answer can take longer than 0.5 ms, which
# would leave polling off)
def test_the_async_client_on_run_polls_for_answers_that_come_quickly(workspace: Path, polls: list[float]) -> None:
    async def main() -> list[list[str]]:
        async with ContextAssemblyClient(workspace) as client:
            return [(await client.evaluate_rules(NONE))["matched_memories"] for _ in range(5)]

    answers = run(main(), busy_poll_ms=50)
    assert answers[0] and all(answer == answers[0] for answer in answers)
    assert polls and set(polls) == {0.05}


def test_the_sync_clients_loop_polls_for_half_a_millisecond_by_default(workspace: Path) -> None:
    client = SyncContextAssemblyClient(workspace)
    try:
        assert client._loop._selector.window == 0.0005  # type: ignore[attr-defined]
    finally:
        client.close()


def test_the_sync_client_polls_unless_told_not_to(workspace: Path, polls: list[float]) -> None:
    with SyncContextAssemblyClient(workspace, busy_poll_ms=50) as client:
        first = [client.evaluate_rules(NONE)["matched_memories"] for _ in range(5)]
    assert polls and set(polls) == {0.05}
    polls.clear()
    with SyncContextAssemblyClient(workspace, busy_poll_ms=0) as client:
        assert [client.evaluate_rules(NONE)["matched_memories"] for _ in range(5)] == first
    assert polls == []


def test_the_sync_client_refuses_a_bad_value_before_it_starts_anything() -> None:
    threads = threading.active_count()
    with pytest.raises(ValueError, match="must be from 0 to 1000"):
        SyncContextAssemblyClient("nowhere", busy_poll_ms=-3)
    assert threading.active_count() == threads
