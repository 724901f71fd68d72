"""Routing: foreach, conditions, `{{variable}}` destinations, and values that try to leave their store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from context_assembly.ingestion.templates import TemplateError, TemplateVariables, fill_uri, safe_value

from .support import engine_over, keys, pipeline

CHUNKER = {"id": "c", "type": "chunker", "input": "payload.text", "chunk_size": 8, "overlap": 0}
TEXT = " ".join(f"word{i}" for i in range(30))


def variables(**payload: Any) -> TemplateVariables:
    return TemplateVariables(payload, "onAction", "exec1", "pipe", 1_700_000_000.0,
                             {"thread": {"thread_id": "t-1"}}, {"phase": "plan"}, {"out": {"n": 3}})


def test_foreach_condition_and_templates(tmp_path: Path) -> None:
    route = {"from": "c", "foreach": True, "condition": [{"field": "item.index", "operator": "lt", "value": 2}],
             "write_to": "kv://chunks/{{payload.task_id}}-{{scope.thread.thread_id}}-{{item.index}}"}
    with engine_over(tmp_path, pipeline("p", [CHUNKER], [route])) as (engine, runtime):
        result = engine.execute("p", {"text": TEXT, "task_id": "t42"}, scope_variables={"thread": {"thread_id": "th"}})
        [run] = result["routes"]
        assert run["status"] == "ok" and run["filtered"] == result["processors"][0]["count"] - 2
        assert run["written"] == ["kv://chunks/t42-th-0", "kv://chunks/t42-th-1"]
        assert runtime.memory.read("kv://chunks/t42-th-1")["value"]["index"] == 1


def test_without_foreach_the_whole_output_is_one_value(tmp_path: Path) -> None:
    route = {"from": "c", "write_to": "json://all-{{trigger}}"}
    with engine_over(tmp_path, pipeline("p", [CHUNKER], [route])) as (engine, runtime):
        result = engine.execute("p", {"text": TEXT}, trigger="onAction")
        assert result["routes"][0]["written"] == ["json://all-onAction"]
        assert len(runtime.memory.read("json://all-onAction")["value"]) == result["processors"][0]["count"]


def test_conditions_read_bare_item_fields_payload_and_variables(tmp_path: Path) -> None:
    records = [{"name": "a", "score": 0.9}, {"name": "b", "score": 0.4}, {"name": "c", "score": 0.8}]
    route = {"from": "payload.records", "foreach": True,
             "condition": [{"field": "score", "operator": "gt", "value": 0.7},
                           {"any": [{"field": "addVar.phase", "operator": "eq", "value": "review"},
                                    {"field": "payload.force", "operator": "eq", "value": True}]}],
             "write_to": "kv://scored/{{item.name}}"}
    with engine_over(tmp_path, pipeline("p", routing=[route])) as (engine, runtime):
        engine.execute("p", {"records": records}, additional_variables={"phase": "review"})
        assert keys(runtime, "kv://scored/") == ["kv://scored/a", "kv://scored/c"]
        result = engine.execute("p", {"records": [{"name": "d", "score": 1}]})
        assert result["routes"][0]["filtered"] == 1


def test_a_large_payload_is_matched_whole(tmp_path: Path) -> None:
    """A conversation of 1,700 messages: flattened first, the lookup stopped at 5,000 names, so
    `payload.thread_id` (after the messages) was absent, the trigger did not fire and the route
    filtered every message out while reporting `ok`."""
    route = {"from": "payload.messages", "foreach": True,
             "condition": [{"field": "item.role", "operator": "eq", "value": "user"}],
             "write_to": "episodic://{{payload.thread_id}}"}
    ending = pipeline("end", routing=[route], trigger="onConversationEnd",
                      trigger_config={"where": [{"field": "payload.thread_id", "operator": "exists"}]})
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(1700)]
    with engine_over(tmp_path, ending) as (engine, runtime):
        [run] = engine.on_event("onConversationEnd", {"messages": messages, "thread_id": "t-big"})["executions"]
        assert run["status"] == "ok" and len(run["routes"][0]["written"]) == 850
        assert runtime.memory.episodic.count("t-big") == 850


def test_names_hold_dots_lists_and_nulls_as_before() -> None:
    from context_assembly.ingestion.lookup import event_lookup, item_lookup
    from context_assembly.registry.values import MISSING

    base = event_lookup({"a.b": 1, "list": [{"x": None, "y": 2}], "deep": {"k": {"v": 3}}}, "onAction",
                        {"thread": {"thread_id": "t"}}, {"phase": None})
    assert base["payload.a.b"] == 1 and base["payload.list.0.y"] == 2 and base["payload.deep.k.v"] == 3
    assert base.get("payload.list.0.x", MISSING) is MISSING and "addVar.phase" not in base
    assert base["scope.thread.thread_id"] == "t" and base["trigger"] == "onAction"
    assert base.get("payload.list.01.y", MISSING) is MISSING  # a list index as written, not "01"
    element = item_lookup(base, {"score": 0.9, "trigger": "mine", "index": 7}, 3)
    assert element["score"] == 0.9 and element["item.score"] == 0.9 and element["index"] == 3
    assert element["trigger"] == "onAction"  # the event's names win over the element's bare fields
    assert set(element) >= {"item", "item.score", "index", "trigger", "payload.a.b", "score"}


HOSTILE = ["../x", "a/b", "%2F", "..%2f", "a%252Fb", "x\x00y", "?x=1", "#frag", "..", ".", "a\\b", "", "line\nbreak"]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("template", ["kv://ns/{{payload.id}}", "markdown://notes/{{payload.id}}",
                                      "blob://bucket/{{payload.id}}", "vector://{{payload.id}}"])
def test_hostile_template_values_are_refused_and_nothing_is_written(tmp_path: Path, template: str,
                                                                    value: str) -> None:
    route = {"from": "payload", "write_to": template}
    with engine_over(tmp_path, pipeline("p", routing=[route])) as (engine, runtime):
        result = engine.execute("p", {"id": value, "text": "content"})
        [run] = result["routes"]
        assert result["status"] == "failed" and run["status"] == "failed" and run["written"] == []  # nothing stored
        assert run["errors"][0]["variable"] == "payload.id"
        assert "{{payload.id}}" in run["errors"][0]["message"]
        for prefix in ("kv://", "markdown://", "blob://"):
            assert keys(runtime, prefix) == []
        assert runtime.vectors.list() == []
        assert not (tmp_path / "x").exists() and not (tmp_path / ".codebolt/x.md").exists()


def test_hostile_values_are_refused_per_element(tmp_path: Path) -> None:
    route = {"from": "payload.ids", "foreach": True, "write_to": "kv://ns/{{item}}"}
    with engine_over(tmp_path, pipeline("p", routing=[route])) as (engine, runtime):
        result = engine.execute("p", {"ids": ["ok-1", "../bad", "ok-2"]})
        [run] = result["routes"]
        assert run["status"] == "partial" and run["errors"][0]["index"] == 1
        assert keys(runtime, "kv://") == ["kv://ns/ok-1", "kv://ns/ok-2"]


def test_safe_values_are_written_exactly() -> None:
    assert safe_value("v", "task-42") == "task-42" and safe_value("v", 7) == "7" and safe_value("v", True) == "true"
    uri = fill_uri("kv://ns/{{payload.id}}", variables(id="50% off: a+b"))
    assert uri == "kv://ns/50%25%20off:%20a+b"
    with pytest.raises(TemplateError, match="not a text or a number"):
        safe_value("v", {"a": 1})


def test_the_scheme_cannot_come_from_a_variable() -> None:
    with pytest.raises(TemplateError, match="scheme"):
        fill_uri("{{payload.scheme}}://x", variables(scheme="file"))


def test_template_roots() -> None:
    v = variables(task={"id": "t"})
    assert fill_uri("kv://{{pipeline_id}}/{{execution_id}}/{{date}}", v) == "kv://pipe/exec1/2023-11-14"
    assert fill_uri("kv://{{addVar.phase}}-{{out.n}}-{{timestamp}}-{{payload.task.id}}", v) == \
        "kv://plan-3-1700000000-t"
    assert fill_uri("kv://{{item.k}}-{{index}}", v.with_item({"k": "v"}, 4)) == "kv://v-4"
    with pytest.raises(TemplateError, match="has no value"):
        fill_uri("kv://{{payload.missing}}", v)
    with pytest.raises(TemplateError, match="unknown template variable"):
        fill_uri("kv://{{nope}}", v)


def test_values_are_shaped_for_their_store(tmp_path: Path) -> None:
    routes = [{"from": "payload.note", "write_to": "markdown://ingested/{{payload.id}}"},
              {"from": "payload.event", "write_to": "log://audit"},
              {"from": "payload.note", "write_to": "episodic://{{scope.thread.thread_id}}"},
              {"from": "payload.note", "write_to": "working://{{scope.thread.thread_id}}/last"},
              {"from": "payload.note", "write_to": "blob://notes/{{payload.id}}"}]
    with engine_over(tmp_path, pipeline("p", routing=routes)) as (engine, runtime):
        result = engine.execute("p", {"id": "n1", "note": "# Note\nbody", "event": {"tool": "grep"}},
                                scope_variables={"thread": {"thread_id": "th-1"}})
        assert result["status"] == "ok", result
        assert (tmp_path / ".codebolt/memory/ingested/n1.md").read_text() == "# Note\nbody"
        [event] = runtime.memory.read("log://audit")["value"]
        assert event["event_type"] == "p" and event["payload"] == {"tool": "grep"}
        # an element that is an event already keeps its other fields in the payload, as memory/write does
        engine.execute("p", {"id": "n2", "note": "x", "event": {"event_type": "task.done", "task_id": "t-1",
                                                                 "duration_s": 42, "payload": {"ok": True}}})
        [done] = [e for e in runtime.memory.read("log://audit")["value"] if e["event_type"] == "task.done"]
        assert done["payload"] == {"task_id": "t-1", "duration_s": 42, "ok": True}
        [turn] = runtime.memory.read("episodic://th-1")["value"]
        assert turn["role"] == "system" and turn["content"] == "# Note\nbody"
        assert runtime.memory.read("working://th-1/last")["value"] == "# Note\nbody"
        assert runtime.memory.read("blob://notes/n1")["exists"]


def test_a_store_refusal_is_a_route_error(tmp_path: Path) -> None:
    routes = [{"from": "payload", "write_to": "episodic://t"},  # a turn needs a role
              {"from": "payload", "write_to": "kv://fine"}]
    with engine_over(tmp_path, pipeline("p", routing=routes)) as (engine, runtime):
        result = engine.execute("p", {"role": 3})
        assert [r["status"] for r in result["routes"]] == ["failed", "ok"]
        assert result["routes"][0]["errors"][0]["uri"] == "episodic://t"
