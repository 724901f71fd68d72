"""ContextAssemblyClient: every method family, events (global and per call), typed errors, the llm
callback, and a clean shutdown that leaves no process behind."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from context_assembly.client import (
    ConflictError,
    ContextAssemblyClient,
    InvalidParamsError,
    NotFoundError,
    RpcError,
    TraceLayouts,
)
from tests.lsp.support import REQUEST

pytestmark = pytest.mark.asyncio(loop_scope="module")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(workspace: Path) -> AsyncIterator[ContextAssemblyClient]:
    async with ContextAssemblyClient(workspace, settings={"max_tokens": 3000}) as client:
        yield client
    assert client.returncode == 0 and client.pid is not None and gone(client.pid)


async def test_assemble_with_events(client: ContextAssemblyClient) -> None:
    completed: list[Any] = []
    unsubscribe = client.on("contextAssembly/complete", lambda method, params: completed.append(params))
    mine: list[str] = []
    result = await client.assemble(REQUEST, on_event=lambda method, params: mine.append(method))
    unsubscribe()
    assert mine[:2] == ["contextAssembly/started", "contextAssembly/rulesEvaluated"]
    assert mine[-1] == "contextAssembly/complete" and mine.count("contextAssembly/pipelineComplete") >= 1
    assert completed[-1]["assembly_id"] == result["meta"]["assembly_id"]
    assert result["meta"]["token_estimate"] <= 4000
    other = await client.assemble({k: v for k, v in REQUEST.items() if k != "constraints"})
    assert other["meta"]["max_tokens"] == 3000  # the client's settings override the file's 4000
    assert len(completed) == 1  # unsubscribed
    client.set_settings({"max_tokens": 2500})
    for _ in range(100):
        if (await client.assemble({k: v for k, v in REQUEST.items() if k != "constraints"}))["meta"][
                "max_tokens"] == 2500:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the pushed settings were not applied")


async def test_concurrent_assemblies_route_their_own_events(client: ContextAssemblyClient) -> None:
    seen: dict[int, set[str]] = {0: set(), 1: set()}

    def listener(index: int) -> Any:
        return lambda method, params: seen[index].add(params["assembly_id"])

    first, second = await asyncio.gather(client.assemble(REQUEST, on_event=listener(0)),
                                         client.assemble(REQUEST, on_event=listener(1)))
    assert seen[0] == {first["meta"]["assembly_id"]} and seen[1] == {second["meta"]["assembly_id"]}


async def test_other_assembly_methods(client: ContextAssemblyClient) -> None:
    assert (await client.validate(REQUEST))["valid"] is True
    assert "architecture-docs" in {m["id"] for m in await client.memory_types()}
    assert "architecture-docs" in (await client.evaluate_rules(REQUEST))["matched_memories"]
    assert (await client.required_variables(["architecture-docs"]))["scopes"] == ["project"]


async def test_evaluate_rules_with_the_compact_trace_answers_the_full_answer(client: ContextAssemblyClient) -> None:
    for request in (REQUEST, {**REQUEST, "explain": "matched"}):
        assert await client.evaluate_rules(request, compact_trace=True) == await client.evaluate_rules(request)
    assert await client.rule_engines.evaluate(REQUEST, "planning", compact_trace=True) == \
        await client.rule_engines.evaluate(REQUEST, "planning")
    layout = await client.rule_engines.trace_layout("planning")
    assert layout["engine_id"] == "planning" and layout["conditions"] and layout["rules"]
    await client.rule_engines.create({"id": "client-compact", "rules": [
        {"id": "r", "when": [{"field": "addVar.phase", "operator": "exists"}], "then": {"add_memories": ["x"]}}]})
    try:
        request = {**REQUEST, "rule_engine_ids": ["client-compact"]}
        compact = await client.request("contextAssembly/evaluateRules", {**request, "trace_format": "compact"})
        assert await client.expand_trace(compact) == await client.evaluate_rules(request)
        await client.rule_engines.update_rule("client-compact", "r", {"name": "renamed"})
        expanded = await client.evaluate_rules(request, compact_trace=True)  # the new layout is fetched
        assert expanded == await client.evaluate_rules(request)
        assert expanded["engine_results"][0]["rules"][0]["name"] == "renamed"
        client.trace_layouts = TraceLayouts()  # an answer made before the edit cannot be expanded any more
        with pytest.raises(ConflictError, match="evaluate again"):
            await client.expand_trace(compact)
    finally:
        await client.rule_engines.delete("client-compact")
    with pytest.raises(NotFoundError):
        await client.rule_engines.trace_layout("client-compact")


async def test_rule_engines(client: ContextAssemblyClient) -> None:
    assert "planning" in {e["id"] for e in await client.rule_engines.list()}
    engine = await client.rule_engines.create({"id": "client-rules", "rules": []})
    rule = await client.rule_engines.add_rule("client-rules", {"when": [], "then": {"add_memories": ["x"]}})
    assert (await client.rule_engines.update_rule("client-rules", rule["id"], {"priority": 2}))["priority"] == 2
    assert (await client.rule_engines.get("client-rules"))["rules"][0]["priority"] == 2
    assert (await client.rule_engines.update("client-rules", {"name": "Client"}))["name"] == "Client"
    await client.rule_engines.delete_rule("client-rules", rule["id"])
    assert (await client.rule_engines.evaluate(REQUEST, "planning"))["engine_results"][0]["engine_id"] == "planning"
    assert await client.rule_engines.possible_variables()
    assert (await client.rule_engines.validate({"id": "d", "rules": []}))["valid"] is True
    assert (await client.rule_engines.delete(engine["id"]))["deleted"] is True


async def test_persistent_memory_and_memory(client: ContextAssemblyClient) -> None:
    assert "architecture-docs" in {m["id"] for m in await client.persistent_memory.list()}
    assert (await client.persistent_memory.get("recent-history"))["id"] == "recent-history"
    definition = {"id": "prefs", "retrieval": {"pipeline": [{"type": "kv_get", "namespace": "users",
                                                             "keys": ["u-ada"]}]}}
    await client.persistent_memory.create(definition)
    await client.persistent_memory.update("prefs", {"label": "Prefs"})
    assert (await client.persistent_memory.validate(definition))["valid"] is True
    executed = await client.persistent_memory.execute("prefs", REQUEST)
    assert executed["status"] == "ok" and executed["items"]
    assert any(s["name"] == "rank" for s in await client.persistent_memory.step_specs())
    await client.persistent_memory.delete("prefs")

    value = {"scope.agent.agent_name": "a", "$schema": "s", "class": 1, "jsonrpc": "2.0", "id": 1, "method": "m"}
    assert (await client.memory.write("kv://client/k", value))["written"] is True
    assert (await client.memory.read("kv://client/k"))["value"] == value
    assert [i["uri"] for i in await client.memory.list("kv://client/")] == ["kv://client/k"]
    assert (await client.memory.delete("kv://client/k"))["deleted"] is True


async def test_ingestion(client: ContextAssemblyClient) -> None:
    assert "task-completion-embed" in {p["id"] for p in await client.ingestion.list(active_only=True)}
    pipeline = {"id": "notes-in", "trigger": "manual", "processors": [
        {"id": "n", "type": "normalizer", "input": "payload.text", "output": "clean", "operations": ["trim"]}],
        "routing": [{"from": "clean", "write_to": "kv://notes/latest"}]}
    await client.ingestion.create(pipeline)
    assert (await client.ingestion.validate(pipeline))["valid"] is True
    events: list[str] = []
    result = await client.ingestion.execute("notes-in", {"text": "  hello  "},
                                            on_event=lambda method, params: events.append(method))
    assert result["status"] == "ok"
    assert events == ["memoryIngestion/executionStarted", "memoryIngestion/processorCompleted",
                      "memoryIngestion/executionCompleted"]
    assert (await client.memory.read("kv://notes/latest"))["value"] == "hello"
    assert (await client.ingestion.disable("notes-in"))["status"] == "disabled"
    assert (await client.ingestion.activate("notes-in"))["status"] == "active"
    assert (await client.ingestion.update("notes-in", {"label": "Notes"}))["label"] == "Notes"
    assert (await client.ingestion.get("notes-in"))["label"] == "Notes"
    ran: list[str] = []
    event = await client.memory.event("onTaskCompleted", {"summary": "Shipped it."},
                                      on_event=lambda method, params: ran.append(params["pipeline_id"]))
    assert [e["pipeline_id"] for e in event["executions"]] == ["task-completion-embed"]
    assert set(ran) == {"task-completion-embed"}
    assert any(s["name"] == "chunker" for s in await client.ingestion.processor_specs())
    await client.ingestion.delete("notes-in")


async def test_idempotency_keys(client: ContextAssemblyClient) -> None:
    turn = {"role": "user", "content": "yes"}
    assert "duplicate" not in await client.memory.write("episodic://idem", turn, idempotency_key="t1")
    assert (await client.memory.write("episodic://idem", turn, idempotency_key="t1"))["duplicate"] is True
    assert (await client.memory.write("kv://idem/none", None))["written"] is True  # a null value is still sent
    assert (await client.memory.read("kv://idem/none"))["exists"] is True
    first = await client.memory.event("onTaskCompleted", {"summary": "Once."}, idempotency_key="e1")
    again = await client.memory.event("onTaskCompleted", {"summary": "Once."}, idempotency_key="e1")
    assert again["executions"] == [{**first["executions"][0], "duplicate": True}]
    with pytest.raises(ConflictError):
        await client.memory.event("onTaskCompleted", {"summary": "Twice?"}, idempotency_key="e1")
    ran = await client.ingestion.execute("task-completion-embed", {"summary": "Once."}, idempotency_key="e1",
                                         trigger="onTaskCompleted")
    assert ran["duplicate"] is True  # the same pipeline, key and event: the run of memory/event


async def test_errors_are_typed(client: ContextAssemblyClient) -> None:
    with pytest.raises(NotFoundError) as missing:
        await client.rule_engines.get("ghost")
    assert (missing.value.code, missing.value.data) == (-32001, {"id": "ghost"})
    with pytest.raises(ConflictError):
        await client.rule_engines.create({"id": "planning", "rules": []})
    with pytest.raises(InvalidParamsError) as invalid:
        await client.assemble({"scope_variables": 5})
    assert invalid.value.code == -32602 and invalid.value.errors[0]["path"] == "/scope_variables"
    with pytest.raises(RpcError) as unknown:
        await client.request("no/such", {})
    assert unknown.value.code == -32601
    assert (await client.memory.read("kv://still/serving"))["exists"] is False


def facts_pipeline(pipeline_id: str, destination: str) -> dict[str, Any]:
    """A manual pipeline whose model step extracts facts from `payload.text` into `destination`."""
    return {"id": pipeline_id, "trigger": "manual", "processors": [
        {"id": "x", "type": "llm_extract", "input": "payload.text", "output": "facts"}],
        "routing": [{"from": "facts", "write_to": destination}]}


async def test_llm_callback_answers_llm_complete(workspace: Path) -> None:
    asked: list[dict[str, Any]] = []

    async def model(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"text": '[{"decision": "use JWT"}]'}

    pipeline = facts_pipeline("facts", "kv://facts/latest")
    async with ContextAssemblyClient(workspace, llm=model) as client:
        await client.ingestion.create(pipeline)
        result = await client.ingestion.execute("facts", {"text": "We decided to use JWT."})
        assert result["status"] == "ok", result
        assert asked and "We decided to use JWT." in asked[0]["prompt"]
        assert (await client.memory.read("kv://facts/latest"))["value"] == [{"decision": "use JWT"}]
    async with ContextAssemblyClient(workspace) as plain:  # no callback: the LLM step is skipped
        result = await plain.ingestion.execute("facts", {"text": "x"})
        assert result["processors"][0]["status"] == "skipped" and result["warnings"]
        await plain.ingestion.delete("facts")
    assert plain.pid is not None and gone(plain.pid)


async def test_an_llm_callback_may_answer_with_the_text_itself(workspace: Path) -> None:
    """A sync callback returning a plain string (as the TypeScript client allows) failed the step
    with "answer is not an object"."""
    def model(request: dict[str, Any]) -> str:
        return '[{"decision": "use JWT"}]'

    pipeline = facts_pipeline("facts-text", "kv://facts/plain")
    async with ContextAssemblyClient(workspace, llm=model) as client:
        await client.ingestion.create(pipeline)
        result = await client.ingestion.execute("facts-text", {"text": "We decided to use JWT."})
        assert result["status"] == "ok", result
        assert (await client.memory.read("kv://facts/plain"))["value"] == [{"decision": "use JWT"}]
        await client.ingestion.delete("facts-text")


async def test_a_tight_budget_asks_the_clients_model_for_summaries(workspace: Path) -> None:
    asked: list[dict[str, Any]] = []

    async def model(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"text": "Short summary of the long note."}

    long = " ".join(f"Sentence {i} of a very long design note about sessions." for i in range(200))
    async with ContextAssemblyClient(workspace, llm=model) as client:
        await client.memory.write("markdown://long-design-note", long)
        request = {**REQUEST, "explicit_memory": ["markdown://long-design-note"], "constraints": {"max_tokens": 900}}
        result = await client.assemble(request)
        [note] = [i for i in result["context"]["knowledge"] if i["source"] == "markdown://long-design-note"]
        assert note["content"] == "Short summary of the long note." and note["metadata"]["summary"] == "llm"
        assert any(s["strategy"] == "summarize" and s["method"] == "llm" for s in result["trace"]["ladder"])
        assert asked and "Sentence 0 of a very long design note" in asked[0]["prompt"]
        again = await client.assemble(request)  # cached by content hash: the model is not asked twice
        assert len(asked) == 1 and again["meta"]["token_estimate"] <= 900
        await client.memory.delete("markdown://long-design-note")


async def test_the_connection_lets_go_of_an_answer_once_its_caller_ran_on(client: ContextAssemblyClient) -> None:
    import sys

    answer = await client.evaluate_rules({**REQUEST, "explain": "none"})
    await asyncio.sleep(0)  # one turn of the loop: the reader's hold on the message ends
    assert sys.getrefcount(answer) == 2  # this test's name and getrefcount's argument: nothing else
    again = await client.evaluate_rules({**REQUEST, "explain": "none"})
    assert again == answer


async def test_an_async_on_event_runs_too(client: ContextAssemblyClient) -> None:
    """An `on_event` that is a coroutine function was called and its coroutine dropped (never awaited)."""
    seen: list[str] = []

    async def listener(method: str, params: Any) -> None:
        await asyncio.sleep(0)
        seen.append(method)

    await client.assemble(REQUEST, on_event=listener)
    for _ in range(100):
        if "contextAssembly/complete" in seen:
            break
        await asyncio.sleep(0.01)
    assert seen[0] == "contextAssembly/started" and "contextAssembly/complete" in seen


async def test_a_cancelled_call_leaves_no_warning_and_the_client_goes_on(
        client: ContextAssemblyClient, caplog: pytest.LogCaptureFixture) -> None:
    for _ in range(3):
        task = asyncio.ensure_future(client.assemble(REQUEST))
        await asyncio.sleep(0.002)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await client.memory_types() is not None
    await asyncio.sleep(0.3)  # the sidecar's late answers (or cancellations) arrive meanwhile
    assert not [r for r in caplog.records if "unknown message id" in r.getMessage()]


async def test_start_up_gives_up_after_the_timeout(workspace: Path) -> None:
    """A sidecar that never answers `initialize`: a TimeoutError_ after `timeout`, the process
    stopped at once (it is not asked to shut down), instead of waiting for it for good."""
    import sys
    import time

    from context_assembly.client import TimeoutError_

    hung = [sys.executable, "-c", "import time; time.sleep(60)"]
    started = time.monotonic()
    with pytest.raises(TimeoutError_, match="did not answer initialize within 1 s"):
        async with ContextAssemblyClient(workspace, command=hung, timeout=1):
            pass
    assert time.monotonic() - started < 10


async def test_assembly_id_null_still_routes_the_calls_events(client: ContextAssemblyClient) -> None:
    """`assembly_id: None` (a field left empty) was kept: the server chose its own id, and the call's
    `on_event` heard nothing."""
    mine: list[str] = []
    await client.assemble(dict(REQUEST, assembly_id=None), on_event=lambda method, params: mine.append(method))
    assert mine[0] == "contextAssembly/started" and mine[-1] == "contextAssembly/complete"
