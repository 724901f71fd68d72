"""Whole numbers written as `2.0`: JSON Schema's `integer` admits them, so everything the schemas
type as integer takes them as the integer (a rule cap, a contribution cap, settings, a request's
budget), and a fraction (`2.5`) is an error with its JSON path, never a crash or a silent drop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client import ContextAssemblyError, SyncContextAssemblyClient
from context_assembly.methods.session import Session
from context_assembly.model import unstructure
from context_assembly.runtime import Runtime
from context_assembly.workspace.lint import lint_workspace
from context_assembly.workspace.loader import load_workspace

from ..workspace.builder import write

NOTES = {"type": "markdown_read", "notes": ["a", "b", "c"]}


def _notes(root: Path) -> None:
    for name in "abc":
        write(root, f"memory/{name}.md", f"# {name}\nnote {name} body text\n")


def _knowledge(root: Path, **request: Any) -> list[str]:
    runtime = Runtime(root)
    try:
        result = unstructure(runtime.assemble({"scope_variables": {}, **request}))
    finally:
        runtime.close()
    return [item["source"] for item in result["context"]["knowledge"]]


def test_a_rule_cap_written_1_0_applies(tmp_path: Path) -> None:
    _notes(tmp_path)
    write(tmp_path, "PersistentMemory/notes.json", {"id": "notes", "retrieval": {"pipeline": [NOTES]},
                                                    "contribution": {"section": "knowledge"}})
    write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": [{"id": "r", "when": [], "then": {
        "add_memories": ["notes"], "caps": [{"target": "notes", "max_items": 1.0}]}}]})
    assert _knowledge(tmp_path) == ["markdown://a"]  # the rule was unreadable and never fired
    assert lint_workspace(load_workspace(tmp_path)) == []


def test_a_contribution_cap_written_2_0_applies(tmp_path: Path) -> None:
    _notes(tmp_path)
    write(tmp_path, "PersistentMemory/notes.json", {"id": "notes", "retrieval": {"pipeline": [NOTES]},
                                                    "contribution": {"section": "knowledge", "max_items": 2.0}})
    assert _knowledge(tmp_path, explicit_memory=["notes"]) == ["markdown://a", "markdown://b"]


def test_a_fraction_is_an_error_at_its_path(tmp_path: Path) -> None:
    _notes(tmp_path)
    write(tmp_path, "PersistentMemory/notes.json", {"id": "notes", "retrieval": {"pipeline": [NOTES]},
                                                    "contribution": {"max_items": 2.5}})
    write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": [{"id": "r", "then": {
        "add_memories": ["notes"], "caps": [{"target": "notes", "max_items": 1.5}]}}]})
    found = {(p.file, p.path) for p in lint_workspace(load_workspace(tmp_path)) if p.is_error}
    assert (".codebolt/PersistentMemory/notes.json", "/contribution/max_items") in found
    assert (".codebolt/context-rule-engines/e.json", "/rules/0/then/caps/0/max_items") in found


# -- settings -----------------------------------------------------------------------------------------


def test_settings_written_as_whole_floats_are_integers(tmp_path: Path) -> None:
    write(tmp_path, "context-assembly.json", {"budget": {"keep_recent_turns": 1.0, "summary_tokens": 60.0},
                                              "tools": {"top_k": 2.0}, "limits": {"log_limit": 100.0}})
    workspace = load_workspace(tmp_path)
    settings = workspace.settings
    values = [settings.budget.keep_recent_turns, settings.budget.summary_tokens, settings.tools.top_k,
              settings.limits.log_limit]
    assert values == [1, 60, 2, 100] and all(type(v) is int for v in values)  # the limit was dropped
    assert lint_workspace(workspace) == []


def test_client_settings_written_as_whole_floats_apply_everywhere(tmp_path: Path) -> None:
    session = Session(tmp_path)
    try:
        assert session.set_settings({"limits": {"request_bytes": 2048.0}, "budget": {"summary_tokens": 60.0}}) == []
        assert session.current_limits().request_bytes == 2048  # what the transport reads per message
        assert session.limits().request_bytes == 2048 and session.settings().budget.summary_tokens == 60
    finally:
        session.runtime.close()


def test_an_over_budget_assembly_with_keep_recent_turns_1_0_compresses_turns(tmp_path: Path) -> None:
    write(tmp_path, "context-assembly.json", {"budget": {"keep_recent_turns": 1.0}})
    runtime = Runtime(tmp_path)
    try:
        for i in range(6):
            runtime.memory.write("episodic://t-1", {"role": "user", "content": f"Turn {i} is about the layout. " * 3})
        request = {"scope_variables": {"thread": {"thread_id": "t-1"}}, "thread_id": "t-1",
                   "explicit_memory": ["episodic://t-1"], "constraints": {"max_tokens": 120}}
        result = unstructure(runtime.assemble(request))  # TypeError: slice indices must be integers
    finally:
        runtime.close()
    assert any(step["strategy"] == "compress_turns" for step in result["trace"]["ladder"])
    assert result["meta"]["token_estimate"] <= 120


# -- over JSON-RPC ------------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[SyncContextAssemblyClient]:
    write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": [{"id": "r", "then": {
        "add_memories": ["kv://x"]}}]})
    with SyncContextAssemblyClient(tmp_path) as connected:
        yield connected


def _error_paths(call: Any) -> list[str]:
    with pytest.raises(ContextAssemblyError) as caught:
        call()
    assert caught.value.code == -32602
    return [e["path"] for e in (caught.value.data or {}).get("errors", [])]


def test_a_request_budget_of_4000_0_over_json_rpc(client: SyncContextAssemblyClient) -> None:
    request = {"scope_variables": {}, "constraints": {"max_tokens": 4000.0}}
    assert client.assemble(request)["meta"]["max_tokens"] == 4000
    assert client.validate(request)["valid"] is True
    assert client.evaluate_rules(request)["matched_memories"] == ["kv://x"]
    fraction = {"scope_variables": {}, "constraints": {"max_tokens": 4000.5}}
    assert _error_paths(lambda: client.assemble(fraction)) == ["/constraints/max_tokens"]
    assert _error_paths(lambda: client.evaluate_rules(fraction)) == ["/constraints/max_tokens"]
    assert [e["path"] for e in client.validate(fraction)["errors"]] == ["/constraints/max_tokens"]


def test_limits_written_as_whole_floats_merge_as_integers() -> None:
    """What the transport reads before any settings file (`initializationOptions`): 2048.0 was ignored."""
    from context_assembly.limits import DEFAULT

    merged = DEFAULT.merged({"request_bytes": 2048.0, "log_limit": 7.5, "graph_limit": True})
    assert (merged.request_bytes, merged.log_limit, merged.graph_limit) == \
        (2048, DEFAULT.log_limit, DEFAULT.graph_limit)
    assert isinstance(merged.request_bytes, int)
