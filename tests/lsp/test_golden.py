"""Golden snapshots of whole JSON-RPC responses on the seeded example workspace (see golden.py):
evaluateRules (also with the compact trace, and the layout it refers to), assemble, validate,
possibleVariables, completion, hover and diagnostics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from context_assembly.runtime import Runtime

from .golden import normalise
from .support import REQUEST, RawServer, frame, seeded_copy

CAPABILITIES = {"textDocument": {"diagnostic": {"relatedDocumentSupport": False},
                                 "completion": {"completionItem": {"snippetSupport": True}},
                                 "hover": {"contentFormat": ["markdown", "plaintext"]}},
                "general": {"positionEncodings": ["utf-16"]}}
REVIEW = ".codebolt/context-rule-engines/review.json"


# A fixed clock for the example's turns: an episodic item's id is made of its turn's time.
TURNS_FROM = 1_700_000_000.0


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = seeded_copy(tmp_path_factory.mktemp("golden") / "quickstart")
    seed = json.loads((root / "seed.json").read_text(encoding="utf-8"))
    runtime = Runtime(root)
    try:
        for thread_id, turns in seed["threads"].items():
            runtime.memory.delete(f"episodic://{thread_id}")
            for index, turn in enumerate(turns):
                runtime.memory.write(f"episodic://{thread_id}", {**turn, "ts": TURNS_FROM + index})
    finally:
        runtime.close()
    return root


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[RawServer]:
    server = RawServer(root)
    server.send(frame({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "processId": None, "rootUri": root.as_uri(), "capabilities": CAPABILITIES}}))
    server.answer("init")
    server.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    yield server
    server.close()


@pytest.fixture
def golden(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def ask(server: RawServer, root: Path, method: str, params: Any) -> Any:
    msg_id = f"golden-{method}"
    server.send(frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
    return normalise(server.answer(msg_id, timeout=60.0), root)


def opened(server: RawServer, path: Path) -> str:
    """Open a file in the editor (as a client does before asking about it); its URI."""
    uri = path.resolve().as_uri()
    language = "yaml" if path.suffix in (".yaml", ".yml") else "json"
    server.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": language, "version": 1, "text": path.read_text(encoding="utf-8")}}}))
    return uri


def at(server: RawServer, root: Path, relpath: str, needle: str, delta: int = 0) -> dict[str, Any]:
    """An LSP position (UTF-16, ASCII files) `delta` characters into the first `needle`, in the
    opened file."""
    opened(server, root / relpath)
    text = (root / relpath).read_text(encoding="utf-8")
    offset = text.index(needle) + delta
    line = text.count("\n", 0, offset)
    return {"textDocument": {"uri": (root / relpath).resolve().as_uri()},
            "position": {"line": line, "character": offset - (text.rfind("\n", 0, offset) + 1)}}


def test_evaluate_rules(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "contextAssembly/evaluateRules", REQUEST) == golden


def test_evaluate_rules_with_the_compact_trace(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "contextAssembly/evaluateRules", {**REQUEST, "trace_format": "compact"}) == golden


def test_evaluate_rules_none_compact(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    params = {**REQUEST, "explain": "none", "trace_format": "compact"}
    assert ask(server, root, "contextAssembly/evaluateRules", params) == golden


def test_trace_layout(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "contextRuleEngine/traceLayout", {"id": "review"}) == golden


def test_assemble(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "contextAssembly/assemble", {**REQUEST, "assembly_id": "golden"}) == golden


def test_validate(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    bad = {**REQUEST, "explicit_memory": ["no-such-memory", "kv://"], "rule_engine_ids": ["nope"]}
    assert ask(server, root, "contextAssembly/validate", bad) == golden


def test_validate_a_rule_engine(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    rule = {"id": "r", "when": [{"field": "addVar.phase", "operator": "equal", "value": "x"}],
            "then": {"add_memories": ["architecture-doc"]}}
    text = json.dumps({"id": "draft", "rules": [rule]})
    assert ask(server, root, "contextRuleEngine/validate", {"text": text}) == golden


def test_possible_variables(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "contextRuleEngine/possibleVariables", {}) == golden


def test_an_invalid_params_error(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "contextAssembly/evaluateRules", {"input": {"text": "x"}}) == golden


def test_completion_of_an_operator(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "textDocument/completion", at(server, root, REVIEW, '"operator": "', 13)) == golden


def test_hover_on_a_variable(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    assert ask(server, root, "textDocument/hover", at(server, root, REVIEW, '"field": "', 11)) == golden


def test_diagnostics_of_a_file(server: RawServer, root: Path, golden: SnapshotAssertion) -> None:
    path = root / ".codebolt/context-rule-engines/broken.json"
    path.write_text(json.dumps({"id": "broken", "rules": [
        {"id": "r", "when": [{"field": "scope.agnt.agent_name", "operator": "eqq", "value": 1}],
         "then": {"add_memories": ["architecture-doc"]}}]}, indent=2) + "\n")
    params = {"textDocument": {"uri": opened(server, path)}}
    assert ask(server, root, "textDocument/diagnostic", params) == golden
