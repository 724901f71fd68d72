"""JSON documents, the event log, episodic turns and blobs: the contract on every backend."""

from __future__ import annotations

import threading

import pytest

from context_assembly.errors import ContextAssemblyError, InvalidParamsError
from context_assembly.stores.interfaces import BlobStore, EpisodicStore, EventLog, JsonStore
from context_assembly.stores.store_set import StoreSet


def test_the_stores_implement_their_interfaces(stores: StoreSet) -> None:
    assert isinstance(stores.json_docs, JsonStore) and isinstance(stores.events, EventLog)
    assert isinstance(stores.episodic, EpisodicStore) and isinstance(stores.blobs, BlobStore)


def test_json_documents_and_pointers(stores: StoreSet) -> None:
    docs = stores.json_docs
    start = docs.generation()
    assert docs.get("cfg") == (False, None)
    docs.put("cfg", {"a": {"b": [1, 2, 3]}, "n": None, "s": "x"})
    assert docs.get("cfg", "/a/b/1") == (True, 2)
    assert docs.get("cfg", "/n") == (True, None)
    assert docs.get("cfg", "/a/b/7") == (False, None) and docs.get("cfg", "/missing") == (False, None)
    assert docs.get("cfg", "/a/b/01") == (False, None) and docs.get("cfg", "/a/b/-1") == (False, None)
    assert docs.get("cfg", "/s/0") == (False, None)
    docs.put("cfg", "y", "/s")
    docs.put("cfg", 4, "/a/b/-")
    assert docs.get("cfg") == (True, {"a": {"b": [1, 2, 3, 4]}, "n": None, "s": "y"})
    with pytest.raises(InvalidParamsError):
        docs.put("cfg", 1, "/nowhere/deep")
    with pytest.raises(InvalidParamsError):
        docs.put("absent", 1, "/x")
    assert docs.delete("cfg", "/a/b/0") is True and docs.get("cfg", "/a/b") == (True, [2, 3, 4])
    assert docs.delete("cfg", "/zzz") is False
    docs.put("other", [1])
    assert [(d.name, d.value) for d in docs.list()] == [("cfg", None), ("other", None)]
    assert [d.name for d in docs.list("oth")] == ["other"] and docs.list()[1].size == len(b"[1]")
    assert docs.delete("cfg") is True and docs.delete("cfg") is False
    assert docs.generation() == start + 6


def test_json_pointer_writes_from_many_threads_all_land(stores: StoreSet) -> None:
    stores.json_docs.put("counter", {})

    def write(n: int) -> None:
        stores.json_docs.put("counter", n, f"/k{n}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stores.json_docs.get("counter") == (True, {f"k{n}": n for n in range(16)})


def test_event_log_appends_and_searches(stores: StoreSet) -> None:
    log = stores.events
    start = log.generation()
    first = log.append("audit", "login", {"user": "ann", "ok": True}, ts=100.0)
    log.append("audit", "logout", {"user": "ann"}, ts=200.0)
    log.append("audit", "login", {"user": "bob", "ok": False}, ts=300.0)
    log.append("other", "login", {"user": "cy"}, ts=50.0)
    assert first["id"] > 0 and first["payload"] == {"user": "ann", "ok": True} and first["ts"] == 100.0
    assert log.get("audit", first["id"]) == first and log.get("other", first["id"]) is None
    assert [e["payload"]["user"] for e in log.search("audit")] == ["bob", "ann", "ann"]
    assert [e["ts"] for e in log.search("audit", event_type="login")] == [300.0, 100.0]
    assert [e["ts"] for e in log.search("audit", event_type=["login", "logout"], since=150.0)] == [300.0, 200.0]
    assert [e["payload"] for e in log.search("audit", fields=["user"], limit=1)] == [{"user": "bob"}]
    assert [e["ts"] for e in log.search("audit", fields={"user": "ann", "ok": True})] == [100.0]
    for ts, retries in ((10.0, True), (20.0, 1), (30.0, 1.0)):  # a boolean equals only a boolean
        log.append("flags", "run", {"retries": retries}, ts=ts)
    assert [e["ts"] for e in log.search("flags", fields={"retries": True})] == [10.0]
    assert [e["ts"] for e in log.search("flags", fields={"retries": 1})] == [30.0, 20.0]
    assert [(i.name, i.count, i.last_ts) for i in log.instances()] == [("audit", 3, 300.0), ("flags", 3, 30.0),
                                                                      ("other", 1, 50.0)]
    assert log.generation() == start + 7
    with pytest.raises(InvalidParamsError):
        log.append("audit", "x", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(InvalidParamsError):
        log.search("audit", limit=0)
    assert not hasattr(log, "delete") and not hasattr(log, "update")


def test_episodic_turns_in_order(stores: StoreSet) -> None:
    episodic = stores.episodic
    start = episodic.generation()
    for n in range(5):
        stored = episodic.append("t", {"role": "user", "content": f"turn {n}"})
        assert stored["seq"] == n + 1
    assert [t["content"] for t in episodic.recent("t", 2)] == ["turn 3", "turn 4"]
    assert episodic.count("t") == 5 and episodic.count("none") == 0
    assert [(i.name, i.count) for i in episodic.threads()] == [("t", 5)]
    with pytest.raises(InvalidParamsError):
        episodic.append("t", {"content": "no role"})
    assert episodic.clear("t") == 5 and episodic.recent("t") == [] and episodic.clear("t") == 0
    assert episodic.generation() == start + 6


def test_episodic_appends_from_many_threads_never_collide(stores: StoreSet) -> None:
    def append(n: int) -> None:
        stores.episodic.append("busy", {"role": "user", "content": n})

    threads = [threading.Thread(target=append, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    turns = stores.episodic.recent("busy", 100)
    assert [t["seq"] for t in turns] == list(range(1, 13))
    assert sorted(t["content"] for t in turns) == list(range(12))


def test_blobs(stores: StoreSet) -> None:
    blobs = stores.blobs
    start = blobs.generation()
    data = bytes(range(256)) * 4
    info = blobs.put("b", "k/1", data)
    assert info.size == 1024 and blobs.get("b", "k/1") == data and blobs.get("b", "none") is None
    blobs.put("b", "k/2", b"")
    blobs.put("c", "x", b"x")
    assert [(i.bucket, i.key) for i in blobs.list()] == [("b", "k/1"), ("b", "k/2"), ("c", "x")]
    assert [i.key for i in blobs.list("b", "k/")] == ["k/1", "k/2"] and blobs.get("b", "k/2") == b""
    assert blobs.list("b")[0].sha256 == info.sha256
    assert blobs.delete("b", "k/1") is True and blobs.delete("b", "k/1") is False
    assert blobs.generation() == start + 4
    with pytest.raises(ContextAssemblyError):
        blobs.put("b", "k", "text")  # type: ignore[arg-type]


def test_a_log_pages_back_with_before_and_misses_nothing(stores: StoreSet) -> None:
    log = stores.events
    for n in range(45):  # ties in time too: events given the same ts page by id
        log.append("paged", "tick", {"n": n}, ts=1_700_000_000.0 + n // 3)
    seen: list[int] = []
    page = log.search("paged", limit=20)
    while page:
        seen += [e["payload"]["n"] for e in page]
        page = log.search("paged", limit=20, before=page[-1]["id"])
    assert seen == list(range(44, -1, -1))
    assert [e["payload"]["n"] for e in log.search("paged", limit=5, before=page_id(log, 10), event_type="tick")] == [
        9, 8, 7, 6, 5]
    with pytest.raises(InvalidParamsError, match="has no event"):
        log.search("paged", before=10**9)


def page_id(log: EventLog, n: int) -> int:
    return next(e["id"] for e in log.search("paged", limit=100) if e["payload"]["n"] == n)


def test_a_thread_pages_back_with_before(stores: StoreSet) -> None:
    turns = stores.episodic
    for n in range(25):
        turns.append("paged", {"role": "user", "content": str(n)})
    newest = turns.recent("paged", 10)
    older = turns.recent("paged", 10, before=newest[0]["seq"])
    oldest = turns.recent("paged", 10, before=older[0]["seq"])
    assert [int(t["content"]) for t in oldest + older + newest] == list(range(25))
    assert turns.recent("paged", 10, before=1) == []
