"""On every backend: an append with an idempotency key lands once, however often and from however
many sidecars it is retried (the event log and episodic turns)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.stores.store_set import StoreSet
from tests.stores.contract.conftest import open_sidecars

SIDECARS, KEYS = 4, 40


@pytest.fixture
def sidecars(backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[list[StoreSet]]:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    opened = open_sidecars(backend, tmp_path / "workspace", request, SIDECARS)
    yield opened
    for stores in opened:
        stores.close()


def test_a_keyed_event_is_appended_once(stores: StoreSet) -> None:
    log = stores.events
    first = log.append("agent", "task.done", {"task": "t-1"}, key="k-1")
    generation = log.generation()
    again = log.append("agent", "task.done", {"task": "t-1"}, key="k-1")
    assert "duplicate" not in first and again == {**first, "duplicate": True}
    assert log.generation() == generation  # nothing was written
    assert [e["id"] for e in log.search("agent")] == [first["id"]]
    assert log.keyed("agent", "k-1") == first and log.keyed("agent", "k-2") is None
    # the retry answers the first event even when it brings another body: the key decides
    assert log.append("agent", "other", {"x": 1}, key="k-1")["id"] == first["id"]
    assert [i.count for i in log.instances()] == [1]


def test_event_keys_belong_to_their_instance_and_unkeyed_appends_all_land(stores: StoreSet) -> None:
    log = stores.events
    one = log.append("a", "e", {}, key="same")
    other = log.append("b", "e", {}, key="same")
    assert one["id"] != other["id"] and "duplicate" not in other
    log.append("a", "e", {})
    log.append("a", "e", {})
    assert len(log.search("a")) == 3


def test_a_keyed_turn_is_appended_once_and_clearing_forgets_the_keys(stores: StoreSet) -> None:
    turns = stores.episodic
    first = turns.append("t", {"role": "user", "content": "yes"}, key="turn-1")
    again = turns.append("t", {"role": "user", "content": "yes"}, key="turn-1")
    assert again == {**first, "duplicate": True}
    second = turns.append("t", {"role": "user", "content": "yes"}, key="turn-2")  # said twice, on purpose
    assert [t["seq"] for t in turns.recent("t")] == [first["seq"], second["seq"]]
    assert turns.keyed("t", "turn-1") == first and turns.keyed("u", "turn-1") is None
    assert turns.clear("t") == 2
    assert turns.keyed("t", "turn-1") is None
    fresh = turns.append("t", {"role": "user", "content": "yes"}, key="turn-1")
    assert "duplicate" not in fresh and turns.count("t") == 1


@pytest.mark.parametrize("key", ["", "a\x00b", "k" * 1025, 7, "k\udcff"])
def test_a_malformed_key_is_refused_and_nothing_is_appended(stores: StoreSet, key: Any) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        stores.events.append("a", "e", {}, key=key)
    assert refused.value.errors[0]["path"] == "/idempotency_key"
    with pytest.raises(InvalidParamsError):
        stores.episodic.append("t", {"role": "user", "content": "x"}, key=key)
    assert stores.events.search("a") == [] and stores.episodic.count("t") == 0


def _race(sidecars: list[StoreSet], append: Callable[[StoreSet, int], dict[str, Any]]) -> list[dict[str, Any]]:
    start = threading.Barrier(len(sidecars))
    answers: list[dict[str, Any]] = []
    failures: list[BaseException] = []

    def retry_every_key(stores: StoreSet) -> None:
        try:
            start.wait(30)
            for n in range(KEYS):
                answers.append(append(stores, n))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=retry_every_key, args=(stores,)) for stores in sidecars]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    return answers


def test_sidecars_retrying_the_same_events_at_once_append_each_once(sidecars: list[StoreSet]) -> None:
    answers = _race(sidecars, lambda stores, n: stores.events.append("swarm", "tick", {"n": n}, key=f"k{n}"))
    events = sidecars[0].events.search("swarm", limit=1000)
    assert sorted(e["payload"]["n"] for e in events) == list(range(KEYS))
    assert sum(1 for a in answers if not a.get("duplicate")) == KEYS
    by_key = {e["payload"]["n"]: e["id"] for e in events}
    assert all(a["id"] == by_key[a["payload"]["n"]] for a in answers)  # every retry answered the one event


def test_sidecars_retrying_the_same_turns_at_once_append_each_once(sidecars: list[StoreSet]) -> None:
    _race(sidecars, lambda stores, n: stores.episodic.append("swarm", {"role": "user", "content": str(n)},
                                                             key=f"k{n}"))
    turns = sidecars[0].episodic.recent("swarm", limit=1000)
    assert sorted(int(t["content"]) for t in turns) == list(range(KEYS))
    assert [t["seq"] for t in turns] == list(range(1, KEYS + 1))
