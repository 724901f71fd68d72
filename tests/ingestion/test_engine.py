"""The ingestion engine end to end: triggers, where, status, the event log, notifications."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError, NotFoundError
from context_assembly.ingestion import LOG_EVENT_TYPE, IngestionEngine
from context_assembly.runtime import Runtime

from .support import engine_over, keys, pipeline

SUMMARY = ("Refactored the authentication middleware to validate JWT tokens and rotate signing keys. "
           "Added tests for expired tokens. ")

KV_ROUTE = [{"from": "payload", "write_to": "kv://events/{{pipeline_id}}-{{execution_id}}"}]


def test_the_example_pipeline_embeds_a_completed_task(example_copy: Path) -> None:
    runtime = Runtime(example_copy)
    try:
        engine = IngestionEngine(runtime.memory, runtime.workspace)
        answer = engine.on_event("onTaskCompleted", {"summary": SUMMARY * 20, "task_id": "t-42"})
        assert answer["skipped"] == []
        [run] = answer["executions"]
        assert run["pipeline_id"] == "task-completion-embed" and run["status"] == "ok", run
        assert [p["status"] for p in run["processors"]] == ["ok", "ok"]
        assert run["processors"][0]["count"] >= 2  # 20 summaries are more than one 400-token chunk
        [route] = run["routes"]
        assert route["status"] == "ok" and len(route["written"]) == run["processors"][0]["count"]
        assert all(uri.startswith("vector://task-history/sha256:") for uri in route["written"])
        hits = runtime.vectors.search("task-history", "JWT token validation in the auth middleware", top_k=3)
        assert hits and "JWT" in hits[0]["text"]
        assert hits[0]["metadata"]["pipeline_id"] == "task-completion-embed"
        assert hits[0]["metadata"]["execution_id"] == run["execution_id"]
    finally:
        runtime.close()


def test_where_keeps_the_example_from_running_without_a_summary(example_copy: Path) -> None:
    runtime = Runtime(example_copy)
    try:
        answer = IngestionEngine(runtime.memory, runtime.workspace).on_event("onTaskCompleted", {"task_id": "t"})
        assert answer["executions"] == []
        assert answer["skipped"] == [{"pipeline_id": "task-completion-embed",
                                      "reason": "trigger_config.where does not hold for this event"}]
    finally:
        runtime.close()


def test_on_event_runs_the_active_pipelines_of_the_trigger_whose_where_holds(tmp_path: Path) -> None:
    bugs = pipeline("bugs", routing=KV_ROUTE, trigger="onTaskCompleted",
                    trigger_config={"where": [{"field": "payload.kind", "operator": "eq", "value": "bug"}]})
    coder = pipeline("coder", routing=KV_ROUTE, trigger=["onTaskCompleted", "onTaskFailure"],
                     trigger_config={"where": [{"field": "scope.agent.agent_name", "operator": "eq",
                                                "value": "coder"},
                                               {"field": "trigger", "operator": "in",
                                                "value": ["onTaskCompleted"]}]})
    failures = pipeline("failures", routing=KV_ROUTE, trigger=["onTaskFailure", "onError"])
    with engine_over(tmp_path, bugs, coder, failures) as (engine, runtime):
        answer = engine.on_event("onTaskCompleted", {"kind": "feature"},
                                 scope_variables={"agent": {"agent_name": "coder"}})
        assert [e["pipeline_id"] for e in answer["executions"]] == ["coder"]
        assert [s["pipeline_id"] for s in answer["skipped"]] == ["bugs"]
        answer = engine.on_event("onTaskCompleted", {"kind": "bug"}, scope_variables={"agent": {"agent_name": "x"}})
        assert [e["pipeline_id"] for e in answer["executions"]] == ["bugs"]
        answer = engine.on_event("onError", {"message": "boom"})
        assert [e["pipeline_id"] for e in answer["executions"]] == ["failures"]
        assert len(keys(runtime, "kv://events/")) == 3


def test_unknown_trigger_and_bad_events_are_invalid_params(tmp_path: Path) -> None:
    with engine_over(tmp_path, pipeline("p", routing=KV_ROUTE)) as (engine, _):
        with pytest.raises(InvalidParamsError) as caught:
            engine.on_event("onTaskDone", {})
        assert caught.value.errors[0]["path"] == "/trigger"
        with pytest.raises(InvalidParamsError):
            engine.execute("p", {}, trigger="whenever")
        with pytest.raises(InvalidParamsError) as caught:
            engine.execute("p", ["not", "an", "object"])  # type: ignore[arg-type]
        assert caught.value.errors[0]["path"] == "/payload"


def test_an_unknown_pipeline_is_not_found(tmp_path: Path) -> None:
    with engine_over(tmp_path, pipeline("p", routing=KV_ROUTE)) as (engine, _):
        with pytest.raises(NotFoundError):
            engine.execute("nope", {})
        with pytest.raises(NotFoundError):
            engine.set_status("nope", "disabled")


def test_set_status_round_trip(tmp_path: Path) -> None:
    with engine_over(tmp_path, pipeline("p", routing=KV_ROUTE, trigger="onAction")) as (engine, runtime):
        stored = engine.set_status("p", "disabled")
        assert stored["status"] == "disabled"
        on_disk = json.loads((tmp_path / ".codebolt/MemoryIngestion/p.json").read_text())
        assert on_disk["status"] == "disabled" and on_disk["routing"] == KV_ROUTE
        assert engine.list(active_only=True) == [] and [p["id"] for p in engine.list()] == ["p"]
        answer = engine.on_event("onAction", {"tool": "grep"})
        assert answer["executions"] == [] and answer["skipped"] == [{"pipeline_id": "p", "reason": "disabled"}]
        explicit = engine.execute("p", {"tool": "grep"})
        assert explicit["status"] == "skipped" and "disabled" in explicit["warnings"][0]
        assert keys(runtime, "kv://events/") == []

        assert engine.set_status("p", "active")["status"] == "active"
        assert [e["status"] for e in engine.on_event("onAction", {"tool": "grep"})["executions"]] == ["ok"]
        with pytest.raises(InvalidParamsError):
            engine.set_status("p", "paused")


def test_every_run_is_recorded_in_the_event_log(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "n1", "type": "normalizer", "input": "payload.text",
                                 "operations": ["trim"]}],
                          [{"from": "n1", "write_to": "kv://notes/latest"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"text": "  secret@example.com  "})
        assert result["status"] == "ok"
        [event] = runtime.memory.read(f"log://ingestion?event_type={LOG_EVENT_TYPE}")["value"]
        logged = event["payload"]
        assert logged["execution_id"] == result["execution_id"] and logged["status"] == "ok"
        assert logged["processors"][0]["id"] == "n1" and logged["routes"][0]["written"] == ["kv://notes/latest"]
        assert "secret@example.com" not in json.dumps(logged)  # the payload itself is not logged


def test_observer_events_come_in_order(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "a", "type": "normalizer", "input": "payload.text"},
                                {"id": "b", "type": "chunker", "chunk_size": 50, "overlap": 0}],
                          [{"from": "b", "foreach": True, "write_to": "kv://chunks/{{item.index}}"}])
    seen: list[tuple[str, dict[str, Any]]] = []
    per_call: list[str] = []

    def broken(event: str, data: dict[str, Any]) -> None:
        raise RuntimeError("the client went away")

    with engine_over(tmp_path, definition, observer=lambda e, d: seen.append((e, d))) as (engine, _):
        result = engine.execute("p", {"text": "one two three"}, observer=lambda e, d: per_call.append(e))
        assert result["status"] == "ok"
        assert [e for e, _ in seen] == ["executionStarted", "processorCompleted", "processorCompleted",
                                        "executionCompleted"]
        assert per_call == [e for e, _ in seen]
        assert {d["execution_id"] for _, d in seen} == {result["execution_id"]}
        assert [d["processor_id"] for e, d in seen if e == "processorCompleted"] == ["a", "b"]
        assert seen[-1][1]["status"] == "ok" and seen[-1][1]["written"] == 1
        assert engine.execute("p", {"text": "x"}, observer=broken)["status"] == "ok"


def test_a_failing_processor_stops_the_execution(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "parse", "type": "parser", "input": "payload.body", "format": "json"},
                                {"id": "clean", "type": "normalizer"}],
                          [{"from": "clean", "write_to": "kv://parsed/body"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"body": "{not json"})
        assert result["status"] == "failed" and "not valid JSON" in result["error"]
        assert [(p["id"], p["status"]) for p in result["processors"]] == [("parse", "failed"), ("clean", "skipped")]
        assert result["routes"] == [] and keys(runtime, "kv://parsed/") == []
        missing = engine.execute("p", {})
        assert missing["status"] == "failed" and "payload.body" in missing["processors"][0]["error"]


def test_an_invalid_definition_fails_without_running(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "c", "type": "chunkr"}], KV_ROUTE)
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"a": 1})
        assert result["status"] == "failed" and "chunker" in result["error"]
        assert result["processors"] == [] and keys(runtime, "kv://") == []


def test_route_errors_make_the_execution_partial(tmp_path: Path) -> None:
    definition = pipeline("p", routing=[{"from": "payload", "write_to": "kv://a/{{payload.id}}"},
                                        {"from": "payload", "write_to": "kv://b/fixed"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"id": "../escape"})
        assert result["status"] == "partial"
        assert [r["status"] for r in result["routes"]] == ["failed", "ok"]
        assert keys(runtime, "kv://") == ["kv://b/fixed"]


def test_a_cancelled_execution_stops(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "n", "type": "normalizer"}], KV_ROUTE)
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"a": " b "}, cancelled=lambda: True)
        assert result["status"] == "cancelled" and result["processors"][0]["status"] == "skipped"
        assert result["routes"] == [] and keys(runtime, "kv://") == []


def test_processor_parameters_may_be_filled_from_the_event(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "c", "type": "chunker", "input": "payload.text",
                                 "chunk_size": "${addVar.size}", "overlap": "${payload.overlap}"}],
                          [{"from": "c", "foreach": True, "write_to": "kv://c/{{item.index}}"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        text = " ".join(f"word{i}" for i in range(40))
        result = engine.execute("p", {"text": text, "overlap": 0}, additional_variables={"size": 20})
        assert result["status"] == "ok" and result["processors"][0]["count"] > 1
        missing = engine.execute("p", {"text": text, "overlap": 0})
        assert missing["status"] == "failed" and "addVar.size" in missing["processors"][0]["error"]


def test_input_defaults_to_the_previous_output(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "parse", "type": "parser", "input": "payload.doc", "format": "yaml"},
                                {"id": "clean", "type": "normalizer", "operations": ["remove_nulls"]}],
                          [{"from": "clean", "write_to": "json://doc"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        assert engine.execute("p", {"doc": "a: 1\nb: null\n"})["status"] == "ok"
        assert runtime.memory.read("json://doc")["value"] == {"a": 1}


def test_a_run_whose_routes_all_failed_is_failed_not_partial(tmp_path: Path) -> None:
    """Nothing was stored: `partial` let a client believe something was."""
    definition = pipeline("p", routing=[{"from": "payload", "write_to": "kv://x/{{payload.missing}}"},
                                        {"from": "payload", "write_to": "json://nodoc#/a"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"a": 1})
        assert [route["status"] for route in result["routes"]] == ["failed", "failed"]
        assert result["status"] == "failed" and "every route failed" in result["error"]
        [event] = runtime.memory.read(f"log://ingestion?event_type={LOG_EVENT_TYPE}")["value"]
        assert event["payload"]["status"] == "failed"


def test_a_value_no_key_can_hold_fails_its_route_and_the_run_goes_on_recorded(tmp_path: Path) -> None:
    """A lone surrogate (a YAML parser's output, a client's string) filled into a destination raised
    out of the run: the routes before it written, the ones after never run, nothing recorded."""
    definition = pipeline("p", routing=[{"from": "payload.ok", "write_to": "kv://a/{{payload.ok}}"},
                                        {"from": "payload", "write_to": "kv://b/{{payload.sid}}"},
                                        {"from": "payload.ok", "write_to": "kv://c/{{payload.ok}}"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"ok": "fine", "sid": "\ud800"})
        assert [route["status"] for route in result["routes"]] == ["ok", "failed", "ok"]
        assert "lone surrogate" in result["routes"][1]["errors"][0]["message"]
        assert result["status"] == "partial"
        assert keys(runtime, "kv://a") == ["kv://a/fine"] and keys(runtime, "kv://c") == ["kv://c/fine"]
        [event] = runtime.memory.read(f"log://ingestion?event_type={LOG_EVENT_TYPE}")["value"]
        assert event["payload"]["status"] == "partial"


def test_a_status_change_keeps_the_comments_of_a_yaml_pipeline(tmp_path: Path) -> None:
    """Pipeline files are edited by people and kept in version control: disabling one rewrote it
    whole and its comments were gone."""
    text = (
        "# team-owned pipeline: ask #data before changing\n"
        "id: notes\n"
        "label: Notes\n"
        "status: active  # on in production\n"
        "trigger: onAction\n"
        "processors: []\n"
        "routing:\n"
        "  # latest only\n"
        "  - from: payload\n"
        "    write_to: kv://notes/latest\n"
    )
    folder = tmp_path / ".codebolt" / "MemoryIngestion"
    folder.mkdir(parents=True)
    (folder / "notes.yaml").write_text(text)
    with engine_over(tmp_path) as (engine, _runtime):
        assert engine.set_status("notes", "disabled")["status"] == "disabled"
        after = (folder / "notes.yaml").read_text()
        assert "# team-owned pipeline: ask #data before changing" in after and "# latest only" in after
        assert "status: disabled" in after and "status: active" not in after
        assert engine.get("notes")["routing"] == [{"from": "payload", "write_to": "kv://notes/latest"}]
        assert engine.set_status("notes", "active")["status"] == "active"
        assert "# latest only" in (folder / "notes.yaml").read_text()
