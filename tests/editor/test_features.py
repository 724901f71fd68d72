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


def test_another_projects_rules_file_is_rewritten_into_its_own_project(root: Path, tmp_path: Path) -> None:
    """A context-rules file of another project open in the same window: the canonical engine goes to
    that project's `context-rule-engines/`, not into this workspace (the old file was deleted there)."""
    source = root / ".codebolt" / "ContextRuleEngine" / "01_base-rules.json"
    other = tmp_path / "other" / ".codebolt" / "ContextRuleEngine" / "10-style.json"
    other.parent.mkdir(parents=True)
    other.write_text(source.read_text())
    doc = build_document(other.as_uri(), other.read_text(), 1, root)
    assert doc is not None and doc.outside
    rewrite = next(a for a in code_actions(doc, [], root, "utf-16", None) if "canonical" in a["title"])
    created, _edit, deleted = rewrite["edit"]["documentChanges"]
    assert created["uri"] == (tmp_path / "other" / ".codebolt" / "context-rule-engines" / "style.json").as_uri()
    assert deleted["uri"] == other.as_uri()


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
    edit = nav.rename("architecture-docs", "arch", workspace, {}, "utf-16", file_renames=True)
    *texts, moved = edit["documentChanges"]
    # the file is named by the id, so it is renamed too, after its own edits (they name the old file)
    memories = root / ".codebolt" / "PersistentMemory"
    assert moved == {"kind": "rename", "oldUri": (memories / "architecture-docs.json").as_uri(),
                     "newUri": (memories / "arch.json").as_uri()}
    edited = {t["textDocument"]["uri"]: [e["newText"] for e in t["edits"]] for t in texts}
    assert edited[(memories / "architecture-docs.json").as_uri()] == ["arch"] and doc.uri in edited
    assert all(t["textDocument"]["version"] is None for t in texts)  # none of them is open


def test_a_rename_that_would_break_the_workspace_is_refused(root: Path, workspace: Workspace) -> None:
    from context_assembly.errors import ConflictError, InvalidParamsError, RequestFailedError

    with pytest.raises(InvalidParamsError) as bad:  # it would have been written into the JSON raw
        nav.rename("architecture-docs", 'arch"x', workspace, {}, "utf-16", file_renames=True)
    assert bad.value.errors[0]["path"] == "/newName"
    with pytest.raises(ConflictError):
        nav.rename("architecture-docs", "related-tasks", workspace, {}, "utf-16", file_renames=True)
    # the file must be renamed with it (its name is the id): an editor that cannot is told so
    with pytest.raises(RequestFailedError) as refused:
        nav.rename("project-conventions", "conventions", workspace, {}, "utf-16")
    assert "PersistentMemory/project-conventions.yaml" in refused.value.message
    # the shorthand file has no `id`: the references change and the file is renamed
    edit = nav.rename("project-conventions", "conventions", workspace, {}, "utf-16", file_renames=True)
    assert edit["documentChanges"][-1]["newUri"].endswith("PersistentMemory/conventions.yaml")
    edited = [t["textDocument"]["uri"] for t in edit["documentChanges"][:-1]]
    assert not any(uri.endswith("PersistentMemory/project-conventions.yaml") for uri in edited)
    assert any(uri.endswith("tests/quickstart.yaml") for uri in edited)  # an item expectation names it
    # a definition whose file is named otherwise keeps its file: plain changes
    memories = root / ".codebolt" / "PersistentMemory"
    (memories / "other-name.json").write_text(json.dumps({**json.loads(
        (memories / "user-preferences.json").read_text()), "id": "prefs"}))
    edit = nav.rename("prefs", "preferences", load_workspace(root), {}, "utf-16")
    assert list(edit) == ["changes"]


def test_symbols_and_folding_of_a_pipeline(root: Path) -> None:
    text = json.dumps({"id": "m", "retrieval": {"pipeline": [{"type": "markdown_read", "note": "a"},
                                                             {"type": "rank", "alias": "top"}]}}, indent=2)
    doc = document(root, "PersistentMemory", "m.json", text)
    symbols = nav.document_symbols(doc)
    assert symbols[0]["name"] == "m"
    assert [(c["name"], c.get("detail")) for c in symbols[0]["children"]] == [("markdown_read", None),
                                                                             ("rank", "top")]
    assert nav.folding_ranges(doc)


def test_another_projects_file_is_checked_on_its_own(root: Path, workspace: Workspace, tmp_path: Path) -> None:
    """A second checkout's definition open in the same window: not merged into this workspace
    (its ids neither clash with ours nor satisfy our references), checked for syntax and schema."""
    other = tmp_path / "other" / ".codebolt" / "PersistentMemory"
    other.mkdir(parents=True)
    ours = (root / ".codebolt" / "PersistentMemory" / "architecture-docs.json").read_text()
    same_id = build_document((other / "architecture-docs.json").as_uri(), ours, 1, root)
    only_there = build_document((other / "only-other.json").as_uri(), json.dumps(
        {**json.loads(ours), "id": "only-other", "unknown_key": 1}), 1, root)
    assert same_id is not None and only_there is not None and same_id.outside and only_there.outside
    seen = overlay(workspace, [same_id, only_there])
    assert "only-other" not in seen.memories and seen.memory_sources["architecture-docs"].path.is_relative_to(root)
    assert document_diagnostics(same_id, seen) == []  # no duplicate id against ours
    [schema] = document_diagnostics(only_there, seen)
    assert schema["code"] == "schema" and "unknown_key" in schema["message"]
    planning = document(root, "context-rule-engines", "planning.json",
                        (root / ".codebolt/context-rule-engines/planning.json").read_text().replace(
                            '"related-tasks"', '"only-other"'))
    found = document_diagnostics(planning, overlay(seen, [planning]))
    assert [d["code"] for d in found] == ["unknown-memory"]


@pytest.mark.parametrize(("folder", "name", "text", "key"), [
    ("context-rule-engines", "e.json",
     '{\n  "id": "e",\n  "descripton": "x",\n  "rules": [\n    {\n      "id": "r1",\n      "priorty": 3,\n'
     '      "when": [],\n      "then": {}\n    }\n  ]\n}\n', '"priorty"'),
    ("context-rule-engines", "e.json", '{"id": "e", "descripton": "x", "rules": []}', '"descripton"'),
    ("", "context-assembly.json", '{\n  "max_tokenz": 10\n}\n', '"max_tokenz"'),
    ("PersistentMemory", "m.yaml", "id: m\nlabel: m\nretrieval:\n  pipeline:\n    - type: markdown_read\n"
                                   "      note: a\n      bogus: 1\n", "bogus"),
])
def test_an_unknown_property_is_marked_on_its_key(root: Path, workspace: Workspace, folder: str, name: str,
                                                  text: str, key: str) -> None:
    """Not the object holding it (a rule's six lines, or the file's `{`)."""
    doc = build_document((root / ".codebolt" / folder / name).as_uri(), text, 1, root)
    assert doc is not None
    found = [d for d in document_diagnostics(doc, overlay(workspace, [doc])) if "unknown propert" in d["message"]]
    assert found, document_diagnostics(doc, overlay(workspace, [doc]))
    for diagnostic in found:
        start, end = diagnostic["range"]["start"], diagnostic["range"]["end"]
        line = text.splitlines()[start["line"]]
        assert start["line"] == end["line"] and line[start["character"]:end["character"]] in (key, '"descripton"')


def test_a_case_that_cannot_run_leaves_the_other_cases_checked(root: Path, workspace: Workspace) -> None:
    """One `needs-assembly` case (an error of its own) hid every other case's failure in the editor."""
    request = json.loads((root / "request.json").read_text())
    cases = [{"name": "fails", "request": request, "expect": {"rules_fired": ["no-such-rule"]}},
             {"name": "cannot run", "request": request, "assemble": False, "expect": {"max_token_estimate": 1}}]
    doc = document(root, "tests", "t.json", json.dumps({"cases": cases}, indent=2))
    found = {(d["code"], d["data"]["pointer"]) for d in document_diagnostics(doc, overlay(workspace, [doc]))}
    assert ("needs-assembly", "/cases/1/assemble") in found
    assert ("test-failed", "/cases/0/expect/rules_fired/0") in found
