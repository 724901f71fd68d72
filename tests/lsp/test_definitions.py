"""contextRuleEngine/*, persistentMemory/* and memoryIngestion/* over the real server: CRUD, the
error of each kind (NotFound, Conflict, InvalidParams with paths, Storage), evaluate, execute,
validate with ranges, and the catalogues."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .support import REQUEST, call, error_of, events, paths

pytestmark = pytest.mark.asyncio(loop_scope="module")

RULE_ENGINE = "contextRuleEngine/"
MEMORY = "persistentMemory/"
INGESTION = "memoryIngestion/"


# -- rule engines ----------------------------------------------------------------------------------


async def test_rule_engine_crud(client: LanguageClient, workspace: Path) -> None:
    listed = (await call(client, RULE_ENGINE + "list", {}))["items"]
    assert "planning" in [e["id"] for e in listed]
    created = await call(client, RULE_ENGINE + "create", {
        "$schema": "urn:context-assembly:schema:rule-engine", "name": "Review rules", "enabled": False,
        "rules": [{"name": "Reviewer conventions", "when": [
            {"field": "scope.agent.agent_name", "operator": "eq", "value": "reviewer"}],
            "then": {"add_memories": ["project-conventions"]}}]})
    assert created["id"] == "review-rules" and created["rules"][0]["id"] == "reviewer-conventions"
    assert list(created)[:2] == ["$schema", "id"]
    assert (workspace / ".codebolt/context-rule-engines/review-rules.json").is_file()
    assert (await call(client, RULE_ENGINE + "get", {"id": "review-rules"})) == created
    updated = await call(client, RULE_ENGINE + "update", {"id": "review-rules", "updates": {"enabled": True}})
    assert updated["enabled"] is True and updated["rules"] == created["rules"]

    rule = await call(client, RULE_ENGINE + "addRule", {"engine_id": "review-rules", "rule": {
        "when": [], "then": {"add_memories": ["recent-history"]}}})
    assert rule["id"] == "rule-2"
    changed = await call(client, RULE_ENGINE + "updateRule", {"engine_id": "review-rules", "rule_id": "rule-2",
                                                              "updates": {"priority": 3}})
    assert changed == {**rule, "priority": 3}
    assert await call(client, RULE_ENGINE + "deleteRule", {"engine_id": "review-rules", "rule_id": "rule-2"}) == {
        "engine_id": "review-rules", "rule_id": "rule-2", "deleted": True}
    assert await call(client, RULE_ENGINE + "delete", {"id": "review-rules"}) == {"id": "review-rules",
                                                                                   "deleted": True}
    assert not (workspace / ".codebolt/context-rule-engines/review-rules.json").exists()


async def test_rule_engine_errors(client: LanguageClient) -> None:
    missing = await error_of(client, RULE_ENGINE + "get", {"id": "ghost"})
    assert (missing.code, missing.data) == (-32001, {"id": "ghost"})
    conflict = await error_of(client, RULE_ENGINE + "create", {"id": "planning", "rules": []})
    assert conflict.code == -32003
    invalid = await error_of(client, RULE_ENGINE + "create", {"id": "bad", "rules": [{"id": "r", "when": 5}]})
    assert invalid.code == -32602 and "/rules/0/when" in paths(invalid)
    no_id = await error_of(client, RULE_ENGINE + "get", {})
    assert no_id.code == -32602 and no_id.data["errors"] == [{"path": "/id", "message": "is required"}]
    wrong = await error_of(client, RULE_ENGINE + "update", {"id": 7, "updates": []})
    assert wrong.code == -32602 and paths(wrong) == ["/id", "/updates"]
    rule = await error_of(client, RULE_ENGINE + "deleteRule", {"engine_id": "planning", "rule_id": "ghost"})
    assert rule.code == -32001
    duplicate = await error_of(client, RULE_ENGINE + "addRule", {"engine_id": "planning",
                                                                 "rule": {"id": "arch-in-planning", "when": []}})
    assert duplicate.code == -32003


async def test_rule_engine_evaluate_one_or_all(client: LanguageClient) -> None:
    every = await call(client, RULE_ENGINE + "evaluate", REQUEST)
    engines = [e["engine_id"] for e in every["engine_results"]]
    assert "planning" in engines and engines[-1] == "context-rules"  # the normalised engine runs last
    one = await call(client, RULE_ENGINE + "evaluate", {**REQUEST, "id": "planning"})
    assert [e["engine_id"] for e in one["engine_results"]] == ["planning"]
    assert "architecture-docs" in one["matched_memories"]
    missing = await error_of(client, RULE_ENGINE + "evaluate", {**REQUEST, "id": "ghost"})
    assert missing.code == -32001


async def test_possible_variables(client: LanguageClient) -> None:
    items = (await call(client, RULE_ENGINE + "possibleVariables", {}))["items"]
    phase = next(v for v in items if v["key"] == "addVar.phase")
    assert {"kind": "rule", "engine_id": "planning", "rule_id": "arch-in-planning"} in phase["used_by"]


async def test_validate_a_draft_with_pointers_and_ranges(client: LanguageClient, workspace: Path) -> None:
    draft = {"id": "draft", "rules": [{"id": "r1", "when": [
        {"field": "addVar.phase", "operator": "equalz", "value": "planning"}], "then": {}}]}
    result = await call(client, RULE_ENGINE + "validate", draft)
    assert result["valid"] is False
    [error] = [e for e in result["errors"] if e["path"] == "/rules/0/when/0/operator"]
    assert error["code"] == "unknown-operator" and "range" not in error
    assert (await call(client, RULE_ENGINE + "validate", {"id": "ok", "rules": []}))["valid"] is True

    # an open document: ranges are in the editor's text
    uri = (workspace / ".codebolt/context-rule-engines/draft.json").as_uri()
    text = '{\n  "id": "draft",\n  "rules": [ { "id": "r1",\n    "when": [ { "field": "addVar.phase", ' \
           '"operator": "equalz", "value": "planning" } ], "then": {} } ]\n}\n'
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="json", version=1, text=text)))
    result = await call(client, RULE_ENGINE + "validate", {"uri": uri})
    [error] = [e for e in result["errors"] if e["path"] == "/rules/0/when/0/operator"]
    start = text.index('"equalz"')
    line = text.count("\n", 0, start)
    assert error["range"]["start"] == {"line": line, "character": start - text.rfind("\n", 0, start) - 1}

    # a file on disk, not open
    planning = (workspace / ".codebolt/context-rule-engines/planning.json").as_uri()
    assert (await call(client, RULE_ENGINE + "validate", {"uri": planning}))["valid"] is True


# -- persistent memory ------------------------------------------------------------------------------

DEFINITION = {
    "id": "team-notes", "label": "Team notes", "status": "active",
    "retrieval": {"pipeline": [{"type": "kv_get", "namespace": "payments", "keys": ["architecture"]}]},
    "contribution": {"section": "knowledge", "priority": "low"},
}


async def test_persistent_memory_crud_and_execute(client: LanguageClient) -> None:
    ids = [d["id"] for d in (await call(client, MEMORY + "list", {}))["items"]]
    assert "architecture-docs" in ids
    assert (await call(client, MEMORY + "create", DEFINITION))["id"] == "team-notes"
    assert (await call(client, MEMORY + "get", {"id": "team-notes"}))["label"] == "Team notes"
    updated = await call(client, MEMORY + "update", {"id": "team-notes", "updates": {"label": "Notes"}})
    assert updated["label"] == "Notes" and updated["retrieval"] == DEFINITION["retrieval"]

    result = await call(client, MEMORY + "execute", {"id": "team-notes", "request": REQUEST})
    assert result["status"] == "ok" and len(result["items"]) == 1
    item = result["items"][0]
    assert {"id", "content", "memory_id", "source", "section", "priority", "score", "tokens", "metadata"} <= set(item)
    assert (item["memory_id"], item["priority"]) == ("team-notes", "low")
    assert [(s["type"], s["count"]) for s in result["steps"]] == [("kv_get", 1)]
    assert {"type", "alias", "duration_ms", "count"} <= set(result["steps"][0])
    assert await call(client, MEMORY + "delete", {"id": "team-notes"}) == {"id": "team-notes", "deleted": True}


async def test_persistent_memory_errors(client: LanguageClient, workspace: Path) -> None:
    assert (await error_of(client, MEMORY + "get", {"id": "ghost"})).code == -32001
    assert (await error_of(client, MEMORY + "create", {**DEFINITION, "id": "architecture-docs"})).code == -32003
    invalid = await error_of(client, MEMORY + "create", {**DEFINITION, "id": "x", "retrieval": {
        "pipeline": [{"type": "vector_serch"}]}})
    assert invalid.code == -32602 and "/retrieval/pipeline/0/type" in paths(invalid)
    execute = await error_of(client, MEMORY + "execute", {"id": "architecture-docs", "request": {"input": 5}})
    assert execute.code == -32602 and all(p.startswith("/request") for p in paths(execute))
    assert (await error_of(client, MEMORY + "execute", {"id": "ghost", "request": REQUEST})).code == -32001
    (workspace / ".codebolt/PersistentMemory/broken.json").write_text("{ not json")
    storage = await error_of(client, MEMORY + "get", {"id": "broken"})
    assert storage.code == -32006
    (workspace / ".codebolt/PersistentMemory/broken.json").unlink()


async def test_persistent_memory_validate_and_step_specs(client: LanguageClient) -> None:
    report = await call(client, MEMORY + "validate", {**DEFINITION, "retrieval": {"pipeline": [{"type": "rnk"}]}})
    assert report["valid"] is False and report["errors"][0]["path"] == "/retrieval/pipeline/0/type"
    assert (await call(client, MEMORY + "validate", DEFINITION))["valid"] is True
    specs = (await call(client, MEMORY + "stepSpecs", {}))["items"]
    vector = next(s for s in specs if s["name"] == "vector_search")
    assert vector["group"] == "retrieval" and vector["reads"] == "vector"
    top_k = next(p for p in vector["params"] if p["name"] == "topK")
    assert {"name", "schema", "description", "required", "default"} <= set(top_k) and vector["example"]


# -- ingestion ---------------------------------------------------------------------------------------

PIPELINE = {
    "id": "decisions-log", "label": "Log decisions", "status": "active", "trigger": "onAction",
    "processors": [{"id": "n1", "type": "normalizer", "input": "payload.note", "output": "clean",
                    "operations": ["trim"]}],
    "routing": [{"from": "clean", "write_to": "kv://decisions/{{payload.key}}"}],
}


async def test_ingestion_crud_status_and_execute(client: LanguageClient) -> None:
    ids = [p["id"] for p in (await call(client, INGESTION + "list", {}))["items"]]
    assert "task-completion-embed" in ids
    assert (await call(client, INGESTION + "create", PIPELINE))["id"] == "decisions-log"
    assert (await call(client, INGESTION + "get", {"id": "decisions-log"}))["trigger"] == "onAction"
    disabled = await call(client, INGESTION + "disable", {"id": "decisions-log"})
    assert disabled["status"] == "disabled"
    active = [p["id"] for p in (await call(client, INGESTION + "list", {"active_only": True}))["items"]]
    assert "decisions-log" not in active
    assert (await call(client, INGESTION + "activate", {"id": "decisions-log"}))["status"] == "active"

    result = await call(client, INGESTION + "execute", {"id": "decisions-log", "trigger": "onAction",
                                                        "payload": {"note": "  use JWT  ", "key": "auth"}})
    assert result["status"] == "ok" and result["pipeline_id"] == "decisions-log"
    assert (await call(client, "memory/read", {"uri": "kv://decisions/auth"}))["value"] == "use JWT"
    seen = [m.removeprefix(INGESTION) for m, p in events(client, prefix=INGESTION)
            if p.get("execution_id") == result["execution_id"]]
    assert seen == ["executionStarted", "processorCompleted", "executionCompleted"]

    updated = await call(client, INGESTION + "update", {"id": "decisions-log", "updates": {"label": "Decisions"}})
    assert updated["label"] == "Decisions"
    assert await call(client, INGESTION + "delete", {"id": "decisions-log"}) == {"id": "decisions-log",
                                                                                  "deleted": True}


async def test_memory_event_runs_matching_pipelines(client: LanguageClient) -> None:
    result = await call(client, "memory/event", {
        "trigger": "onTaskCompleted", "payload": {"summary": "Fixed the login timeout: refresh the token."},
        "scope_variables": {"task": {"task_id": "T-1"}}})
    assert [e["pipeline_id"] for e in result["executions"]] == ["task-completion-embed"]
    assert result["executions"][0]["status"] == "ok"
    nothing = await call(client, "memory/event", {"trigger": "onError", "payload": {}})
    assert nothing["executions"] == []


async def test_memory_event_with_an_idempotency_key_runs_once(client: LanguageClient) -> None:
    event = {"trigger": "onTaskCompleted", "payload": {"summary": "Retried: the cache key includes the tenant."},
             "idempotency_key": "task-T-2-done"}
    first = (await call(client, "memory/event", event))["executions"]
    retried = (await call(client, "memory/event", event))["executions"]
    assert [run["status"] for run in first] == ["ok"] and "duplicate" not in first[0]
    assert retried == [{**first[0], "duplicate": True}]
    conflict = await error_of(client, "memory/event", {**event, "payload": {"summary": "Another event."}})
    assert conflict.code == -32003 and conflict.data["idempotency_key"] == "task-T-2-done"
    manual = {"id": "task-completion-embed", "payload": {"summary": "x"}, "idempotency_key": 1}
    assert paths(await error_of(client, INGESTION + "execute", manual)) == ["/idempotency_key"]


async def test_ingestion_errors_and_specs(client: LanguageClient) -> None:
    assert (await error_of(client, INGESTION + "get", {"id": "ghost"})).code == -32001
    assert (await error_of(client, INGESTION + "execute", {"id": "ghost"})).code == -32001
    assert (await error_of(client, INGESTION + "create", {**PIPELINE, "id": "task-completion-embed"})).code == -32003
    invalid = await error_of(client, INGESTION + "create", {**PIPELINE, "id": "x", "trigger": "onLunch"})
    assert invalid.code == -32602 and "/trigger" in paths(invalid)
    trigger = await error_of(client, "memory/event", {"trigger": "onLunch", "payload": {}})
    assert trigger.code == -32602 and paths(trigger) == ["/trigger"]
    assert paths(await error_of(client, "memory/event", {"payload": {}})) == ["/trigger"]
    report = await call(client, INGESTION + "validate", {**PIPELINE, "processors": [{"id": "p", "type": "chunkr"}]})
    assert report["valid"] is False and report["errors"]
    assert (await call(client, INGESTION + "validate", PIPELINE))["valid"] is True
    specs = (await call(client, INGESTION + "processorSpecs", {}))["items"]
    assert {"chunker", "normalizer", "llm_extract"} <= {s["name"] for s in specs}
