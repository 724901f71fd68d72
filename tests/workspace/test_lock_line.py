"""The workspace lock's line: processes waiting for it get it first come, first served, a waiter
killed in line never blocks the others, a line that moves never times out, and a holder that does
not let go still fails its waiters with a clear error. Each waiter is a real process."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import StorageError
from context_assembly.workspace.atomic import lock_wanted, waiting_in_line, workspace_lock

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the line is made of flock'ed files (POSIX)")

SPAWN = multiprocessing.get_context("spawn")


def _wait_then_hold(lock_dir: str, index: int, timeout: float, hold_s: float, record: str,
                    ready: Any, go: Any) -> None:
    """Child process: once started (imports done: `ready`) and told to (`go`), wait for the lock
    (up to `timeout` without the line moving), note `index` in `record` once it has it (or
    `error …`), keep it `hold_s`."""
    ready.set()
    go.wait()
    try:
        with workspace_lock(Path(lock_dir), "x", timeout=timeout):
            with open(record, "a", encoding="utf-8") as out:
                out.write(f"{index}\n")
            time.sleep(hold_s)
    except StorageError as exc:
        with open(record, "a", encoding="utf-8") as out:
            out.write(f"error {index} {exc}\n")


def _until(condition: Any, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _started(lock_dir: Path, record: Path, index: int, *, timeout: float, hold_s: float = 0.0) -> Any:
    """A waiter process, started (a spawned interpreter importing the package: seconds on a busy
    machine) but not yet in line: `_join` puts it there. Started before any joins, so that a line
    never stands still for the start of a next waiter (a waiter's timeout counts that)."""
    ready, go = SPAWN.Event(), SPAWN.Event()
    waiter = SPAWN.Process(target=_wait_then_hold,
                           args=(str(lock_dir), index, timeout, hold_s, str(record), ready, go))
    waiter.start()
    assert ready.wait(60)
    waiter.go = go
    return waiter


def _join(lock_dir: Path, waiter: Any) -> Any:
    """The waiter, once it stands in line behind those before it."""
    before = waiting_in_line(lock_dir, "x")
    waiter.go.set()
    assert _until(lambda: waiting_in_line(lock_dir, "x") == before + 1 and lock_wanted(lock_dir, "x"))
    return waiter


def _join_line(lock_dir: Path, record: Path, index: int, *, timeout: float, hold_s: float = 0.0) -> Any:
    return _join(lock_dir, _started(lock_dir, record, index, timeout=timeout, hold_s=hold_s))


def _lines(record: Path) -> list[str]:
    return record.read_text(encoding="utf-8").splitlines() if record.exists() else []


def test_waiters_get_the_lock_in_the_order_they_came_and_a_moving_line_never_times_out(tmp_path: Path) -> None:
    """Six processes queue one after another, each then holding the lock 0.4 s; the last waits
    at least 2 s in all, longer than each one's 1.6 s timeout, but the line moves all along."""
    record = tmp_path / "order.txt"
    waiters = []
    try:
        waiters = [_started(tmp_path, record, index, timeout=1.6, hold_s=0.4) for index in range(6)]
        with workspace_lock(tmp_path, "x"):
            for waiter in waiters:
                _join(tmp_path, waiter)
        for waiter in waiters:
            waiter.join(60)
            assert waiter.exitcode == 0
    finally:
        for waiter in waiters:
            waiter.kill()
    assert _lines(record) == [str(index) for index in range(6)]
    assert waiting_in_line(tmp_path, "x") == 0
    assert not lock_wanted(tmp_path, "x")


def test_a_holder_that_lets_go_and_asks_again_queues_behind_the_waiter(tmp_path: Path) -> None:
    """A process letting go of the lock and taking it again at once (a busy graph session) does
    not jump ahead of the process already waiting."""
    record = tmp_path / "order.txt"
    with workspace_lock(tmp_path, "x"):
        waiter = _join_line(tmp_path, record, 1, timeout=30, hold_s=0.2)
    try:
        with workspace_lock(tmp_path, "x", timeout=30), open(record, "a", encoding="utf-8") as out:
            out.write("again\n")
        waiter.join(60)
        assert waiter.exitcode == 0
    finally:
        waiter.kill()
    assert _lines(record) == ["1", "again"]


def test_a_waiter_killed_in_line_never_blocks_those_behind_it(tmp_path: Path) -> None:
    """The head of the line and one in its middle are killed (SIGKILL); the others still get the
    lock, in order, long before their timeout, and the line is left empty."""
    record = tmp_path / "order.txt"
    waiters: list[Any] = []
    try:
        with workspace_lock(tmp_path, "x"):
            for index in range(4):
                waiters.append(_join_line(tmp_path, record, index, timeout=10))
            for killed in (waiters[0], waiters[2]):
                killed.kill()
                killed.join(30)
        for waiter in (waiters[1], waiters[3]):
            waiter.join(60)
            assert waiter.exitcode == 0
    finally:
        for waiter in waiters:
            waiter.kill()
    assert _lines(record) == ["1", "3"]
    assert waiting_in_line(tmp_path, "x") == 0
    with workspace_lock(tmp_path, "x", timeout=0):  # free, and nobody left waiting for it
        pass


def test_a_holder_that_never_lets_go_fails_every_waiter_with_still_busy(tmp_path: Path) -> None:
    record = tmp_path / "order.txt"
    waiters: list[Any] = []
    try:
        waiters = [_started(tmp_path, record, index, timeout=1.0) for index in range(2)]
        with workspace_lock(tmp_path, "x"):
            for waiter in waiters:
                _join(tmp_path, waiter)
            for waiter in waiters:
                waiter.join(60)
                assert waiter.exitcode == 0
    finally:
        for waiter in waiters:
            waiter.kill()
    lines = _lines(record)
    assert len(lines) == 2
    assert all(line.startswith("error ") and "still busy" in line for line in lines), lines
    assert waiting_in_line(tmp_path, "x") == 0
    with workspace_lock(tmp_path, "x", timeout=0):
        pass
