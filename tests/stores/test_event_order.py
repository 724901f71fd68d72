"""Several processes appending to one event log at once: newest first is commit order, and a reader
tailing the log with `since=` the newest time it has seen misses no event. Each writer and the
tail are real processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.stores.memory import MemoryRouter

SPAWN = multiprocessing.get_context("spawn")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="spawned writers timed as on POSIX")

WRITERS, APPENDS = 5, 150


def _append(root: str, who: str, ready: Any, start: Any) -> None:
    """Child process: APPENDS events without a time, back to back."""
    memory = MemoryRouter(root)
    memory.events.search("swarm", limit=1)  # the database opened before the start
    ready.set()
    start.wait(60)
    for i in range(APPENDS):
        memory.write("log://swarm", {"event_type": "tick", "who": who, "i": i})
    memory.close()


def _tail(root: str, ready: Any, start: Any, done: Any, out: str) -> None:
    """Child process: read the log again and again, each time `since=` the newest time seen so
    far, until the writers are done (then once more); write down every event id seen."""
    memory = MemoryRouter(root)
    memory.events.search("swarm", limit=1)
    ready.set()
    start.wait(60)
    seen: set[int] = set()
    newest: float | None = None
    while True:
        finished = done.is_set()
        events = memory.events.search("swarm", since=newest, limit=1000)
        seen.update(event["id"] for event in events)
        if events:
            newest = max(newest or events[0]["ts"], *(event["ts"] for event in events))
        if finished:
            break
    memory.close()
    Path(out).write_text(json.dumps(sorted(seen)), encoding="utf-8")


def test_concurrent_appends_read_newest_first_in_commit_order_and_a_since_tail_misses_none(tmp_path: Path) -> None:
    start, done = SPAWN.Event(), SPAWN.Event()
    readies = [SPAWN.Event() for _ in range(WRITERS + 1)]
    writers = [SPAWN.Process(target=_append, args=(str(tmp_path), f"w{k}", readies[k], start)) for k in range(WRITERS)]
    tail = SPAWN.Process(target=_tail, args=(str(tmp_path), readies[-1], start, done, str(tmp_path / "seen.json")))
    processes = [*writers, tail]
    try:
        for process in processes:
            process.start()
        for ready in readies:
            assert ready.wait(60)
        start.set()
        for writer in writers:
            writer.join(120)
            assert writer.exitcode == 0
        done.set()
        tail.join(120)
        assert tail.exitcode == 0
    finally:
        for process in processes:
            process.kill()
    memory = MemoryRouter(tmp_path)
    events = memory.events.search("swarm", limit=WRITERS * APPENDS)
    memory.close()
    ids = [event["id"] for event in events]
    assert len(ids) == len(set(ids)) == WRITERS * APPENDS
    assert ids == sorted(ids, reverse=True)  # newest first is the order they were committed in
    in_commit_order = sorted(events, key=lambda event: event["id"])
    backwards = [(a["id"], b["id"]) for a, b in zip(in_commit_order, in_commit_order[1:], strict=False)
                 if b["ts"] < a["ts"]]
    assert backwards == []
    assert sorted(set(ids) - set(json.loads((tmp_path / "seen.json").read_text(encoding="utf-8")))) == []


def test_a_given_time_is_kept_and_later_events_without_one_never_go_before_the_newest(tmp_path: Path) -> None:
    memory = MemoryRouter(tmp_path)
    try:
        ahead = time.time() + 3600
        future = memory.events.append("audit", "scheduled", {}, ts=ahead)  # given: kept as given
        past = memory.events.append("audit", "imported", {}, ts=10.0)
        stamped = memory.events.append("audit", "login", {})
        assert (future["ts"], past["ts"]) == (ahead, 10.0)
        assert stamped["ts"] == future["ts"]  # not before the instance's newest time
        assert [e["event_type"] for e in memory.events.search("audit")] == ["login", "scheduled", "imported"]
        other = memory.events.append("other", "login", {})  # another instance keeps its own clock
        assert other["ts"] < future["ts"]
    finally:
        memory.close()


def test_a_time_more_than_a_day_ahead_is_refused_not_kept_for_good(tmp_path: Path) -> None:
    """Milliseconds given for seconds: every later event and turn without `ts` was stamped 56,000
    years ahead, for good. Refused, with what to do instead; nothing is written."""
    memory = MemoryRouter(tmp_path)
    try:
        in_ms = time.time() * 1000
        for write in (lambda: memory.events.append("audit", "login", {}, ts=in_ms),
                      lambda: memory.write("log://audit", {"event_type": "login", "ts": in_ms}),
                      lambda: memory.write("episodic://t-1", {"role": "user", "content": "hi", "ts": in_ms})):
            with pytest.raises(InvalidParamsError, match="not milliseconds"):
                write()
        assert memory.events.search("audit") == []
        stamped = memory.events.append("audit", "login", {})
        assert abs(stamped["ts"] - time.time()) < 60
    finally:
        memory.close()
