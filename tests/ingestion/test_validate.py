"""`validate_pipeline`: the schema, then what a schema cannot say; and the processor specs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from context_assembly.ingestion import processor_specs, specs, trigger_specs, validate_pipeline
from context_assembly.registry.ingestion import processor_names, trigger_names

from ..conftest import EXAMPLE
from .support import pipeline

EXAMPLE_PIPELINE = EXAMPLE / ".codebolt/MemoryIngestion/task-completion-embed.json"


def codes(report: dict[str, Any], kind: str = "errors") -> list[tuple[str, str]]:
    return [(p["code"], p["path"]) for p in report[kind]]


def test_the_example_is_valid() -> None:
    report = validate_pipeline(json.loads(EXAMPLE_PIPELINE.read_text()))
    assert report == {"valid": True, "errors": [], "warnings": []}


def test_schema_errors_are_reported() -> None:
    report = validate_pipeline({"id": "p", "processors": [{"id": "c", "type": "chunker", "chunk_size": 0}]})
    assert not report["valid"]
    assert ("schema", "") in codes(report)  # no trigger
    assert any(path.startswith("/processors/0/chunk_size") for _, path in codes(report))
    assert validate_pipeline([1, 2])["valid"] is False


def test_unknown_processor_type_with_did_you_mean() -> None:
    report = validate_pipeline(pipeline("p", [{"id": "c", "type": "chunkr"}], [{"write_to": "kv://x"}]))
    [error] = report["errors"]
    assert error["code"] == "unknown-processor" and error["path"] == "/processors/0/type"
    assert "did you mean 'chunker'" in error["message"]


def test_duplicate_ids_and_outputs() -> None:
    report = validate_pipeline(pipeline("p", [{"id": "a", "type": "normalizer"}, {"id": "a", "type": "normalizer"},
                                              {"id": "b", "type": "normalizer", "output": "a"}],
                                        [{"from": "a", "write_to": "kv://x"}]))
    assert ("duplicate-id", "/processors/1/id") in codes(report)
    assert ("duplicate-output", "/processors/2/output") in codes(report)


def test_inputs_and_froms_must_name_earlier_outputs() -> None:
    report = validate_pipeline(pipeline("p", [{"id": "a", "type": "normalizer", "input": "b"},
                                              {"id": "b", "type": "normalizer", "input": "payloads.x"},
                                              {"id": "c", "type": "normalizer", "input": "b.0.text"}],
                                        [{"from": "chunks", "write_to": "kv://x"}, {"from": "c", "write_to": "kv://y"},
                                         {"write_to": "kv://z"}]))
    errors = {e["path"]: e for e in report["errors"]}
    assert "later processor" in errors["/processors/0/input"]["message"]
    assert "did you mean 'payload'" in errors["/processors/1/input"]["message"]
    assert errors["/routing/0/from"]["code"] == "unknown-output"
    assert set(errors) == {"/processors/0/input", "/processors/1/input", "/routing/0/from"}


@pytest.mark.parametrize(("write_to", "code"), [
    ("kb://x", "unknown-scheme"),
    ("file://src/app.py", "read-only-destination"),
    ("{{payload.scheme}}://x", "template-scheme"),
    ("kv://{{payloads.id}}", "unknown-variable"),
    ("kv://{{scope.thred.thread_id}}", "unknown-variable"),
    ("kv://{{trigger.name}}", "unknown-variable"),
    ("log://audit/12", "invalid-uri"),
    ("vector://docs?q=x", "invalid-uri"),
    ("working://thread-only", "invalid-uri"),
    ("kv://a/b/c/d", "invalid-uri"),
])
def test_destinations(write_to: str, code: str) -> None:
    report = validate_pipeline(pipeline("p", routing=[{"write_to": write_to}]))
    assert (code, "/routing/0/write_to") in codes(report), report


def test_valid_destinations_and_the_graph_view_warning() -> None:
    good = ["kv://sessions/{{payload.session_id}}", "vector://task-history", "graph://kb/node/{{item.id}}",
            "markdown://notes/{{date}}-{{execution_id}}", "blob://b/{{index}}", "log://audit"]
    report = validate_pipeline(pipeline("p", routing=[{"write_to": w} for w in good]))
    assert report["valid"], report
    report = validate_pipeline(pipeline("p", routing=[{"write_to": "graph://kb"}]))
    assert report["valid"] and codes(report, "warnings") == [("graph-destination", "/routing/0/write_to")]
    kb = pipeline("p", [{"id": "k", "type": "llm_extract_kb"}], [{"from": "k", "write_to": "graph://kb"}])
    assert validate_pipeline(kb)["warnings"] == []


def test_conditions() -> None:
    definition = pipeline("p", routing=[{"write_to": "kv://x", "condition": [
        {"field": "score", "operator": "gt", "value": 0.7},
        {"field": "item.kind", "operator": "in", "value": ["a"]},
        {"field": "payload.kind", "operator": "eq", "value": "bug"},
        {"field": "scope.agnt.agent_id", "operator": "exists"},
        {"field": "x", "operator": "bigger", "value": 1},
    ]}], trigger_config={"where": [{"field": "payload.summary", "operator": "exists"},
                                   {"field": "trigger", "operator": "eq", "value": "manual"},
                                   {"field": "score", "operator": "gt", "value": 1},
                                   {"field": "payload.x", "operator": "regex", "value": "(a"}]})
    report = validate_pipeline(definition)
    assert set(codes(report)) == {
        ("unknown-variable", "/routing/0/condition/3/field"),
        ("unknown-operator", "/routing/0/condition/4/operator"),
        ("unknown-variable", "/trigger_config/where/2/field"),
        ("unsafe-regex", "/trigger_config/where/3/value"),
    }


def test_chunker_overlap_and_parameter_templates() -> None:
    report = validate_pipeline(pipeline("p", [
        {"id": "c", "type": "chunker", "chunk_size": 100, "overlap": 100},
        {"id": "d", "type": "chunker", "chunk_size": "${addVar.size}", "overlap": "${payload.overlap}"},
        {"id": "e", "type": "chunker", "chunk_size": "${query}"},
    ], [{"write_to": "kv://x"}]))
    assert codes(report) == [("invalid-overlap", "/processors/0/overlap"),
                             ("unknown-variable", "/processors/2/chunk_size")]


def test_warnings_for_a_pipeline_that_writes_nowhere_and_uninstalled_custom_processors() -> None:
    report = validate_pipeline(pipeline("p", [{"id": "u", "type": "custom", "entry_point": "nope"}]))
    assert report["valid"] and codes(report, "warnings") == [("unknown-entry-point", "/processors/0/entry_point")]
    assert validate_pipeline(pipeline("p", [{"id": "u", "type": "custom", "entry_point": "nope"}]),
                             custom_names={"nope"})["warnings"] == []
    report = validate_pipeline(pipeline("p", [{"id": "n", "type": "normalizer"}]))
    assert codes(report, "warnings") == [("no-routes", "/routing")]
    embedded = pipeline("p", [{"id": "e", "type": "vector_embed", "collection": "docs"}])
    assert validate_pipeline(embedded)["warnings"] == []


def test_processor_specs() -> None:
    listed = processor_specs()
    assert [p["name"] for p in listed] == processor_names()
    chunker = listed[0]
    assert [p["name"] for p in chunker["params"]][:3] == ["id", "input", "output"]
    size = next(p for p in chunker["params"] if p["name"] == "chunk_size")
    assert size["default"] == 400 and size["required"] is False and "schema" in size and size["description"]
    assert {p["name"]: p["uses_llm"] for p in listed}["llm_extract_kb"] is True
    for spec in listed:  # every example is a valid processor (reading the payload here)
        example = {**spec["example"], "input": "payload"}
        routes = [{"from": example["output"], "write_to": "kv://x"}]
        assert validate_pipeline(pipeline("p", [example], routes))["errors"] == [], spec["name"]
    assert [t["name"] for t in trigger_specs()] == trigger_names()
    assert {r["name"] for r in specs()["routing"]} == {"id", "from", "foreach", "condition", "write_to"}


def test_a_dollar_placeholder_in_a_destination_is_reported() -> None:
    """`kv://sessions/${payload.n}` (memory steps' syntax) validated clean and wrote the key
    `${payload.n}` for every event, each overwriting the last."""
    definition = pipeline("p", routing=[{"from": "payload", "write_to": "kv://sessions/${payload.n}"}])
    found = validate_pipeline(definition)
    messages = [e["message"] for e in found["errors"]]
    assert any("'${payload.n}' is written as it is: a destination fills {{payload.n}}" in m for m in messages), found
