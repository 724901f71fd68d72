"""Several processes on one workspace (SPEC §5.3): no write lost, no torn read, crashes leave old values."""

from __future__ import annotations

import base64
import multiprocessing
import os
import re
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from context_assembly.stores.memory import MemoryRouter

from .workers import PAD, race_one_key, write_keys, write_until_killed

SPAWN = multiprocessing.get_context("spawn")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and fork-free spawn timing are POSIX here")


def _run_together(target: Callable[..., None], workspace: Path, workers: list[tuple[object, ...]]) -> None:
    start = SPAWN.Event()
    processes = [SPAWN.Process(target=target, args=(str(workspace), *args, start)) for args in workers]
    for process in processes:
        process.start()
    start.set()  # children wait for this, so their writes overlap
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * len(processes)


def test_two_processes_write_10000_keys_and_none_is_lost(tmp_path: Path) -> None:
    _run_together(write_keys, tmp_path, [("a", 5000, 1), ("b", 5000, 1)])
    memory = MemoryRouter(tmp_path)
    for worker in ("a", "b"):
        entries = memory.kv.list("default", worker)
        assert len(entries) == 5000
        assert {e.key: e.value for e in entries} == {f"k{i}": {"worker": worker, "i": i} for i in range(5000)}
    assert memory.generation("kv") == 10_000  # every write counted, whichever process made it
    memory.close()


def test_batched_writes_from_two_processes(tmp_path: Path) -> None:
    _run_together(write_keys, tmp_path, [("a", 5000, 250), ("b", 5000, 250)])
    memory = MemoryRouter(tmp_path)
    assert len(memory.kv.list()) == 10_000
    assert memory.read("kv://b/k4999")["value"] == {"worker": "b", "i": 4999}
    memory.close()


def test_single_key_race_ends_with_one_of_the_last_writes(tmp_path: Path) -> None:
    _run_together(race_one_key, tmp_path, [("a", 300), ("b", 300)])
    memory = MemoryRouter(tmp_path)
    assert memory.read("kv://race")["value"] in ({"who": "a", "i": 299}, {"who": "b", "i": 299})
    assert memory.read("markdown://race")["value"] in ("a 299\n", "b 299\n")
    assert [n["uri"] for n in memory.list("markdown://")["items"]] == ["markdown://race"]
    memory.close()


@pytest.mark.parametrize("attempt", range(3))  # a few kills, each landing at a different point
def test_sigkill_mid_write_leaves_every_store_readable(tmp_path: Path, attempt: int) -> None:
    memory = MemoryRouter(tmp_path)
    memory.write("kv://k", {"n": 0, "pad": PAD})
    memory.write("markdown://crash", f"note 0\n{PAD}")
    memory.close()
    ready = SPAWN.Event()
    child = SPAWN.Process(target=write_until_killed, args=(str(tmp_path), ready))
    child.start()
    try:
        assert ready.wait(60), "the writer never got going"
        time.sleep(0.4 + 0.05 * attempt)
    finally:
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(30)
    assert child.exitcode == -signal.SIGKILL

    db_path = tmp_path / ".codebolt" / "db" / "project.db"
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    memory = MemoryRouter(tmp_path)
    value = memory.read("kv://k")["value"]
    assert value["pad"] == PAD and value["n"] >= 3  # a complete value, old or new
    note = memory.read("markdown://crash")["value"]
    match = re.fullmatch(r"note (\d+)\n(x*)", note)
    assert match and match.group(2) == PAD and int(match.group(1)) >= 3
    doc = memory.read("json://doc")["value"]
    assert doc["pad"] == PAD
    events = memory.read("log://default?limit=10000")["value"]
    ticks = [e["payload"]["n"] for e in events]
    assert ticks == sorted(ticks, reverse=True) == list(range(len(ticks), 0, -1))  # none lost, none torn
    turns = memory.episodic.recent("t", limit=10000)
    assert [t["content"] for t in turns] == [f"turn {i}" for i in range(1, len(turns) + 1)]
    assert memory.read("working://t/k")["value"]["pad"] == PAD
    assert base64.b64decode(memory.read("blob://b/k")["value"]) == PAD.encode()
    # A temp file of an interrupted note write may remain, but never shows as a note.
    assert [n["uri"] for n in memory.list("markdown://")["items"]] == ["markdown://crash"]
    leftovers = [p.name for p in (tmp_path / ".codebolt" / "memory").iterdir() if p.name != "crash.md"]
    assert all(name.startswith(".") and name.endswith(".tmp") for name in leftovers), leftovers
    # and the workspace keeps working: the lock the dead process held is free again
    memory.write("markdown://crash", "after the crash")
    memory.write("kv://k", {"n": -1})
    assert memory.read("kv://k")["value"] == {"n": -1}
    memory.close()


def test_a_write_the_database_refuses_is_a_storage_error_and_nothing_is_kept(tmp_path: Path) -> None:
    """Only BEGIN was turned into a storage error: a statement or COMMIT the database refused (a
    full disk, a constraint) reached the client as an internal error."""
    from context_assembly.errors import StorageError

    (tmp_path / ".codebolt").mkdir()
    memory = MemoryRouter(tmp_path)
    try:
        memory.write("kv://kept", 1)
        memory.stores.database.connection().execute(  # the database refuses the next insert, as a full disk would
            "CREATE TEMP TRIGGER refuse BEFORE INSERT ON main.kv BEGIN SELECT RAISE(ABORT, 'no room left'); END")
        with pytest.raises(StorageError, match="no room left"):
            memory.write("kv://refused", 2)
        assert memory.read("kv://refused")["exists"] is False and memory.read("kv://kept")["value"] == 1
        memory.write("log://still", {"event_type": "e"})  # the connection keeps working
    finally:
        memory.close()
