"""Atomic writes and the workspace lock: what another reader, thread or process observes."""

from __future__ import annotations

import multiprocessing
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import StorageError
from context_assembly.workspace import atomic
from context_assembly.workspace.atomic import WantProbe, lock_wanted, remove_file, workspace_lock, write_atomic
from context_assembly.workspace.layout import WorkspaceLayout

SPAWN = multiprocessing.get_context("spawn")


def _hold_lock(lock_dir: str, name: str, held: Any, release: Any) -> None:
    """Child process: take the lock, say so, keep it until told (or killed)."""
    with workspace_lock(Path(lock_dir), name):
        held.set()
        release.wait(30)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- write_atomic


def test_write_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "engine.json"
    write_atomic(target, b"first")
    write_atomic(target, b"second")
    assert target.read_bytes() == b"second"
    assert _leftovers(tmp_path) == []


def test_write_keeps_the_permissions_of_the_replaced_file(tmp_path: Path) -> None:
    target = tmp_path / "engine.json"
    target.write_bytes(b"old")
    target.chmod(0o640)
    write_atomic(target, b"new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_failed_rename_leaves_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "engine.json"
    target.write_bytes(b"old")

    def refuse(src: Any, dst: Any) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(StorageError, match="disk on fire"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_write_interrupted_halfway_leaves_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "engine.json"
    target.write_bytes(b"old")
    real_write = os.write

    def half_then_fail(fd: int, data: Any) -> int:
        if len(data) > 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise KeyboardInterrupt  # not an OSError: must still clean up and propagate as is

    monkeypatch.setattr(atomic.os, "write", half_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, b"0123456789")
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_failed_fsync_is_a_storage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "engine.json"

    def no_sync(fd: int) -> None:
        raise OSError("EIO")

    monkeypatch.setattr(atomic.os, "fsync", no_sync)
    with pytest.raises(StorageError):
        write_atomic(target, b"new")
    assert not target.exists()
    assert _leftovers(tmp_path) == []


def test_write_into_missing_directory_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        write_atomic(tmp_path / "missing" / "x.json", b"{}")


def test_remove_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    target.write_bytes(b"{}")
    assert remove_file(target) is True
    assert not target.exists()
    assert remove_file(target) is False


# -- workspace_lock


def test_lock_file_lives_in_codebolt_locks(tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path)
    with workspace_lock(layout, "context-rule-engines"):
        assert (tmp_path / ".codebolt" / ".locks" / "context-rule-engines.lock").exists()


def test_nested_use_in_one_thread_does_not_deadlock(tmp_path: Path) -> None:
    with workspace_lock(tmp_path, "x", timeout=1), workspace_lock(tmp_path, "x", timeout=1):
        pass
    with workspace_lock(tmp_path, "x", timeout=0):  # fully released afterwards
        pass


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden"])
def test_unsafe_lock_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError), workspace_lock(tmp_path, name):
        pass


def test_threads_exclude_each_other(tmp_path: Path) -> None:
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(20):
            with workspace_lock(tmp_path, "x"):
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.001)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1


def test_lock_held_by_another_process_times_out_with_storage_error(tmp_path: Path) -> None:
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold_lock, args=(str(tmp_path), "x", held, release))
    holder.start()
    try:
        assert held.wait(30)
        started = time.monotonic()
        with pytest.raises(StorageError, match="busy") as caught, workspace_lock(tmp_path, "x", timeout=0.2):
            pass
        assert caught.value.code == -32006
        assert time.monotonic() - started < 5
    finally:
        release.set()
        holder.join(30)
    assert holder.exitcode == 0
    with workspace_lock(tmp_path, "x", timeout=5):
        pass


def test_lock_of_a_killed_process_is_released(tmp_path: Path) -> None:
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold_lock, args=(str(tmp_path), "x", held, release))
    holder.start()
    assert held.wait(30)
    holder.kill()
    holder.join(30)
    with workspace_lock(tmp_path, "x", timeout=5):
        pass


# -- lock_wanted: a waiter says so, so that a holder keeping the lock between uses lets go


def _wait_in_thread(where: Path, name: str, timeout: float) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def wait() -> None:
        try:
            with workspace_lock(where, name, timeout=timeout):
                outcome["got"] = True
        except StorageError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, outcome


def _until(condition: Any, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_nobody_wants_a_free_or_quietly_held_lock(tmp_path: Path) -> None:
    assert not lock_wanted(tmp_path, "x")
    with workspace_lock(tmp_path, "x"):
        assert not lock_wanted(tmp_path, "x")  # held, and nobody waits for it
        with workspace_lock(tmp_path, "x"):  # nested use in one thread never waits
            assert not lock_wanted(tmp_path, "x")
    assert not lock_wanted(tmp_path, "x")


def test_a_waiting_thread_is_seen_until_it_has_the_lock(tmp_path: Path) -> None:
    with workspace_lock(tmp_path, "x"):
        thread, outcome = _wait_in_thread(tmp_path, "x", timeout=30)
        assert _until(lambda: lock_wanted(tmp_path, "x"))
        assert "got" not in outcome
    thread.join(30)
    assert outcome == {"got": True}
    assert not lock_wanted(tmp_path, "x")


def test_a_waiter_that_gives_up_stops_wanting(tmp_path: Path) -> None:
    with workspace_lock(tmp_path, "x"):
        thread, outcome = _wait_in_thread(tmp_path, "x", timeout=0.3)
        assert _until(lambda: lock_wanted(tmp_path, "x"))
        thread.join(30)
        assert isinstance(outcome.get("error"), StorageError)
        assert not lock_wanted(tmp_path, "x")


def test_a_waiting_process_is_seen(tmp_path: Path) -> None:
    held, release = SPAWN.Event(), SPAWN.Event()
    with workspace_lock(tmp_path, "x"):
        waiter = SPAWN.Process(target=_hold_lock, args=(str(tmp_path), "x", held, release))
        waiter.start()
        try:
            assert _until(lambda: lock_wanted(tmp_path, "x"), within=30)
            assert not held.is_set()
        finally:
            release.set()
    assert held.wait(30)
    waiter.join(30)
    assert waiter.exitcode == 0
    assert not lock_wanted(tmp_path, "x")


def test_several_waiters_all_get_their_turn(tmp_path: Path) -> None:
    with workspace_lock(tmp_path, "x"):
        waiting = [_wait_in_thread(tmp_path, "x", timeout=30) for _ in range(3)]
        assert _until(lambda: lock_wanted(tmp_path, "x"))
    for thread, outcome in waiting:
        thread.join(30)
        assert outcome == {"got": True}
    assert not lock_wanted(tmp_path, "x")


def test_lock_wanted_refuses_unsafe_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        lock_wanted(tmp_path, "../x")


def test_want_probe_answers_as_lock_wanted(tmp_path: Path) -> None:
    probe = WantProbe(tmp_path, "x")
    assert not probe.wanted()  # no want file yet: nobody ever waited
    with workspace_lock(tmp_path, "x"):
        assert not probe.wanted()
        thread, outcome = _wait_in_thread(tmp_path, "x", timeout=30)
        assert _until(probe.wanted)
        assert lock_wanted(tmp_path, "x")
    thread.join(30)
    assert outcome == {"got": True}
    assert not probe.wanted()
    probe.close()
    probe.close()  # closing twice is fine
    assert not probe.wanted()  # and it opens the file again when asked again


def test_want_probe_follows_a_replaced_want_file(tmp_path: Path) -> None:
    probe = WantProbe(tmp_path, "x")
    lock_wanted(tmp_path, "x")  # makes the want file
    assert not probe.wanted()  # the probe now has it open
    (tmp_path / "x.want").unlink()  # someone cleans the locks folder; the probe has not looked since
    with workspace_lock(tmp_path, "x"):
        thread, outcome = _wait_in_thread(tmp_path, "x", timeout=30)  # its waiter makes a new want file
        assert _until(lambda: lock_wanted(tmp_path, "x"))  # (asked by path, so not by the probe)
        assert probe.wanted()
    thread.join(30)
    assert outcome == {"got": True}
    probe.close()


def test_nobody_can_be_waiting_where_no_lock_can_be_taken(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    assert not lock_wanted(not_a_folder, "x")
    probe = WantProbe(not_a_folder, "x")
    assert not probe.wanted()
    probe.close()
    with pytest.raises(StorageError, match="cannot lock"), workspace_lock(not_a_folder, "x"):
        pass


def test_without_a_line_a_moving_queue_never_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As on Windows (no `fcntl`, no line): waiters behind a busy holder wait turn after turn, for
    `want` and then for the lock, longer in all than `timeout`, and each gets it: `timeout` bounds a
    lock that does not change hands, not the time spent in line (waiters are served in any order)."""
    monkeypatch.setattr(atomic, "fcntl", None)
    timeout, turn = 2.0, 1.5  # the last served waits behind two turns of 1.5 s: ≥ 2.4 s in line
    arrived = {"holder": 0.0, "first": 0.2, "second": 0.4, "third": 0.6}
    holds = {"holder": turn, "first": turn, "second": turn, "third": 0.0}
    got: dict[str, float] = {}
    errors: list[str] = []
    start = time.monotonic()

    def take(name: str) -> None:
        time.sleep(arrived[name])
        try:
            with workspace_lock(tmp_path, "x", timeout=timeout):
                got[name] = time.monotonic() - start
                time.sleep(holds[name])
        except StorageError as exc:
            errors.append(f"{name}: {exc}")

    threads = [threading.Thread(target=take, args=(name,)) for name in arrived]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert errors == []
    assert len(got) == 4 and min(got, key=got.__getitem__) == "holder"
    assert max(got[name] - arrived[name] for name in got) > timeout  # someone waited longer than `timeout`
