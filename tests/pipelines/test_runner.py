"""Runner statuses: ok, skipped, failed, timeout, cancelled — and it never raises."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.pipelines.runner import missing_inputs, run_pipeline
from context_assembly.runtime import Runtime

from .fakes import definition, example_stores, make_request

NOTES = {"type": "markdown_read", "notes": ["style-guide", "coding-standards"]}


def test_ok_run_records_each_step() -> None:
    result = run_pipeline(definition([NOTES | {"alias": "n"}, {"type": "format"}]), make_request(), example_stores())
    assert result.status == "ok" and result.ok and result.error is None
    assert [(s.type, s.alias, s.count) for s in result.steps] == [("markdown_read", "n", 2), ("format", None, 2)]
    assert all(s.duration_ms >= 0 for s in result.steps)


def test_execute_result_shape() -> None:
    memory = definition([NOTES], contribution={"section": "constraints", "priority": "critical"})
    result = run_pipeline(memory, make_request(), example_stores()).to_result(memory)
    assert set(result["steps"][0]) == {"type", "alias", "duration_ms", "count"}
    item = result["items"][0]
    assert (item["memory_id"], item["section"], item["priority"]) == ("m", "constraints", "critical")
    assert item["tokens"] == -(-len(item["content"]) // 4)


def test_disabled_definitions_are_skipped() -> None:
    result = run_pipeline(definition([NOTES], status="disabled"), make_request(), example_stores())
    assert result.status == "skipped" and result.steps == [] and "disabled" in (result.error or "")
    shorthand = {"name": "n", "enabled": False, "pipeline": [{"step": "markdown_read", "note": "style-guide"}]}
    assert run_pipeline(shorthand, make_request(), example_stores()).status == "skipped"


def test_deprecated_definitions_still_run() -> None:
    assert run_pipeline(definition([NOTES], status="deprecated"), make_request(), example_stores()).ok


@pytest.mark.parametrize("scopes", [{}, {"user": {}}, {"user": {"user_id": None}}])
def test_missing_or_empty_scopes_skip_with_missing_variables(scopes: dict[str, Any]) -> None:
    memory = definition([NOTES], inputs_scope=["project", "user"])
    result = run_pipeline(memory, make_request(scope_variables={"project": {"project_id": "p"}, **scopes}),
                          example_stores())
    assert result.status == "skipped" and result.missing_variables == ["scope.user"]
    assert result.steps == []


def test_required_additional_variables() -> None:
    declared = [{"name": "module", "required": True}, {"name": "phase", "required": False},
                {"name": "depth", "required": True, "default": 2}]
    memory = definition([{"type": "rewrite_query", "template": "${addVar.module} ${addVar.depth}"}],
                        additional_variables=declared)
    result = run_pipeline(memory, make_request(), example_stores())
    assert result.status == "skipped" and result.missing_variables == ["addVar.module"]
    assert missing_inputs(memory, make_request(additional_variables={"module": "auth"})) == []
    ran = run_pipeline(memory, make_request(additional_variables={"module": "auth"}), example_stores())
    assert ran.ok and ran.query == "auth 2"  # the declared default fills in


def test_shorthand_definitions_are_normalised() -> None:
    shorthand = {"name": "conventions", "pipeline": [{"step": "markdown_read", "note": "style-guide"},
                                                    {"step": "format", "format": "prose"}]}
    result = run_pipeline(shorthand, make_request(), example_stores())
    assert result.ok and result.memory_id == "conventions" and [s.type for s in result.steps] == [
        "markdown_read", "format"]


def test_a_store_not_configured_fails_the_pipeline_with_the_step_error() -> None:
    memory = definition([{"type": "vector_search", "collection": "docs", "query": "x"}, {"type": "format"}])
    result = run_pipeline(memory, make_request(), example_stores(vectors=None))
    assert result.status == "failed"
    assert result.error == "step 1 (vector_search): the vectors store is not configured"
    assert result.steps[0].error == "the vectors store is not configured"
    assert result.steps[1].skipped and result.items == []


def test_a_store_exception_of_any_kind_becomes_a_failed_run() -> None:
    class Broken:
        def read(self, note: str) -> str:
            raise RuntimeError("disk on fire")

    result = run_pipeline(definition([NOTES]), make_request(), example_stores(notes=Broken()))
    assert result.status == "failed" and "RuntimeError: disk on fire" in (result.error or "")


@pytest.mark.parametrize(("memory", "message"), [
    (definition([{"type": "rnak"}]), "unknown step type 'rnak' (did you mean rank?)"),
    (definition([{"type": "vector_search"}]), "'collection' is required"),
    (definition([{"type": "markdown_read"}]), "needs one of 'note', 'notes'"),
    (definition([{"type": "rank", "strategy": "best"}]), "'strategy' must be one of"),
    (definition([{"type": "rank", "topK": "many"}]), "'topK' must be a number"),
    (definition([{"type": "filter", "where": [{"field": "score", "operator": "gtee", "value": 1}]}]),
     "unknown operator 'gtee'"),
    (definition([{"type": "filter", "where": [{"field": "content", "operator": "regex", "value": "(a)\\1"}]}]),
     "linear time"),
    (definition(["not a step"]), "a step must be an object"),
    (definition([{"type": "kv_get", "keys": ["a"], "timeout_ms": -1}]), "'timeout_ms' must be a positive"),
    ({"id": "m", "retrieval": {"pipeline": "nope"}}, "no retrieval.pipeline"),
    ({"id": "m"}, "no retrieval.pipeline"),
])
def test_bad_definitions_fail_clearly(memory: dict[str, Any], message: str) -> None:
    result = run_pipeline(memory, make_request(), example_stores())
    assert result.status == "failed"
    assert message in (result.error or "")


def test_a_deadline_already_passed_times_out_before_any_step() -> None:
    result = run_pipeline(definition([NOTES]), make_request(), example_stores(), deadline=time.monotonic() - 1)
    assert result.status == "timeout" and [s.skipped for s in result.steps] == [True]


class SlowNotes:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    def read(self, note: str) -> str:
        time.sleep(self.delay)
        return f"# {note}"


def test_a_slow_step_times_out_at_the_deadline() -> None:
    memory = definition([{"type": "markdown_read", "notes": [f"n{i}" for i in range(50)]}, {"type": "format"}])
    started = time.monotonic()
    result = run_pipeline(memory, make_request(), example_stores(notes=SlowNotes(0.01)), deadline=started + 0.05)
    assert result.status == "timeout" and time.monotonic() - started < 0.4
    assert result.steps[0].error and result.steps[1].skipped


def test_step_timeout_ms() -> None:
    memory = definition([{"type": "markdown_read", "note": "slow", "timeout_ms": 5}])
    result = run_pipeline(memory, make_request(), example_stores(notes=SlowNotes(0.03)))
    assert result.status == "timeout" and "timeout_ms" in (result.error or "")
    fine = run_pipeline(memory | {"retrieval": {"pipeline": [{"type": "markdown_read", "note": "n",
                                                              "timeout_ms": 5000}]}},
                        make_request(), example_stores(notes=SlowNotes(0)))
    assert fine.ok


def test_cancelled_between_steps() -> None:
    reads: list[str] = []

    class CountingNotes:
        def read(self, note: str) -> str:
            reads.append(note)
            return f"# {note}"

    result = run_pipeline(definition([NOTES, {"type": "format"}]), make_request(),
                          example_stores(notes=CountingNotes()), cancelled=lambda: len(reads) >= 2)
    assert result.status == "cancelled" and result.steps[0].count == 2 and result.steps[1].skipped


def test_early_exit_inside_a_branch_stops_the_whole_pipeline() -> None:
    steps = [NOTES, {"type": "conditional", "condition": {"field": "items.count", "operator": "gte", "value": 1},
                     "then_steps": [{"type": "early_exit", "min_items": 1}, {"type": "summarize", "max_items": 1}]},
             {"type": "format"}]
    result = run_pipeline(definition(steps), make_request(), example_stores())
    assert result.ok and [i.content.startswith("# ") for i in result.items] == [True, True]
    assert [(s.type, s.skipped, s.depth) for s in result.steps] == [
        ("markdown_read", False, 0), ("conditional", False, 0), ("early_exit", False, 1),
        ("summarize", True, 1), ("format", True, 0)]


def test_a_failure_inside_a_branch_fails_the_pipeline() -> None:
    steps = [{"type": "conditional", "condition": {"field": "addVar.phase", "operator": "exists"},
              "then_steps": [{"type": "vector_search", "collection": "docs", "query": "x"}]}, NOTES]
    result = run_pipeline(definition(steps), make_request(), example_stores(vectors=None))
    assert result.status == "failed" and result.error == (
        "nested step 1 (vector_search): the vectors store is not configured")
    assert result.steps[-1].skipped


def test_branch_steps_fill_templates_when_they_run() -> None:
    steps = [NOTES | {"alias": "n"},
             {"type": "conditional", "condition": {"field": "addVar.phase", "operator": "eq", "value": "planning"},
              "then_steps": [{"type": "rewrite_query", "template": "${n.count} notes"}],
              "else_steps": [{"type": "rewrite_query", "template": "${never}"}]}]
    assert run_pipeline(definition(steps), make_request(), example_stores()).query == "2 notes"


def test_the_lookup_passed_in_is_used() -> None:
    memory = definition([{"type": "rewrite_query", "template": "${addVar.turn_count}"}])
    result = run_pipeline(memory, make_request(), example_stores(), lookup={"addVar.turn_count": 7})
    assert result.query == "7" and result.variables_used == ["addVar.turn_count"]


@pytest.mark.parametrize("memory", [
    None, [], {"id": 3, "inputs_scope": "user", "additional_variables": "x", "retrieval": {"pipeline": [{}]}},
    definition([{"type": ["rank"]}, {"type": "format", "format": {"x": 1}}]),
    definition([{"type": "conditional", "condition": "yes", "then_steps": "no"}]),
    definition([{"type": "score", "weights": {"score": "heavy"}}]),
    definition([{"type": "merge", "inputs": ["ghost"]}]),
])
def test_garbage_never_raises(memory: Any) -> None:
    result = run_pipeline(memory, make_request(), example_stores())
    assert result.status == "failed" and result.error


def test_a_nested_step_has_its_own_provenance_label() -> None:
    # a top-level and a nested markdown_read are both "step 1" of their list: their labels differ,
    # so merge (by producing step) and provenance keep them apart
    steps = [NOTES,
             {"type": "conditional", "condition": {"field": "addVar.phase", "operator": "eq", "value": "planning"},
              "then_steps": [{"type": "markdown_read", "note": "architecture-decisions"}]},
             {"type": "merge", "strategy": "interleave"}, {"type": "annotate"}]
    result = run_pipeline(definition(steps), make_request(), example_stores())
    assert result.ok, result.error
    assert [(i.source, i.metadata["provenance"]["step"]) for i in result.items] == [
        ("markdown://style-guide", "markdown_read#1"),  # top-level labels are as they always were
        ("markdown://architecture-decisions", "conditional#2/then_steps/markdown_read#1"),
        ("markdown://coding-standards", "markdown_read#1")]


def test_a_last_step_that_ends_past_the_deadline_times_out() -> None:
    memory = definition([{"type": "markdown_read", "note": "slow"}])
    started = time.monotonic()
    result = run_pipeline(memory, make_request(), example_stores(notes=SlowNotes(0.2)), deadline=started + 0.05)
    assert result.status == "timeout" and result.items == []
    assert result.error == "step 1 (markdown_read): the pipeline ran out of time"
    assert result.steps[0].error == "the pipeline ran out of time"
    in_time = run_pipeline(memory, make_request(), example_stores(notes=SlowNotes(0)), deadline=started + 5)
    assert in_time.ok


def test_a_store_error_is_told_once(example_copy: Path) -> None:
    # the embedded episodic store's refusal carries the same text in its errors[]: not repeated
    runtime = Runtime(example_copy)
    try:
        result = run_pipeline(definition([{"type": "episodic_recent", "limit": 20000}]), make_request(),
                              runtime.stores)
    finally:
        runtime.close()
    assert result.status == "failed"
    assert result.error == "step 1 (episodic_recent): limit must be an integer between 1 and 10000 (limits.log_limit)"
