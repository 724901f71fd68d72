"""memory/read|write|delete|list over the real server: results exactly as SPEC §8, keys such as
"scope.agent.agent_name", "$schema" and "class" unchanged both ways, and the refusals."""

from __future__ import annotations

import pytest
from pytest_lsp import LanguageClient

from .support import call, error_of, paths

pytestmark = pytest.mark.asyncio(loop_scope="module")

AWKWARD = {
    "scope.agent.agent_name": "code-agent",
    "$schema": "urn:context-assembly:schema:settings",
    "class": "Session",
    "def": [1, {"scope.task.task_id": None, "0": "zero", "": "empty", "with space": True}],
    "nested": {"$ref": "#/x", "a-b": 1.5, "ünïcode": "✓ 𝄞"},
}


async def test_write_read_list_delete(client: LanguageClient) -> None:
    assert await call(client, "memory/write", {"uri": "kv://prefs/agent", "value": AWKWARD}) == {
        "uri": "kv://prefs/agent", "written": True}
    assert await call(client, "memory/read", {"uri": "kv://prefs/agent"}) == {
        "uri": "kv://prefs/agent", "exists": True, "value": AWKWARD}
    listed = (await call(client, "memory/list", {"prefix": "kv://prefs/"}))["items"]
    assert [i["uri"] for i in listed] == ["kv://prefs/agent"]
    assert await call(client, "memory/delete", {"uri": "kv://prefs/agent"}) == {"uri": "kv://prefs/agent",
                                                                              "deleted": True}
    assert await call(client, "memory/read", {"uri": "kv://prefs/agent"}) == {
        "uri": "kv://prefs/agent", "exists": False, "value": None}
    assert (await call(client, "memory/delete", {"uri": "kv://prefs/agent"}))["deleted"] is False


async def test_dotted_keys_survive_a_definition_too(client: LanguageClient) -> None:
    stored = await call(client, "contextRuleEngine/create", {
        "$schema": "urn:context-assembly:schema:rule-engine", "id": "dotted",
        "rules": [{"id": "r", "when": [{"field": "scope.agent.agent_name", "operator": "eq", "value": "x"}],
                   "then": {"add_memories": ["kv://class"]}}]})
    assert stored["$schema"] == "urn:context-assembly:schema:rule-engine"
    assert (await call(client, "contextRuleEngine/get", {"id": "dotted"}))["rules"][0]["when"][0]["field"] == \
        "scope.agent.agent_name"


async def test_other_stores(client: LanguageClient) -> None:
    await call(client, "memory/write", {"uri": "markdown://notes/auth", "value": "# Auth\nUse JWT."})
    assert (await call(client, "memory/read", {"uri": "markdown://notes/auth"}))["value"].startswith("# Auth")
    await call(client, "memory/write", {"uri": "log://audit", "value": {"event_type": "deploy", "payload": {"v": 2}}})
    assert (await call(client, "memory/read", {"uri": "log://audit"}))["exists"] is True
    seeded = await call(client, "memory/read", {"uri": "episodic://t-42"})
    assert seeded["exists"] is True and seeded["value"]


async def test_refusals_are_invalid_params(client: LanguageClient) -> None:
    log = await error_of(client, "memory/delete", {"uri": "log://audit"})
    assert log.code == -32602 and "append-only" in log.message
    traversal = await error_of(client, "memory/read", {"uri": "file://../../etc/passwd"})
    assert traversal.code == -32602 and paths(traversal) == ["/uri"]
    scheme = await error_of(client, "memory/read", {"uri": "ftp://x"})
    assert scheme.code == -32602
    not_string = await error_of(client, "memory/read", {"uri": 42})
    assert not_string.code == -32602 and not_string.data["errors"] == [{"path": "/uri",
                                                                        "message": "must be a string"}]
    assert paths(await error_of(client, "memory/write", {"uri": "kv://x"})) == ["/value"]
    assert paths(await error_of(client, "memory/list", {})) == ["/prefix"]
    assert paths(await error_of(client, "memory/read", ["kv://x"])) == [""]
    assert (await call(client, "memory/read", {"uri": "kv://still-serving"}))["exists"] is False


async def test_a_retried_append_with_its_idempotency_key_lands_once(client: LanguageClient) -> None:
    turn = {"uri": "episodic://retried", "value": {"role": "user", "content": "yes"}, "idempotency_key": "turn-7"}
    assert await call(client, "memory/write", turn) == {"uri": "episodic://retried", "written": True}
    assert await call(client, "memory/write", turn) == {"uri": "episodic://retried", "written": True,
                                                        "duplicate": True}
    assert [t["content"] for t in (await call(client, "memory/read", {"uri": "episodic://retried"}))["value"]] == [
        "yes"]
    event = {"uri": "log://retried", "value": {"event_type": "task.done"}, "idempotency_key": "e-1"}
    assert "duplicate" not in await call(client, "memory/write", event)
    assert (await call(client, "memory/write", event))["duplicate"] is True
    assert len((await call(client, "memory/read", {"uri": "log://retried"}))["value"]) == 1
    # a write that replaces its value takes the key and ignores it: repeating it is harmless
    assert await call(client, "memory/write", {"uri": "kv://a/b", "value": 1, "idempotency_key": "x"}) == {
        "uri": "kv://a/b", "written": True}
    refused = await error_of(client, "memory/write", {**turn, "idempotency_key": ""})
    assert refused.code == -32602 and paths(refused) == ["/idempotency_key"]
    # the key reused for another value is a client's mistake: said, not answered as done
    for other in ({**turn, "value": {"role": "user", "content": "no"}}, {**event, "value": {"event_type": "other"}}):
        conflict = await error_of(client, "memory/write", other)
        assert conflict.code == -32003 and conflict.data["idempotency_key"] == other["idempotency_key"]
    assert (await call(client, "memory/write", {**event, "value": {"event_type": "task.done"}}))["duplicate"] is True


async def test_the_servers_own_logs_are_not_written_by_a_client(client: LanguageClient) -> None:
    """A forged `ingestion.execution` record could answer a later retry of a keyed event."""
    for instance in ("ingestion", "access", "ingestion?limit=1"):
        refused = await error_of(client, "memory/write", {"uri": f"log://{instance}",
                                                          "value": {"event_type": "ingestion.execution"}})
        assert refused.code == -32602 and paths(refused) == ["/uri"], instance
    assert (await call(client, "memory/read", {"uri": "log://ingestion"}))["exists"] is True  # still readable
    pipeline = {"id": "forger", "trigger": "manual", "processors": [],
                "routing": [{"from": "payload", "write_to": "log://access"}]}
    await call(client, "memoryIngestion/create", pipeline)
    run = await call(client, "memoryIngestion/execute", {"id": "forger", "payload": {"a": 1}})
    assert run["status"] == "failed" and "server's own log" in run["routes"][0]["errors"][0]["message"]
    await call(client, "memoryIngestion/delete", {"id": "forger"})


async def test_a_list_can_be_limited_and_says_when_there_were_more(client: LanguageClient) -> None:
    for n in range(5):
        await call(client, "memory/write", {"uri": f"kv://paged-list/k{n}", "value": n})
    first = await call(client, "memory/list", {"prefix": "kv://paged-list/", "limit": 3})
    assert [i["uri"] for i in first["items"]] == [f"kv://paged-list/k{n}" for n in range(3)] and first["truncated"]
    whole = await call(client, "memory/list", {"prefix": "kv://paged-list/", "limit": 5})
    assert len(whole["items"]) == 5 and "truncated" not in whole
    assert "truncated" not in await call(client, "memory/list", {"prefix": "kv://paged-list/"})
    for wrong in (0, -1, 1.5, True, "3"):
        refused = await error_of(client, "memory/list", {"prefix": "kv://", "limit": wrong})
        assert refused.code == -32602 and paths(refused) == ["/limit"], wrong
