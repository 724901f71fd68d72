"""Busy polling (lsp/polling.py, `serve --busy-poll-ms`): while messages come quickly the event loop
polls for the next one for a bounded window before it blocks, keeps every timeout the loop asks
for, and a slow or idle client is waited for without polling."""

from __future__ import annotations

import argparse
import asyncio
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from context_assembly.cli.serve import busy_poll_ms
from context_assembly.client.connection import Connection
from context_assembly.lsp import polling
from context_assembly.lsp.polling import PollingSelector, loop_factory

from .support import REQUEST, SERVER


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The timeouts of the platform selector's own `select` calls, in order (0: a poll)."""
    seen: list[float | None] = []
    plain = selectors.DefaultSelector.select

    def select(self: selectors.BaseSelector, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        seen.append(timeout)
        return plain(self, timeout)  # type: ignore[arg-type]

    monkeypatch.setattr(selectors.DefaultSelector, "select", select)
    return seen


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Polling goes on through yields that let other processes run (on a busy host, as CI's, a yield
    can take longer than `polling.SHARED_S`, which would end the polling early)."""
    monkeypatch.setattr(polling, "SHARED_S", 3600.0)


def watching(reader: socket.socket, window: float) -> PollingSelector:
    """A polling selector with `reader` registered for reading (use it with `with`)."""
    selector = PollingSelector(window)
    selector.register(reader, selectors.EVENT_READ)
    return selector


def event(selector: PollingSelector, writer: socket.socket, reader: socket.socket) -> None:
    """One new event, soon: a byte written a millisecond after the wait began (one already there
    would not count), returned by `select`, read again."""
    soon = threading.Timer(0.001, writer.send, (b"x",))
    soon.start()
    assert [key.fileobj for key, _ in selector.select(5)] == [reader]
    soon.join()
    assert reader.recv(1) == b"x"


def answered_quickly(selector: PollingSelector) -> None:
    """The state after a wait that a new event ended within the window (set directly: on a busy
    host even a millisecond's wait can outlast a short window; how a wait gets there is
    `test_an_event_already_pending_does_not_turn_polling_on`'s)."""
    selector.quick = True


def test_a_ready_socket_is_returned_at_once(pair: tuple[socket.socket, socket.socket]) -> None:
    reader, writer = pair
    with watching(reader, 1.0) as selector:
        event(selector, writer, reader)
        writer.send(b"y")  # within the window: found by a poll
        assert [key.fileobj for key, _ in selector.select(None)] == [reader]


def test_an_idle_selector_blocks_without_polling(pair: tuple[socket.socket, socket.socket],
                                                 waits: list[float | None]) -> None:
    reader, _ = pair
    with watching(reader, 1.0) as selector:
        assert not selector.quick
        started = time.monotonic()
        assert selector.select(0.2) == []
        assert time.monotonic() - started >= 0.2
    assert waits == [0, 0.2]  # no event yet: a look, then one blocking wait with the loop's timeout


def test_after_an_event_it_polls_for_the_window_then_blocks(pair: tuple[socket.socket, socket.socket],
                                                           waits: list[float | None], alone: None) -> None:
    reader, writer = pair
    with watching(reader, 0.1) as selector:
        answered_quickly(selector)
        started = time.monotonic()
        assert selector.select(0.4) == []
        assert time.monotonic() - started >= 0.4  # the loop's timeout, not cut short by the window
    *polls, blocking = waits
    assert polls and set(polls) == {0}
    assert blocking is not None and 0 < blocking <= 0.4 - 0.09  # what was left of the timeout


def test_a_slow_client_is_waited_for_without_polling(pair: tuple[socket.socket, socket.socket],
                                                     waits: list[float | None]) -> None:
    """A wait for a message that outlasted the window turns polling off (until a wait is short again:
    `test_an_event_already_pending_does_not_turn_polling_on`)."""
    reader, writer = pair
    with watching(reader, 0.1) as selector:
        answered_quickly(selector)
        later = threading.Timer(0.4, writer.send, (b"x",))
        later.start()
        assert [key.fileobj for key, _ in selector.select(5)] == [reader]  # polled 0.1 s, then blocked
        later.join()
        reader.recv(1)
        assert not selector.quick
        waits.clear()
        assert selector.select(0.1) == []
        assert waits == [0, 0.1]  # no polling


def test_an_event_already_pending_does_not_turn_polling_on(pair: tuple[socket.socket, socket.socket],
                                                          waits: list[float | None]) -> None:
    """What is there before the wait begins (the rest of a large answer) says nothing of how fast the
    peer answers: only a wait that ended in a new event does."""
    reader, writer = pair
    with watching(reader, 1.0) as selector:
        writer.send(b"x")
        time.sleep(0.05)  # there before the selector looks
        waits.clear()
        assert [key.fileobj for key, _ in selector.select(5)] == [reader]
        reader.recv(1)
        assert waits == [0] and not selector.quick  # found by one look, no blocking wait, no polling
        later = threading.Timer(0.005, writer.send, (b"x",))
        later.start()
        assert [key.fileobj for key, _ in selector.select(5)] == [reader]  # a new event, within the window
        later.join()
        assert selector.quick


def test_an_event_a_poll_finds_late_turns_polling_off(pair: tuple[socket.socket, socket.socket],
                                                     monkeypatch: pytest.MonkeyPatch, alone: None) -> None:
    """A yield between polls can give the CPU away for longer than the window (the peer on the same
    CPU); the event found after it came late, as if waited for by blocking."""
    reader, writer = pair
    with watching(reader, 0.1) as selector:
        answered_quickly(selector)

        def away() -> None:  # the peer runs for 0.2 s on this CPU and answers meanwhile
            writer.send(b"x")
            time.sleep(0.2)

        monkeypatch.setattr(polling, "_yield", away)
        assert [key.fileobj for key, _ in selector.select(5)] == [reader]
        assert not selector.quick


def test_polling_stops_once_a_yield_gave_the_cpu_away(pair: tuple[socket.socket, socket.socket],
                                                     waits: list[float | None],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process that needs this CPU (more busy processes than CPUs) gets it back from the
    poller: after a yield that let another process run, the wait blocks."""
    reader, writer = pair
    with watching(reader, 0.2) as selector:
        answered_quickly(selector)
        monkeypatch.setattr(polling, "_yield", lambda: time.sleep(0.002))  # another process ran meanwhile
        started = time.monotonic()
        assert selector.select(0.3) == []
        assert time.monotonic() - started >= 0.3
    assert waits[0] == 0 and len(waits) == 2  # one poll, then the blocking wait for the rest of the timeout
    assert waits[1] is not None and 0.25 < waits[1] < 0.3


def test_a_zero_timeout_is_one_poll(pair: tuple[socket.socket, socket.socket], waits: list[float | None]) -> None:
    reader, writer = pair
    with watching(reader, 5.0) as selector:
        event(selector, writer, reader)
        waits.clear()
        assert selector.select(0) == []
    assert waits == [0]


def test_the_loops_timers_run_on_time_within_the_window() -> None:
    """A timer due before the window ends is not held up by the polling (a 5 s window here)."""
    factory = loop_factory(5.0)
    assert factory is not None
    loop = factory()
    try:
        reader, writer = socket.socketpair()
        done = loop.create_future()

        def readable() -> None:
            reader.recv(1)
            loop.call_later(0.05, done.set_result, time.monotonic())

        loop.add_reader(reader.fileno(), readable)
        writer.send(b"x")
        started = time.monotonic()
        fired = loop.run_until_complete(asyncio.wait_for(done, 10))
        assert fired - started < 2.0
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()
    finally:
        loop.close()


def test_a_zero_window_is_the_default_loop() -> None:
    assert loop_factory(0) is None


@pytest.mark.parametrize("text", ["0", "2", "0.25", "1000"])
def test_busy_poll_ms_takes_milliseconds_from_0_to_1000(text: str) -> None:
    assert busy_poll_ms(text) == float(text)


@pytest.mark.parametrize(("text", "message"), [("-1", "must be from 0 to 1000"), ("1001", "must be from 0 to 1000"),
                                               ("nan", "must be from 0 to 1000"), ("fast", "expected milliseconds")])
def test_busy_poll_ms_refuses_other_values(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        busy_poll_ms(text)


def test_serve_refuses_a_bad_busy_poll_value() -> None:
    done = subprocess.run([*SERVER, "--busy-poll-ms", "-5"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--busy-poll-ms: must be from 0 to 1000" in done.stderr


@pytest.mark.parametrize("flag", [["--busy-poll-ms", "0"], ["--busy-poll-ms", "50"]])
async def test_the_sidecar_answers_with_polling_off_and_on(workspace: Path, flag: list[str]) -> None:
    connection = Connection()
    await connection.spawn([*SERVER, *flag, "--workspace", str(workspace)], stderr=subprocess.DEVNULL)
    try:
        await connection.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        connection.notify("initialized", {})
        for _ in range(3):  # back to back: within the window when it polls
            answer = await connection.request("contextAssembly/evaluateRules", {**REQUEST, "explain": "none"})
            assert answer["matched_memories"]
    finally:
        assert await connection.close() == 0
