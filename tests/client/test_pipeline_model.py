"""derive_query `llm_rephrase` asks the connected client's model (SPEC §5.2, §7): a real sidecar
over stdio, the client's own `llm` callback answering its `llm/complete` requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from context_assembly.client import SyncContextAssemblyClient
from tests.lsp.support import REQUEST

REPHRASED = {"id": "rephrased", "label": "Rephrased query", "status": "active",
             "retrieval": {"pipeline": [
                 {"type": "derive_query", "from": ["input.text"], "method": "llm_rephrase"},
                 {"type": "kv_get", "namespace": "users", "keys": ["u-ada"]}]},
             "contribution": {"section": "knowledge", "priority": "high"}}
KEYWORDS = "fix login timeout refactor auth session handling"  # keyword_extract of the request's task


def test_llm_rephrase_asks_the_clients_model(workspace: Path) -> None:
    asked: list[dict[str, Any]] = []

    def model(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"text": "  session timeout\n  in auth login \n"}

    with SyncContextAssemblyClient(workspace, llm=model) as client:
        client.persistent_memory.create(REPHRASED)
        result = client.persistent_memory.execute("rephrased", REQUEST)
    assert result["status"] == "ok" and result["query"] == "session timeout in auth login"
    assert "warnings" not in result and [s["count"] for s in result["steps"]] == [0, 1]
    assert len(asked) == 1 and REQUEST["input"]["text"] in asked[0]["prompt"] and asked[0]["system"]


def test_llm_rephrase_without_a_model_or_with_a_failing_one_falls_back_and_says_why(workspace: Path) -> None:
    def broken(request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the model is overloaded")

    with SyncContextAssemblyClient(workspace, llm=broken) as client:
        client.persistent_memory.create(REPHRASED | {"id": "rephrased-2"})
        failed = client.persistent_memory.execute("rephrased-2", REQUEST)
    with SyncContextAssemblyClient(workspace) as plain:  # offers no llm/complete
        unoffered = plain.persistent_memory.execute("rephrased-2", REQUEST)
        plain.persistent_memory.delete("rephrased-2")
    for result, why in ((failed, "the model failed"), (unoffered, "the client offers no model")):
        assert result["status"] == "ok" and result["query"] == KEYWORDS
        [warning] = result["warnings"]
        assert why in warning and "used keyword_extract instead" in warning, warning
    assert "overloaded" in failed["warnings"][0]


def test_an_assembly_asks_the_model_and_keeps_no_stand_in(workspace: Path) -> None:
    """The assembly's pipelines ask the client's model too; a run that fell back because the model
    failed is not cached (the next turn asks again), and a client without a model is not served
    what a client with one was."""
    answers: list[dict[str, Any] | Exception] = [RuntimeError("overloaded"), {"text": "auth session timeout"}]

    def model(request: dict[str, Any]) -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def rephrased_call(result: dict[str, Any]) -> dict[str, Any]:
        return next(c for c in result["trace"]["memory_calls"] if c["reference"] == "rephrased-3")

    request = {**REQUEST, "explicit_memory": ["rephrased-3"]}
    with SyncContextAssemblyClient(workspace, llm=model) as client:
        client.persistent_memory.create(REPHRASED | {"id": "rephrased-3"})
        failed = client.assemble(request)
        assert rephrased_call(failed)["status"] == "ok" and answers == [{"text": "auth session timeout"}]
        warnings = " ".join(w["content"] for w in failed["context"]["warnings"])
        assert "the model failed: llm/complete failed: RuntimeError: overloaded" in warnings
        asked_again = client.assemble(request)
        assert rephrased_call(asked_again)["status"] == "ok" and answers == []  # not served from the cache
        assert rephrased_call(client.assemble(request))["status"] == "cached"  # a real answer is kept
    with SyncContextAssemblyClient(workspace) as plain:
        assert rephrased_call(plain.assemble(request))["status"] == "ok"  # without a model: its own run


def test_a_replay_summarises_with_the_clients_model_as_the_assembly_did(workspace: Path) -> None:
    """Replay assembled without the model: every summary it had made became extractive, so a
    replay a moment later always drifted."""
    def model(request: dict[str, Any]) -> dict[str, Any]:
        return {"text": "Model summary: the auth details."}

    settings = {"snapshots": True, "budget": {"summarize_above_tokens": 40, "summary_tokens": 30}}
    with SyncContextAssemblyClient(workspace, llm=model, settings=settings) as client:
        assembled = client.assemble({**REQUEST, "constraints": {"max_tokens": 500}})
        assert any(step.get("method") == "llm" for step in assembled["trace"]["ladder"])
        replayed = client.request("contextAssembly/replay", {"snapshot": assembled["meta"]["assembly_id"]})
    assert replayed["drifted"] is False, replayed["drift"]
