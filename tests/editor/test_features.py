"""The editor's pure functions called directly (no server): completion, hover, code actions,
navigation and diagnostics over documents and the example workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from context_assembly.editor import navigation as nav
from context_assembly.editor.actions import code_actions
from context_assembly.editor.completion import complete, schema_keys
from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import EditorDocument, build_document, overlay
from context_assembly.editor.hover import hover
from context_assembly.registry.operators import OPERATORS
from context_assembly.registry.steps import step_names
from context_assembly.workspace.loader import Workspace, load_workspace


@pytest.fixture
def root(example_copy: Path) -> Path:
    return example_copy.resolve()


@pytest.fixture
def workspace(root: Path) -> Workspace:
    return load_workspace(root)


def document(root: Path, folder: str, name: str, text: str) -> EditorDocument:
    built = build_document((root / ".codebolt" / folder / name).as_uri(), text, 1, root)
    assert built is not None
    return built


def labels(items: list[dict[str, Any]]) -> set[str]:
    return {i["label"] for i in items}


ENGINE = json.dumps({"id": "draft", "rules": [{"id": "r", "when": [
    {"field": "addVar.phase", "operator": "eqq", "value": "x"}], "then": {"add_memories": ["architecture-doc"]}}]})


# -- completion


def test_operators_are_offered_from_the_registry(root: Path, workspace: Workspace) -> None:
    doc = document(root, "context-rule-engines", "draft.json", ENGINE)
    items = complete(doc, ENGINE.index('"eqq"') + 2, workspace)
    assert {op.name for op in OPERATORS} <= labels(items)


def test_memory_ids_are_offered_where_a_memory_is_named(root: Path, workspace: Workspace) -> None:
    doc = document(root, "context-rule-engines", "draft.json", ENGINE)
    items = complete(doc, ENGINE.index('"architecture-doc"') + 2, workspace)
    assert set(workspace.memories) <= labels(items)
    docs = next(i for i in items if i["label"] == "architecture-docs")
    assert docs["detail"] == workspace.memories["architecture-docs"].label


def test_step_types_are_offered_in_a_pipeline(root: Path, workspace: Workspace) -> None:
    text = '{"id": "m", "retrieval": {"pipeline": [{"type": "ra"}]}}'
    doc = document(root, "PersistentMemory", "m.json", text)
    assert set(step_names()) <= labels(complete(doc, text.index('"ra"') + 2, workspace))


def test_keys_come_from_the_schema_and_skip_those_present(root: Path, workspace: Workspace) -> None:
    text = '{"id": "m", "": 1}'
    doc = document(root, "PersistentMemory", "m.json", text)
    offered = labels(complete(doc, text.index('""') + 1, workspace))
    expected = {key for key, _ in schema_keys("persistent-memory")} - {"id", "name", "enabled", "pipeline"}
    assert offered == expected  # the shorthand's keys are not suggested


def test_keys_of_an_ingestion_pipeline_carry_their_descriptions(root: Path, workspace: Workspace) -> None:
    text = '{"": 1}'
    doc = document(root, "MemoryIngestion", "p.json", text)
    items = complete(doc, 2, workspace)
    trigger = next(i for i in items if i["label"] == "trigger")
    assert trigger["detail"] == "The trigger, or several triggers."


def test_completion_on_broken_text_does_not_raise(root: Path, workspace: Workspace) -> None:
    text = '{"id": "c1", "rules": [{"id": "r", "when": [{"field": "scope.ag'
    doc = document(root, "context-rule-engines", "c1.json", text)
    assert any(label.startswith("scope.agent") for label in labels(complete(doc, len(text), workspace)))


# -- hover


def test_hover_on_an_operator_and_a_memory(root: Path, workspace: Workspace) -> None:
    text = ENGINE.replace('"eqq"', '"eq"').replace("architecture-doc", "architecture-docs")
    doc = document(root, "context-rule-engines", "draft.json", text)
    found = hover(doc, text.index('"eq"') + 1, workspace)
    assert found is not None and "**eq**" in found["contents"]["value"]
    memory = hover(doc, text.index("architecture-docs") + 1, workspace)
    assert memory is not None and "Pipeline:" in memory["contents"]["value"]


def test_no_hover_on_a_plain_value(root: Path, workspace: Workspace) -> None:
    doc = document(root, "context-rule-engines", "draft.json", ENGINE)
    assert hover(doc, ENGINE.index('"draft"') + 1, workspace) is None


# -- diagnostics and code actions


def test_diagnostics_name_the_problem_with_candidates(root: Path, workspace: Workspace) -> None:
    doc = document(root, "context-rule-engines", "draft.json", ENGINE)
    found = {d["code"]: d for d in document_diagnostics(doc, overlay(workspace, [doc]))}
    assert {"unknown-operator", "unknown-memory"} <= set(found)
    assert "eq" in found["unknown-operator"]["data"]["candidates"]


def test_a_quick_fix_replaces_the_bad_operator(root: Path, workspace: Workspace) -> None:
    doc = document(root, "context-rule-engines", "draft.json", ENGINE)
    found = [d for d in document_diagnostics(doc, overlay(workspace, [doc])) if d["code"] == "unknown-operator"]
    actions = code_actions(doc, found, root, "utf-16", None)
    fix = next(a for a in actions if a["title"] == "Change to 'eq'")
    edit = fix["edit"]["changes"][doc.uri][0]
    assert edit["newText"] == '"eq"' and fix.get("isPreferred") is True


def test_shorthand_memory_is_rewritten_canonically(root: Path) -> None:
    text = json.dumps({"name": "notes", "pipeline": [{"step": "markdown_read", "note": "style-guide"}]})
    doc = document(root, "PersistentMemory", "notes.json", text)
    rewrite = next(a for a in code_actions(doc, [], root, "utf-16", None) if "canonical" in a["title"])
    written = json.loads(rewrite["edit"]["changes"][doc.uri][0]["newText"])
    assert written["label"] == "notes" and written["retrieval"]["pipeline"][0]["type"] == "markdown_read"


# -- navigation


def test_definition_references_and_rename_of_a_memory(root: Path, workspace: Workspace) -> None:
    path = root / ".codebolt" / "context-rule-engines" / "planning.json"
    text = path.read_text()
    doc = document(root, "context-rule-engines", "planning.json", text)
    at = text.index('"architecture-docs"') + 2
    assert nav.memory_id_at(doc, at, workspace) == "architecture-docs"
    where = nav.definition("architecture-docs", workspace, {}, "utf-16")
    assert where is not None and where["uri"].endswith("PersistentMemory/architecture-docs.json")
    places = nav.references("architecture-docs", workspace, {}, "utf-16", True)
    assert any(p["uri"] == doc.uri for p in places) and any(p["uri"] == where["uri"] for p in places)
    edit = nav.rename("architecture-docs", "arch", workspace, {}, "utf-16")
    assert doc.uri in str(edit) and "arch" in str(edit)


def test_symbols_and_folding_of_a_pipeline(root: Path) -> None:
    text = json.dumps({"id": "m", "retrieval": {"pipeline": [{"type": "markdown_read", "note": "a"},
                                                             {"type": "rank", "alias": "top"}]}}, indent=2)
    doc = document(root, "PersistentMemory", "m.json", text)
    symbols = nav.document_symbols(doc)
    assert symbols[0]["name"] == "m"
    assert [(c["name"], c.get("detail")) for c in symbols[0]["children"]] == [("markdown_read", None),
                                                                             ("rank", "top")]
    assert nav.folding_ranges(doc)
