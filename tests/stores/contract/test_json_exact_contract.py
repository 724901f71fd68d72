"""A JSON document reads back as written on every backend: key order, -0.0, U+0000, 64-bit integers."""

from __future__ import annotations

import json

import pytest

from context_assembly.stores.store_set import StoreSet

VALUES = [
    {"zeta": 1, "alpha": {"y": 2, "b": 3}, "mid": [{"k2": 1, "k1": 2}]},
    {"nul": "a\u0000b", "neg": -0.0, "big": 2**63 - 1, "tiny": 1e-300},
]


@pytest.mark.parametrize("value", VALUES)
def test_a_document_reads_back_as_written(stores: StoreSet, value: object) -> None:
    docs = stores.json_docs
    docs.put("doc", value)
    found, read = docs.get("doc")
    assert found and json.dumps(read) == json.dumps(value)
    first = next(iter(value))  # type: ignore[call-overload]
    assert docs.get("doc", f"/{first}") == (True, value[first])  # type: ignore[index]


def test_a_document_a_pointer_write_changes_keeps_the_rest_as_written(stores: StoreSet) -> None:
    docs = stores.json_docs
    docs.put("doc", {"zeta": {"b": 1, "a": 2}, "alpha": "x\u0000y"})
    docs.put("doc", {"y": 1, "x": 2}, "/mid")
    docs.delete("doc", "/alpha")
    assert json.dumps(docs.get("doc")[1]) == json.dumps({"zeta": {"b": 1, "a": 2}, "mid": {"y": 1, "x": 2}})


def test_an_event_payload_reads_back_as_written_and_is_found_by_its_fields(stores: StoreSet) -> None:
    """PostgreSQL refused an event whose payload held U+0000 (its jsonb copy cannot hold it)."""
    log = stores.events
    payload = {"zeta": "a\u0000b", "alpha": -0.0, "path": "C:\\u0000x"}
    log.append("main", "saved", payload)
    log.append("main", "saved", {"zeta": "a\ufffdb"})  # what the database narrows to: told apart after
    [found] = log.search("main", fields={"zeta": "a\u0000b"})
    assert json.dumps(found["payload"]) == json.dumps(payload)
    assert [e["payload"] for e in log.search("main", fields={"path": "C:\\u0000x"})] == [payload]


def test_an_event_whose_keys_differ_only_by_u0000_is_found_by_either(stores: StoreSet) -> None:
    """PostgreSQL's jsonb copy holds U+0000 as U+FFFD: two such keys were one there, and the
    database's narrowing lost the event."""
    log = stores.events
    payload = {"a\u0000": 1, "a\ufffd": 2}
    log.append("main", "saved", payload)
    for fields in ({"a\u0000": 1}, {"a\ufffd": 2}):
        assert [e["payload"] for e in log.search("main", fields=fields)] == [payload], fields
