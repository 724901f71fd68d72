"""The SQLite stores one by one: round trips, misses, listing, generations, store-specific rules."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.stores import interfaces
from context_assembly.stores.sqlite.blobs import SqliteBlobStore
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.episodic import SqliteEpisodicStore
from context_assembly.stores.sqlite.events import SqliteEventLog
from context_assembly.stores.sqlite.json_docs import SqliteJsonStore, resolve_pointer, set_at_pointer
from context_assembly.stores.sqlite.kv import SqliteKVStore
from context_assembly.stores.sqlite.working import SqliteWorkingMemory


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = Database(tmp_path / "db" / "project.db")
    yield database
    database.close()


def test_every_store_implements_its_interface(db: Database) -> None:
    assert isinstance(SqliteKVStore(db), interfaces.KVStore)
    assert isinstance(SqliteJsonStore(db), interfaces.JsonStore)
    assert isinstance(SqliteEventLog(db), interfaces.EventLog)
    assert isinstance(SqliteEpisodicStore(db), interfaces.EpisodicStore)
    assert isinstance(SqliteWorkingMemory(db), interfaces.WorkingMemory)
    assert isinstance(SqliteBlobStore(db), interfaces.BlobStore)


# -- KV


def test_kv_round_trip_and_misses(db: Database) -> None:
    kv = SqliteKVStore(db)
    assert kv.get("default", "default", "missing") is None
    for value in ({"theme": "dark"}, [1, 2.5, "x"], "text", 42, True, None):
        kv.set("default", "default", "k", value)
        entry = kv.get("default", "default", "k")
        assert entry is not None and entry.value == value
    assert kv.get("other", "default", "k") is None  # instances are separate
    assert kv.delete("default", "default", "k") is True
    assert kv.delete("default", "default", "k") is False
    assert kv.get("default", "default", "k") is None


def test_kv_list_by_instance_namespace_prefix(db: Database) -> None:
    kv = SqliteKVStore(db)
    kv.set_many([("default", "users", "alice", 1), ("default", "users", "albert", 2), ("default", "users", "bob", 3),
                 ("team", "users", "alice", 4), ("default", "prefs", "al%_", 5)])
    assert [e.key for e in kv.list("default", "users")] == ["albert", "alice", "bob"]
    assert [e.value for e in kv.list("default", "users", "al")] == [2, 1]
    assert [(e.instance, e.key) for e in kv.list(namespace="users", key_prefix="alice")] == [
        ("default", "alice"), ("team", "alice")]
    assert [e.key for e in kv.list(key_prefix="al%")] == ["al%_"]  # LIKE wildcards are literal
    assert all(e.value is None for e in kv.list(values=False))
    assert len(kv.list()) == 5


def test_kv_generation_bumps_on_write_not_on_read(db: Database) -> None:
    kv = SqliteKVStore(db)
    start = kv.generation()
    kv.set("default", "default", "k", 1)
    after_write = kv.generation()
    assert after_write > start
    kv.get("default", "default", "k")
    kv.list()
    assert kv.generation() == after_write
    kv.delete("default", "default", "nothing-there")
    assert kv.generation() == after_write  # nothing changed
    kv.delete("default", "default", "k")
    assert kv.generation() > after_write
    assert SqliteJsonStore(db).generation() == 0  # generations are per store


def test_kv_refuses_bad_keys_and_values(db: Database) -> None:
    kv = SqliteKVStore(db)
    for bad in ("", "a\x00b", "k" * 5000):
        with pytest.raises(InvalidParamsError):
            kv.set("default", "default", bad, 1)
    with pytest.raises(InvalidParamsError, match="not JSON"):
        kv.set("default", "default", "k", {1, 2})
    with pytest.raises(InvalidParamsError, match="not JSON"):
        kv.set("default", "default", "k", 2**70)
    assert kv.list() == [] and kv.generation() == 0


def test_kv_opaque_keys_are_kept_verbatim(db: Database) -> None:
    kv = SqliteKVStore(db)
    for key in ("../../etc/passwd", "C:\\x", "a/b", "%2e%2e", "ünï ©ødé", "'; DROP TABLE kv; --"):
        kv.set("default", "default", key, key)
        entry = kv.get("default", "default", key)
        assert entry is not None and entry.value == key


# -- JSON documents


def test_json_documents_and_pointers(db: Database) -> None:
    docs = SqliteJsonStore(db)
    assert docs.get("cfg") == (False, None)
    docs.put("cfg", {"conventions": ["pep8", "typed"], "a/b": {"~": 1}, "n": None})
    assert docs.get("cfg") == (True, {"conventions": ["pep8", "typed"], "a/b": {"~": 1}, "n": None})
    assert docs.get("cfg", "/conventions/1") == (True, "typed")
    assert docs.get("cfg", "/a~1b/~0") == (True, 1)
    assert docs.get("cfg", "/n") == (True, None)  # present null differs from missing
    for missing in ("/nope", "/conventions/2", "/conventions/-", "/conventions/01", "/conventions/x", "/n/deeper"):
        assert docs.get("cfg", missing) == (False, None), missing
    assert docs.get("cfg", "") == docs.get("cfg")


def test_json_pointer_writes_and_deletes(db: Database) -> None:
    docs = SqliteJsonStore(db)
    with pytest.raises(InvalidParamsError, match="does not exist"):
        docs.put("cfg", 1, "/a")
    docs.put("cfg", {"list": [1]})
    docs.put("cfg", 2, "/list/-")
    docs.put("cfg", {"x": True}, "/obj")
    docs.put("cfg", 0, "/list/0")
    assert docs.get("cfg") == (True, {"list": [0, 2], "obj": {"x": True}})
    with pytest.raises(InvalidParamsError):
        docs.put("cfg", 1, "/missing/deeper")
    generation = docs.generation()
    assert docs.delete("cfg", "/obj/x") is True
    assert docs.delete("cfg", "/obj/x") is False
    assert docs.generation() == generation + 1
    assert docs.get("cfg") == (True, {"list": [0, 2], "obj": {}})
    assert [d.name for d in docs.list()] == ["cfg"] and docs.list()[0].size > 0
    assert docs.delete("cfg") is True
    assert docs.list() == []


def test_pointer_helpers() -> None:
    assert resolve_pointer([{"a": 1}], "/0/a") == (True, 1)
    assert resolve_pointer("scalar", "/x") == (False, None)
    assert set_at_pointer({"a": 1}, "", [1]) == [1]
    assert set_at_pointer([1], "/1", 2) == [1, 2]


# -- event log


def test_events_newest_first_with_filters(db: Database) -> None:
    log = SqliteEventLog(db)
    now = time.time()
    log.append("default", "tool_call", {"tool": "grep", "ok": True}, ts=now - 10 * 86400)
    log.append("default", "tool_error", {"tool": "grep", "code": 2}, ts=now - 3600)
    log.append("default", "tool_call", {"tool": "sed", "ok": True}, ts=now - 60)
    stored = log.append("default", "message", {"text": "hi"})
    log.append("other", "tool_call", {"tool": "grep"})
    assert set(stored) == {"id", "instance", "event_type", "payload", "ts"} and stored["ts"] >= now
    assert [e["event_type"] for e in log.search("default")] == ["message", "tool_call", "tool_error", "tool_call"]
    assert [e["payload"]["tool"] for e in log.search("default", event_type="tool_call")] == ["sed", "grep"]
    assert len(log.search("default", event_type=["tool_call", "tool_error"])) == 3
    assert len(log.search("default", since=now - 7 * 86400)) == 3
    assert [e["event_type"] for e in log.search("default", limit=2)] == ["message", "tool_call"]
    # fields as a list: a projection of the payload; as a mapping: payload equality
    assert log.search("default", event_type="tool_error", fields=["tool"])[0]["payload"] == {"tool": "grep"}
    grep = log.search("default", fields={"tool": "grep"})
    assert [e["event_type"] for e in grep] == ["tool_error", "tool_call"]
    assert len(log.search("default", fields={"tool": "grep"}, limit=1)) == 1
    assert log.search("default", fields={"tool": "awk"}) == []
    assert log.get("default", stored["id"]) == stored
    assert log.get("other", stored["id"]) is None
    assert [(i.name, i.count) for i in log.instances()] == [("default", 4), ("other", 1)]


def test_events_are_append_only(db: Database) -> None:
    log = SqliteEventLog(db)
    assert not hasattr(log, "delete") and not hasattr(log, "update") and not hasattr(log, "set")
    first = log.append("default", "a", {})
    second = log.append("default", "a", {})
    assert second["id"] > first["id"]
    for bad in ({"event_type": ""}, {"payload": [1]}, {"ts": float("nan")}, {"ts": "now"}):
        args: dict[str, Any] = {"instance": "default", "event_type": "a", "payload": {}} | bad
        with pytest.raises(InvalidParamsError):
            log.append(**args)
    with pytest.raises(InvalidParamsError):
        log.search("default", limit=0)


def test_events_generation(db: Database) -> None:
    log = SqliteEventLog(db)
    log.append("default", "a", {})
    generation = log.generation()
    log.search("default")
    assert log.generation() == generation
    log.append("default", "a", {})
    assert log.generation() == generation + 1


# -- episodic


def test_episodic_order_limit_count(db: Database) -> None:
    episodes = SqliteEpisodicStore(db)
    assert episodes.recent("t-1") == [] and episodes.count("t-1") == 0
    for i in range(7):
        stored = episodes.append("t-1", {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"})
        assert stored["seq"] == i + 1
    episodes.append("t-2", {"role": "user", "content": "other thread", "tool_calls": [{"name": "grep"}]})
    assert [t["content"] for t in episodes.recent("t-1", limit=3)] == ["turn 4", "turn 5", "turn 6"]
    assert len(episodes.recent("t-1", limit=100)) == 7
    assert episodes.count("t-1") == 7 and episodes.count("t-2") == 1
    assert episodes.recent("t-2")[0]["tool_calls"] == [{"name": "grep"}]  # extra turn fields survive
    assert [(t.name, t.count) for t in episodes.threads()] == [("t-1", 7), ("t-2", 1)]
    generation = episodes.generation()
    assert episodes.clear("t-1") == 7
    assert episodes.count("t-1") == 0 and episodes.generation() == generation + 1


def test_episodic_refuses_bad_turns(db: Database) -> None:
    episodes = SqliteEpisodicStore(db)
    bad_turns: list[Any] = ["text", {"content": "no role"}, {"role": "user"}, {"role": 3, "content": "x"}]
    for bad in bad_turns:
        with pytest.raises(InvalidParamsError):
            episodes.append("t", bad)
    with pytest.raises(InvalidParamsError):
        episodes.recent("t", limit=0)


# -- working memory


def test_working_memory_set_get_clear(db: Database) -> None:
    working = SqliteWorkingMemory(db)
    working.set("t-1", "plan", ["read", "edit"])
    working.set("t-1", "found", {"file": "a.py"})
    working.set("t-2", "plan", "other")
    entry = working.get("t-1", "plan")
    assert entry is not None and entry.value == ["read", "edit"]
    assert working.get("t-1", "nope") is None
    assert working.list("t-1") == {"found": {"file": "a.py"}, "plan": ["read", "edit"]}
    assert [(e.thread_id, e.key) for e in working.entries()] == [("t-1", "found"), ("t-1", "plan"), ("t-2", "plan")]
    generation = working.generation()
    assert working.clear("t-1") == 2
    assert working.generation() == generation + 1
    assert working.list("t-1") == {} and working.list("t-2") == {"plan": "other"}
    assert working.clear("t-1") == 0 and working.generation() == generation + 1
    assert working.delete("t-2", "plan") is True and working.delete("t-2", "plan") is False


# -- blobs


def test_blobs_round_trip(db: Database) -> None:
    blobs = SqliteBlobStore(db)
    data = bytes(range(256)) * 10
    info = blobs.put("attachments", "report.bin", data)
    assert info.size == 2560 and len(info.sha256) == 64
    assert blobs.get("attachments", "report.bin") == data
    assert blobs.get("attachments", "missing") is None
    blobs.put("attachments", "empty", b"")
    assert blobs.get("attachments", "empty") == b""
    blobs.put("other", "report.bin", b"x")
    assert [(b.bucket, b.key) for b in blobs.list("attachments")] == [("attachments", "empty"),
                                                                      ("attachments", "report.bin")]
    assert [b.key for b in blobs.list(key_prefix="rep")] == ["report.bin", "report.bin"]
    generation = blobs.generation()
    blobs.get("other", "report.bin")
    assert blobs.generation() == generation
    assert blobs.delete("other", "report.bin") and not blobs.delete("other", "report.bin")
    assert blobs.generation() == generation + 1
    with pytest.raises(InvalidParamsError):
        not_bytes: Any = "not bytes"
        blobs.put("b", "k", not_bytes)


def test_stores_share_one_database_file(tmp_path: Path) -> None:
    first, second = Database(tmp_path / "p.db"), Database(tmp_path / "p.db")
    SqliteKVStore(first).set("default", "default", "k", {"from": "first"})
    entry = SqliteKVStore(second).get("default", "default", "k")
    assert entry is not None and entry.value == {"from": "first"}
    assert SqliteKVStore(second).generation() == 1  # a write in one connection is seen by the other
    first.close()
    second.close()
