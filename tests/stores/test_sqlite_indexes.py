"""The indexed paths of the SQLite stores answer exactly what a full scan does: KV prefix ranges,
event search by payload field, and the per-instance summary of the event log."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.registry.values import json_equal  # (a boolean equals only a boolean)
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.events import SqliteEventLog
from context_assembly.stores.sqlite.kv import SqliteKVStore, _prefix_end

CHARS = st.sampled_from(["a", "b", "z", "é", "\uffff", "\U0010ffff", "\U0001f600", "\ud7ff", "\ue000", "/", "0"])
keys = st.text(CHARS, min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.text(CHARS, max_size=4), keys)
def test_a_prefix_range_holds_exactly_the_keys_with_the_prefix(prefix: str, key: str) -> None:
    end = _prefix_end(prefix)
    in_range = key >= prefix and (end is None or key < end)
    assert in_range == key.startswith(prefix)
    if end is not None:  # SQLite compares UTF-8 bytes: the same order as code points
        assert (key.encode() < end.encode()) == (key < end)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(keys, max_size=15), st.text(CHARS, max_size=3))
def test_kv_prefix_listing_equals_a_filter(tmp_path: Path, stored: list[str], prefix: str) -> None:
    db = Database(tmp_path / f"kv-{abs(hash((tuple(stored), prefix)))}.db")
    try:
        kv = SqliteKVStore(db)
        kv.set_many([("i", "n", key, 1) for key in stored] + [("i", "other", key, 2) for key in stored])
        listed = [e.key for e in kv.list("i", "n", prefix)]
        assert listed == sorted({k for k in stored if k.startswith(prefix)})
    finally:
        db.close()


scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5, -0.0]) | \
    st.sampled_from(["a", "b", "1", "", '{"x": 1}'])
values = scalars | st.lists(scalars, max_size=2) | st.dictionaries(st.sampled_from(["x"]), scalars, max_size=1)
asked = values | st.just(2**70)  # a search may name what no event can hold
payloads = st.dictionaries(st.sampled_from(["k", "j", "we'ird", "a.b"]), values, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["t1", "t2"]), payloads), max_size=20),
       st.dictionaries(st.sampled_from(["k", "j", "we'ird", "a.b"]), asked, min_size=1, max_size=2),
       st.integers(1, 5))
def test_event_search_by_payload_field_equals_a_scan(tmp_path: Path, events: list[Any], wanted: dict[str, Any],
                                                      limit: int) -> None:
    db = Database(tmp_path / f"ev-{abs(hash(repr((events, wanted, limit))))}.db")
    try:
        log = SqliteEventLog(db)
        for ts, (event_type, payload) in enumerate(events):
            log.append("thread", event_type, payload, ts=float(ts % 7))
        log.append("other", "t1", {k: v for k, v in wanted.items() if v != 2**70}, ts=100.0)
        expected = [e for e in sorted(
            ({"payload": p, "ts": float(ts % 7), "id": ts + 1} for ts, (_, p) in enumerate(events)),
            key=lambda e: (e["ts"], e["id"]), reverse=True)
            if all(k in e["payload"] and json_equal(e["payload"][k], v) for k, v in wanted.items())][:limit]
        found = log.search("thread", fields=wanted, limit=limit)
        assert [(e["id"], e["payload"]) for e in found] == [(e["id"], e["payload"]) for e in expected]
    finally:
        db.close()


def test_event_search_by_field_uses_its_index_and_instances_read_the_summary(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    log = SqliteEventLog(db)
    for i in range(50):
        log.append(f"t{i % 3}", "step", {"status": "ok" if i % 10 else "failed", "n": i}, ts=float(i))
    assert [e["payload"]["n"] for e in log.search("t0", fields={"status": "failed"})] == [30, 0]
    plan = " ".join(row[-1] for row in db.connection().execute(
        """EXPLAIN QUERY PLAN SELECT id FROM events WHERE instance = ? AND json_extract(payload, '$."status"') = ?
           ORDER BY ts DESC, id DESC""", ("t0", "failed")))
    assert "events_field_" in plan and "TEMP B-TREE" not in plan
    assert [(t.name, t.count, t.last_ts) for t in log.instances()] == [("t0", 17, 48.0), ("t1", 17, 49.0),
                                                                       ("t2", 16, 47.0)]
    db.close()


def test_the_instance_summary_is_filled_from_an_older_database(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, instance TEXT NOT NULL, "
                 "event_type TEXT NOT NULL, payload TEXT NOT NULL, ts REAL NOT NULL)")
    conn.executemany("INSERT INTO events(instance, event_type, payload, ts) VALUES (?, 'e', '{}', ?)",
                     [("a", 1.0), ("a", 3.0), ("b", 2.0)])
    conn.commit()
    conn.close()
    db = Database(path)
    log = SqliteEventLog(db)
    assert [(t.name, t.count, t.last_ts) for t in log.instances()] == [("a", 2, 3.0), ("b", 1, 2.0)]
    log.append("b", "e", {}, ts=1.0)
    assert [(t.name, t.count, t.last_ts) for t in log.instances()] == [("a", 2, 3.0), ("b", 2, 2.0)]
    db.close()
