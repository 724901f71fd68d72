"""A route's `condition` is one condition or a list (the schema's `conditions`), and integer
parameters written as whole floats (`chunk_size: 200.0`) run as the integers the schema accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from context_assembly.ingestion import validate_pipeline
from context_assembly.model import unstructure
from context_assembly.workspace.lint import lint_workspace
from context_assembly.workspace.loader import load_workspace

from .support import engine_over, keys, pipeline

RECORDS = {"records": [{"name": "a", "score": 0.9}, {"name": "b", "score": 0.1}]}
HIGH = {"field": "score", "operator": "gt", "value": 0.7}


@pytest.mark.parametrize("condition", [HIGH, [HIGH]], ids=["one object", "a list"])
def test_a_route_condition_filters_the_items(tmp_path: Path, condition: Any) -> None:
    route = {"from": "payload.records", "foreach": True, "condition": condition,
             "write_to": "kv://scored/{{item.name}}"}
    definition = pipeline("p", routing=[route])
    assert validate_pipeline(definition)["errors"] == []
    with engine_over(tmp_path, definition) as (engine, runtime):
        [result] = engine.execute("p", RECORDS)["routes"]
        assert (result["written"], result["filtered"]) == (["kv://scored/a"], 1)  # one object was ignored
        assert keys(runtime, "kv://scored/") == ["kv://scored/a"]
        assert unstructure(load_workspace(tmp_path).ingestion["p"])["routing"][0]["condition"] == condition


def test_a_route_condition_that_is_no_condition_is_reported(tmp_path: Path) -> None:
    route = {"from": "payload", "condition": "score > 0.7", "write_to": "kv://scored/x"}
    assert [e["path"] for e in validate_pipeline(pipeline("p", routing=[route]))["errors"]] == ["/routing/0/condition"]


def test_a_chunker_sized_200_0_runs(tmp_path: Path) -> None:
    chunker = {"id": "c", "type": "chunker", "input": "payload.text", "output": "chunks",
               "chunk_size": 200.0, "overlap": 0.0}
    definition = pipeline("p", [chunker], [{"from": "chunks", "foreach": True,
                                           "write_to": "kv://chunks/{{item.index}}"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"text": "hello world"})
        assert result["status"] == "ok", result["processors"]
        assert keys(runtime, "kv://chunks/") == ["kv://chunks/0"]
    assert lint_workspace(load_workspace(tmp_path)) == []


def test_a_chunker_overlap_of_its_size_written_as_floats_is_reported() -> None:
    chunker = {"id": "c", "type": "chunker", "input": "payload", "chunk_size": 50.0, "overlap": 50.0}
    errors = validate_pipeline(pipeline("p", [chunker], [{"from": "c", "write_to": "kv://x/y"}]))["errors"]
    assert [(e["path"], e["code"]) for e in errors] == [("/processors/0/overlap", "invalid-overlap")]


def test_a_fractional_chunk_size_is_an_error_at_its_path() -> None:
    chunker = {"id": "c", "type": "chunker", "input": "payload", "chunk_size": 200.5}
    errors = validate_pipeline(pipeline("p", [chunker], [{"from": "c", "write_to": "kv://x/y"}]))["errors"]
    assert [e["path"] for e in errors] == ["/processors/0/chunk_size"]


def test_a_name_deeper_than_eight_levels_is_read_as_templates_read_it() -> None:
    """A `where` on `payload.event.data.object.metadata.labels.team.owner.id.value` never held
    (names stopped at 8 levels) while a template reached the same value."""
    from context_assembly.ingestion.lookup import event_lookup

    deep: dict[str, object] = {"value": "u-7"}
    path = ["event", "data", "object", "metadata", "labels", "team", "owner", "id"]
    for key in reversed(path):
        deep = {key: deep}
    lookup = event_lookup(deep, "onAction", None, None)
    assert lookup["payload." + ".".join([*path, "value"])] == "u-7"


def test_keys_holding_dots_at_every_level_cannot_make_a_lookup_explode() -> None:
    """Every way of splitting a long name into keys (`a`, `a.a`, … at each level) is tried at most
    once per value: an event's own keys choose the splits (the name comes from the definition), and
    3 keys at each of 12 levels were 3**12 ways for a name that is not there."""
    from context_assembly.ingestion.lookup import event_lookup
    from context_assembly.registry.values import MISSING

    looked: list[str] = []

    class Counting(dict[str, Any]):
        def __contains__(self, key: object) -> bool:
            looked.append(str(key))
            return super().__contains__(key)

    level: dict[str, Any] = Counting()
    for _ in range(12):
        level = Counting({"a": level, "a.a": level, "a.a.a": level})
    lookup = event_lookup(level, "onAction", None, None)
    assert lookup.get("payload." + ".".join(["a"] * 14) + ".missing", MISSING) is MISSING
    assert len(looked) < 2_000, len(looked)
