"""The workspace loader: every kind of file, broken ones tolerated, compiled once per version."""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

import pytest

from context_assembly.model import AssemblyRequest, structure
from context_assembly.workspace import loader as loader_module
from context_assembly.workspace.loader import WorkspaceLoader, load_workspace

from ..conftest import EXAMPLE
from .builder import memory, write
from .test_compile_cache import touch


def test_example_workspace_loads_every_kind() -> None:
    workspace = load_workspace(EXAMPLE)
    assert workspace.problems == []
    assert sorted(workspace.engines) == ["context-rules", "planning", "review"]
    assert sorted(workspace.memories) == ["architecture-docs", "project-conventions", "recent-history",
                                          "related-tasks", "session-dependents", "user-preferences"]
    assert workspace.memories["project-conventions"].label == "Project conventions"  # shorthand read
    assert workspace.memories["project-conventions"].steps[0]["type"] == "markdown_read"
    assert list(workspace.ingestion) == ["task-completion-embed"]
    assert list(workspace.graph_views) == ["dependents"]
    assert workspace.settings.max_tokens == 4000
    assert [e.id for e in workspace.rule_set.engines] == ["planning", "review", "context-rules"]


def test_context_rule_files_in_file_name_order(tmp_path: Path) -> None:
    write(tmp_path, "ContextRuleEngine/02_b.yaml", "when: {task_contains: [deploy]}\n"
          "then: {always_include: [{path: docs/deploy.md}]}\n")
    write(tmp_path, "ContextRuleEngine/01_a.json",
          {"name": "first", "condition": {"field": "task.text", "op": "exists"}, "action": {"include": "kv://a"}})
    workspace = load_workspace(tmp_path)
    rules = workspace.engines["context-rules"].rules
    assert [r.id for r in rules] == ["first", "02_b"]
    request = structure({"scope_variables": {}, "input": {"text": "Deploy it"}}, AssemblyRequest)
    assert workspace.rule_set.evaluate(request).matched_memories == ["kv://a", "file://docs/deploy.md"]


def test_a_broken_file_never_stops_the_others(tmp_path: Path) -> None:
    write(tmp_path, "context-rule-engines/good.json", {"id": "good", "rules": [
        {"id": "r", "when": [], "then": {"add_memories": ["m"]}}]})
    write(tmp_path, "context-rule-engines/bad.json", '{"id": "bad", "rules": [}')
    write(tmp_path, "PersistentMemory/m.json", memory("m"))
    write(tmp_path, "PersistentMemory/broken.yaml", "id: [unclosed\n")
    (tmp_path / ".codebolt/context-rule-engines/binary.json").write_bytes(b'{"id": "bin\xff", "rules": []}')
    workspace = load_workspace(tmp_path)
    assert "good" in workspace.engines and "m" in workspace.memories
    files = {p.file for p in workspace.problems}
    assert ".codebolt/context-rule-engines/bad.json" in files
    assert ".codebolt/PersistentMemory/broken.yaml" in files
    assert any(p.code == "encoding" for p in workspace.problems)
    for problem in workspace.problems:
        assert problem.line and problem.column


def test_files_are_compiled_once_per_version(tmp_path: Path) -> None:
    path = write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": []})
    write(tmp_path, "context-rule-engines/f.json", {"id": "f", "rules": []})
    loader = WorkspaceLoader(tmp_path)
    first = loader.load()
    again = loader.load()
    assert again.engine_sources["e"] is first.engine_sources["e"]
    write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": [{"id": "new", "when": [], "then": {}}]})
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    changed = loader.load()
    assert changed.engine_sources["e"] is not first.engine_sources["e"]
    assert changed.engine_sources["f"] is first.engine_sources["f"]
    assert [r.id for r in changed.engines["e"].rules] == ["new"]
    path.unlink()
    assert "e" not in loader.load().engines


def test_engine_without_id_takes_the_file_name(tmp_path: Path) -> None:
    write(tmp_path, "context-rule-engines/nameless.json", {"rules": []})
    assert "nameless" in load_workspace(tmp_path).engines


def test_empty_workspace(tmp_path: Path) -> None:
    workspace = load_workspace(tmp_path)
    assert workspace.engines == {} and workspace.problems == []


def test_a_rule_file_edit_recompiles_only_its_engine(tmp_path: Path) -> None:
    rule = {"id": "r", "when": [{"field": "addVar.a", "operator": "eq", "value": 1}], "then": {"add_memories": ["m"]}}
    path = write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": [rule]})
    write(tmp_path, "context-rule-engines/f.json", {"id": "f", "rules": [rule]})
    loader = WorkspaceLoader(tmp_path)
    request = structure({"scope_variables": {}, "additional_variables": {"a": 1}}, AssemblyRequest)
    first = loader.load()
    first.rule_set.evaluate_wire(request)  # builds each engine's trace program
    before = {e.id: e for e in first.rule_set.engines}
    write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": [{**rule, "id": "r2"}]})
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    changed = loader.load()
    after = {e.id: e for e in changed.rule_set.engines}
    assert after["f"] is before["f"] and after["f"].trace is before["f"].trace is not None  # kept as built
    assert after["e"] is not before["e"] and after["e"].trace is None  # recompiled; its trace on first use
    rules = changed.rule_set.evaluate_wire(request)["engine_results"]
    assert [(e["engine_id"], [r["rule_id"] for r in e["rules"] if r["matched"]]) for e in rules] == \
        [("e", ["r2"]), ("f", ["r"])]


def test_unchanged_definitions_are_the_same_objects_after_a_reload(example_copy: Path) -> None:
    """Structured once per file version: callers key their own caches on the definition object
    (the ingestion engine's validation, assembly's cache keys)."""

    loader = WorkspaceLoader(example_copy)
    first = loader.load()
    (example_copy / ".codebolt" / "context-rule-engines" / "extra.json").write_text('{"id": "extra", "rules": []}')
    second = loader.load()
    assert second is not first and "extra" in second.engines
    assert all(second.memories[k] is v for k, v in first.memories.items())
    assert all(second.ingestion[k] is v for k, v in first.ingestion.items())


def test_reloads_collect_once_the_replaced_versions_add_up_to_a_quarter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    collects: list[bool] = []
    pin = loader_module.pin_compiled
    monkeypatch.setattr(loader_module, "pin_compiled", lambda collect=True: (collects.append(collect), pin(collect)))
    rule = {"id": "r", "when": [{"field": "addVar.a", "operator": "exists"}], "then": {"add_memories": ["m"]}}
    for n in range(8):
        write(tmp_path, f"context-rule-engines/e{n}.json", {"id": f"e{n}", "rules": [rule]})
    loader = WorkspaceLoader(tmp_path, cache=False)

    def edit(n: int) -> Any:
        before = loader.load()
        old = weakref.ref(next(e for e in before.rule_set.engines if e.id == f"e{n}").rules[0])
        touch(write(tmp_path, f"context-rule-engines/e{n}.json", {"id": f"e{n}", "rules": [{**rule, "name": "x"}]}))
        assert loader.load() is not before
        return old

    gone = edit(0)  # an eighth of the files replaced: no full collection yet
    assert gone() is not None  # (garbage in a cycle, frozen: only a full collection frees it)
    edit(1)  # a quarter: one now
    assert collects == [False, False, True]
    assert gone() is None  # the first edit's version is freed by it
    edit(2)
    (tmp_path / ".codebolt" / "context-rule-engines" / "e7.json").unlink()
    loader.load()
    assert collects == [False, False, True, False, True]  # a removed file counts as replaced
