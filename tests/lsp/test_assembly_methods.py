"""contextAssembly/*: assemble (events, progress, settings), validate, memoryTypes, evaluateRules,
requiredVariables, over the real server on the seeded example."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from context_assembly.client import TraceLayouts

from .support import REQUEST, call, error_of, events, paths

RULE_ENGINE = "contextRuleEngine/"

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_initialize_pulls_settings_and_registers_the_watcher(client: LanguageClient) -> None:
    for _ in range(100):  # both follow `initialized` asynchronously
        if client.registrations:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.05)
    [registration] = client.registrations  # type: ignore[attr-defined]
    assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    assert registration.register_options["watchers"][0]["globPattern"] == "**/.codebolt/**"
    request = {k: v for k, v in REQUEST.items() if k != "constraints"}  # the settings' default budget applies
    result = await call(client, "contextAssembly/assemble", request)
    assert result["meta"]["max_tokens"] == 4000  # .codebolt/context-assembly.json
    client.set_configuration({"pipeline_timeout_ms": 60000, "max_tokens": 1234}, section="contextAssembly")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    for _ in range(100):
        result = await call(client, "contextAssembly/assemble", request)
        if result["meta"]["max_tokens"] == 1234:
            break
        await asyncio.sleep(0.05)
    assert result["meta"]["max_tokens"] == 1234 and result["meta"]["token_estimate"] <= 1234
    client.set_configuration({"pipeline_timeout_ms": 60000}, section="contextAssembly")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))


async def test_assemble_returns_the_context_with_events_in_order(client: LanguageClient) -> None:
    result = await call(client, "contextAssembly/assemble", REQUEST)
    assert set(result) == {"context", "trace", "meta"}
    assert list(result["context"]) == ["state", "warnings", "constraints", "knowledge", "history", "suggestions",
                                       "working_memory"]
    assembly_id = result["meta"]["assembly_id"]
    assert result["meta"]["token_estimate"] <= 4000
    seen = events(client, assembly_id)
    names = [m.removeprefix("contextAssembly/") for m, _ in seen]
    pipelines = len(result["trace"]["memory_calls"])
    assert names == ["started", "rulesEvaluated", *["pipelineComplete"] * pipelines, "complete"]
    assert all(p["assembly_id"] == assembly_id for _, p in seen)
    assert seen[0][1]["thread_id"] == "t-42"
    assert seen[-1][1]["meta"]["assembly_id"] == assembly_id


async def test_assemble_with_a_caller_chosen_id(client: LanguageClient) -> None:
    result = await call(client, "contextAssembly/assemble", {**REQUEST, "assembly_id": "turn-7"})
    assert result["meta"]["assembly_id"] == "turn-7"
    assert [m for m, _ in events(client, "turn-7")][0] == "contextAssembly/started"
    error = await error_of(client, "contextAssembly/assemble", {**REQUEST, "assembly_id": "../escape"})
    assert error.code == -32602 and paths(error) == ["/assembly_id"]


async def test_assemble_reports_progress_for_a_work_done_token(client: LanguageClient) -> None:
    client.progress_reports["turn-progress"] = []
    await call(client, "contextAssembly/assemble", {**REQUEST, "workDoneToken": "turn-progress"})
    reports: list[Any] = client.progress_reports["turn-progress"]
    kinds = [r.kind for r in reports]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds
    assert reports[0].title == "contextAssembly/assemble"
    percentages = [r.percentage for r in reports if r.kind == "report"]
    assert percentages == sorted(percentages) and percentages[-1] == 90
    assert reports[-1].message == "done"


async def test_an_invalid_request_is_invalid_params_with_every_path(client: LanguageClient) -> None:
    bad = {"scope_variables": {"agent": 5}, "constraints": {"max_tokens": -1}, "unexpected": True}
    error = await error_of(client, "contextAssembly/assemble", bad)
    assert error.code == -32602
    assert set(paths(error)) >= {"/scope_variables/agent", "/constraints/max_tokens"}
    assert all("message" in e for e in error.data["errors"])
    assert [m for m, _ in events(client)][-1] == "contextAssembly/error"
    error = await error_of(client, "contextAssembly/assemble", [1, 2])
    assert error.code == -32602 and paths(error) == [""]


async def test_validate_checks_without_running(client: LanguageClient) -> None:
    before = len(events(client))
    result = await call(client, "contextAssembly/validate", {
        **REQUEST, "explicit_memory": ["architecture-docs", "no-such-memory", "kv://ok"],
        "rule_engine_ids": ["planning", "ghost"]})
    assert result["valid"] is True and result["errors"] == []
    assert [w["path"] for w in result["warnings"]] == ["/explicit_memory/1", "/rule_engine_ids/1"]
    invalid = await call(client, "contextAssembly/validate", {"input": {"text": 3}})
    assert invalid["valid"] is False
    assert "/input/text" in {e["path"] for e in invalid["errors"]}
    assert len(events(client)) == before  # nothing ran


async def test_memory_types(client: LanguageClient) -> None:
    items = (await call(client, "contextAssembly/memoryTypes", {}))["items"]
    by_id = {i["id"]: i for i in items}
    assert {"architecture-docs", "project-conventions", "recent-history"} <= set(by_id)
    docs = by_id["architecture-docs"]
    assert set(docs) == {"id", "label", "description", "section", "priority", "status", "inputs_scope",
                         "additional_variables"}
    assert (docs["section"], docs["priority"], docs["inputs_scope"]) == ("knowledge", "high", ["project"])


async def test_evaluate_rules_explains_each_condition(client: LanguageClient) -> None:
    result = await call(client, "contextAssembly/evaluateRules", REQUEST)
    assert {"matched_memories", "excluded_memories", "engine_results", "variables_used",
            "missing_variables"} <= set(result)
    assert "architecture-docs" in result["matched_memories"]
    planning = next(e for e in result["engine_results"] if e["engine_id"] == "planning")
    rule = next(r for r in planning["rules"] if r["matched"])
    condition = rule["conditions"][0]
    assert {"field", "operator", "value", "actual", "result"} <= set(condition)
    assert "scope.agent.agent_name" in result["variables_used"] or result["variables_used"]


async def test_evaluate_rules_explain_option_trims_the_trace(client: LanguageClient) -> None:
    full = await call(client, "contextAssembly/evaluateRules", {**REQUEST, "explain": "all"})
    matched = await call(client, "contextAssembly/evaluateRules", {**REQUEST, "explain": "matched"})
    bare = await call(client, "contextAssembly/evaluateRules", {**REQUEST, "explain": "none"})
    assert full == await call(client, "contextAssembly/evaluateRules", REQUEST)  # "all" is the default
    for result in (matched, bare):
        assert {k: v for k, v in result.items() if k != "engine_results"} == \
            {k: v for k, v in full.items() if k != "engine_results"}
    fired = [(e["engine_id"], r["rule_id"]) for e in full["engine_results"] for r in e["rules"] if r["matched"]]
    assert fired and any(not r["matched"] for e in full["engine_results"] for r in e["rules"])
    for result in (matched, bare):
        assert [(e["engine_id"], r["rule_id"]) for e in result["engine_results"] for r in e["rules"]] == fired
    conditions = {(e["engine_id"], r["rule_id"]): r["conditions"] for e in full["engine_results"] for r in e["rules"]}
    assert any(conditions[key] for key in fired)
    assert all(r["conditions"] == conditions[e["engine_id"], r["rule_id"]]
               for e in matched["engine_results"] for r in e["rules"])
    assert all(r["conditions"] == [] for e in bare["engine_results"] for r in e["rules"])
    one = await call(client, "contextRuleEngine/evaluate", {**REQUEST, "id": "planning", "explain": "none"})
    assert [e["engine_id"] for e in one["engine_results"]] == ["planning"]
    error = await error_of(client, "contextAssembly/evaluateRules", {**REQUEST, "explain": "some"})
    assert error.code == -32602 and paths(error) == ["/explain"]


async def test_evaluate_rules_compact_trace_expands_to_the_full_answer(client: LanguageClient) -> None:
    layouts = TraceLayouts()
    for params in (REQUEST, {**REQUEST, "explain": "matched"}, {**REQUEST, "rule_engine_ids": ["planning"]},
                   {**REQUEST, "additional_variables": {"phase": None}, "input": {"text": None}}):
        full = await call(client, "contextAssembly/evaluateRules", params)
        compact = await call(client, "contextAssembly/evaluateRules", {**params, "trace_format": "compact"})
        assert compact["trace_format"] == "compact" and "actual_values" in compact
        assert all(set(e["trace"]) == {"layout", "matched", "outcomes"} for e in compact["engine_results"])
        for engine_id, key in layouts.missing(compact):
            layouts.add(await call(client, RULE_ENGINE + "traceLayout", {"id": engine_id, "layout": key}))
        assert layouts.missing(compact) == []
        assert layouts.expand(compact) == full
    one = await call(client, RULE_ENGINE + "evaluate", {**REQUEST, "id": "planning", "trace_format": "compact"})
    assert layouts.expand(one) == await call(client, RULE_ENGINE + "evaluate", {**REQUEST, "id": "planning"})
    bare = {**REQUEST, "explain": "none"}
    packed = await call(client, "contextAssembly/evaluateRules", {**bare, "trace_format": "compact"})
    assert packed["explain"] == "none" and "actual_values" not in packed  # the matched rules' indexes only
    assert all(set(e["trace"]) == {"layout", "matched"} for e in packed["engine_results"])
    assert layouts.expand(packed) == await call(client, "contextAssembly/evaluateRules", bare)


async def test_compact_trace_errors(client: LanguageClient) -> None:
    error = await error_of(client, "contextAssembly/evaluateRules", {**REQUEST, "trace_format": "tiny"})
    assert error.code == -32602 and paths(error) == ["/trace_format"]
    error = await error_of(client, RULE_ENGINE + "evaluate", {**REQUEST, "trace_format": 1})
    assert error.code == -32602 and paths(error) == ["/trace_format"]
    error = await error_of(client, RULE_ENGINE + "traceLayout", {"id": "no-such-engine"})
    assert error.code == -32001 and error.data == {"id": "no-such-engine"}
    error = await error_of(client, RULE_ENGINE + "traceLayout", {"layout": "abc"})
    assert error.code == -32602 and paths(error) == ["/id"]
    engine = {"id": "compact-edit", "rules": [{"id": "r", "when": [{"field": "addVar.phase", "operator": "eq",
                                                                    "value": "planning"}],
                                               "then": {"add_memories": ["architecture-docs"]}}]}
    await call(client, RULE_ENGINE + "create", engine)
    try:
        request = {**REQUEST, "rule_engine_ids": ["compact-edit"], "trace_format": "compact"}
        key = (await call(client, "contextAssembly/evaluateRules", request))["engine_results"][0]["trace"]["layout"]
        assert (await call(client, RULE_ENGINE + "traceLayout", {"id": "compact-edit"}))["layout"] == key
        await call(client, RULE_ENGINE + "update", {"id": "compact-edit", "updates": {"rules": [
            {**engine["rules"][0], "name": "renamed"}]}})
        error = await error_of(client, RULE_ENGINE + "traceLayout", {"id": "compact-edit", "layout": key})
        assert error.code == -32003 and "evaluate again" in error.message
        assert error.data["layout"] == key and error.data["current"] != key
        assert (await call(client, "contextAssembly/evaluateRules", REQUEST))["matched_memories"]  # still serving
    finally:
        await call(client, RULE_ENGINE + "delete", {"id": "compact-edit"})


async def test_required_variables(client: LanguageClient) -> None:
    result = await call(client, "contextAssembly/requiredVariables", {"memory_ids": ["architecture-docs", "ghost"]})
    assert result["scopes"] == ["project"] and result["unknown_memory_ids"] == ["ghost"]
    assert "scope.project.project_id" in [v["key"] for v in result["variables"]]
    error = await error_of(client, "contextAssembly/requiredVariables", {"memory_ids": "architecture-docs"})
    assert error.code == -32602 and paths(error) == ["/memory_ids"]
    error = await error_of(client, "contextAssembly/requiredVariables", {})
    assert error.code == -32602 and error.data["errors"] == [{"path": "/memory_ids", "message": "is required"}]


async def test_end_turn_clears_the_threads_working_memory(client: LanguageClient) -> None:
    for key in ("plan", "draft"):
        await call(client, "memory/write", {"uri": f"working://turn-t/{key}", "value": {"step": key}})
    await call(client, "memory/write", {"uri": "working://other-t/plan", "value": 1})
    assert (await call(client, "memory/read", {"uri": "working://turn-t/plan"}))["exists"] is True
    result = await call(client, "contextAssembly/endTurn", {"thread_id": "turn-t"})
    assert result == {"thread_id": "turn-t", "cleared": 2}
    after = await call(client, "memory/read", {"uri": "working://turn-t/plan"})
    assert after["exists"] is False and after.get("value") is None
    assert (await call(client, "memory/read", {"uri": "working://other-t/plan"}))["exists"] is True  # untouched
    assert (await call(client, "contextAssembly/endTurn", {"thread_id": "turn-t"}))["cleared"] == 0
    for bad in ("", "a\x00b", 7):
        error = await error_of(client, "contextAssembly/endTurn", {"thread_id": bad})
        assert error.code == -32602, bad
    # any thread id an assembly takes, `/`, `#`, `%` and `..` included: its URI encodes it
    for thread in ("acme/shop#42", "a%2Fb", "../x", "t?x"):
        encoded = quote(thread, safe="")
        await call(client, "memory/write", {"uri": f"working://{encoded}/plan", "value": 1})
        assert (await call(client, "contextAssembly/endTurn", {"thread_id": thread}))["cleared"] == 1, thread
        assert (await call(client, "memory/read", {"uri": f"working://{encoded}/plan"}))["exists"] is False
    error = await error_of(client, "contextAssembly/endTurn", {})
    assert error.code == -32602 and "thread_id" in str(error.data)
    assert (await call(client, "memory/read", {"uri": "working://turn-t"}))["exists"] is False


async def test_a_budget_no_answer_could_write_is_invalid_params(client: LanguageClient) -> None:
    """1e30 ("no limit") passed as an integer and then failed to encode: an internal error."""
    for budget in (1e30, 2**53):
        refused = await error_of(client, "contextAssembly/assemble", {**REQUEST, "constraints": {"max_tokens": budget}})
        assert refused.code == -32602 and paths(refused) == ["/constraints/max_tokens"], refused
    largest = await call(client, "contextAssembly/assemble", {**REQUEST, "constraints": {"max_tokens": 2**53 - 1}})
    assert largest["meta"]["max_tokens"] == 2**53 - 1
