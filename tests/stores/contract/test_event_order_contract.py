"""On every backend: events appended at once by several sidecars (each its own StoreSet, its own
connections) read newest first in commit order, and a `since=` tail misses none of them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from context_assembly.stores.store_set import StoreSet
from tests.stores.contract.conftest import open_sidecars

SIDECARS, APPENDS = 3, 120


@pytest.fixture
def sidecars(backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[list[StoreSet]]:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    opened = open_sidecars(backend, tmp_path / "workspace", request, SIDECARS + 1)
    yield opened
    for stores in opened:
        stores.close()


def test_events_appended_by_several_sidecars_follow_commit_order(sidecars: list[StoreSet]) -> None:
    *writers, reader = sidecars
    start, done = threading.Barrier(SIDECARS + 1), threading.Event()
    seen: set[int] = set()
    failures: list[BaseException] = []

    def append(stores: StoreSet, who: str) -> None:
        try:
            start.wait(30)
            for i in range(APPENDS):
                stores.events.append("swarm", "tick", {"who": who, "i": i})
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    def tail() -> None:
        newest: float | None = None
        start.wait(30)
        while True:
            finished = done.is_set()
            events = reader.events.search("swarm", since=newest, limit=1000)
            seen.update(event["id"] for event in events)
            if events:
                newest = max(newest or events[0]["ts"], *(event["ts"] for event in events))
            if finished:
                return

    threads = [threading.Thread(target=append, args=(stores, f"s{k}")) for k, stores in enumerate(writers)]
    tailing = threading.Thread(target=tail)
    for thread in [*threads, tailing]:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    tailing.join(120)
    assert failures == []
    events = reader.events.search("swarm", limit=SIDECARS * APPENDS)
    ids = [event["id"] for event in events]
    assert len(set(ids)) == SIDECARS * APPENDS
    assert ids == sorted(ids, reverse=True)  # newest first is commit order
    assert set(ids) - seen == set()


def test_turns_said_at_once_by_several_sidecars_keep_their_order_in_time(sidecars: list[StoreSet]) -> None:
    """A turn's time was taken before the thread's write lock: turns appended at once got times out
    of their `seq` order, and compress_turns (which orders a thread's turns by time) mixed them."""
    *writers, reader = sidecars
    start = threading.Barrier(SIDECARS)
    failures: list[BaseException] = []

    def say(stores: StoreSet, who: str) -> None:
        try:
            start.wait(30)
            for i in range(APPENDS // 2):
                stores.episodic.append("t-swarm", {"role": "user", "content": f"{who} {i}"})
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=say, args=(stores, f"s{k}")) for k, stores in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    turns = reader.episodic.recent("t-swarm", SIDECARS * (APPENDS // 2))
    assert [t["seq"] for t in turns] == list(range(1, SIDECARS * (APPENDS // 2) + 1))
    times = [t["ts"] for t in turns]
    assert times == sorted(times)  # in seq order, never going back
    given = reader.episodic.append("t-swarm", {"role": "user", "content": "dated", "ts": 1.0})
    assert given["ts"] == 1.0  # a time the caller gives is kept
    after = reader.episodic.append("t-swarm", {"role": "user", "content": "next"})
    assert after["ts"] >= times[-1] and after["seq"] == given["seq"] + 1
