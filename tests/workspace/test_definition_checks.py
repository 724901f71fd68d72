"""What `check` and the editor report of definitions every use of which fails: ids the repository
cannot address, graph views every read refuses, steps that fail on every run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import build_document, overlay
from context_assembly.errors import InvalidParamsError
from context_assembly.limits import Limits
from context_assembly.methods.session import Session
from context_assembly.model import unstructure
from context_assembly.pipelines.validate import validate_definition
from context_assembly.runtime import Runtime
from context_assembly.schemas import build_schema, validation_errors
from context_assembly.schemas.fragments import FILE_ID_PATTERN
from context_assembly.workspace.lint import lint_workspace
from context_assembly.workspace.loader import load_workspace
from context_assembly.workspace.repository import is_safe_id

from .builder import memory, write


def _check(root: Path) -> list[tuple[str, str, str, str]]:
    """(file name, path, code, severity) of every problem `check` reports."""
    return [(Path(p.file or "").name, p.path, p.code, str(p.severity)) for p in lint_workspace(load_workspace(root))]


# -- ids: the schema, the repository and check agree -----------------------------------------------

ID_CHARS = st.text(alphabet="aZ09_.-", max_size=131)
DEVICES = st.sampled_from(["con", "NUL", "Aux", "prn", "com1", "LPT9", "com10", "console"])


@given(st.one_of(ID_CHARS, st.tuples(DEVICES, st.sampled_from(["", ".", ".json", "x"])).map("".join)))
def test_the_schema_id_pattern_is_the_repository_rule(candidate: str) -> None:
    assert bool(re.fullmatch(FILE_ID_PATTERN, candidate)) == is_safe_id(candidate)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    session = Session(tmp_path)
    yield session
    session.runtime.close()


DOCUMENTS = {
    "rule-engine": lambda i: {"id": i, "rules": []},
    "persistent-memory": lambda i: memory(i),
    "ingestion-pipeline": lambda i: {"id": i, "trigger": "manual", "routing": [{"write_to": "kv://a/b"}]},
}


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
@pytest.mark.parametrize("the_id", ["_drafts", "a" * 130, "notes.", "nul", "com1.x"])
def test_an_id_create_refuses_is_refused_by_the_schema(session: Session, kind: str, the_id: str) -> None:
    assert "/id" in {e["path"] for e in validation_errors(kind, DOCUMENTS[kind](the_id))}  # it was valid
    repository = {"rule-engine": session.rule_engines, "persistent-memory": session.persistent_memory,
                  "ingestion-pipeline": session.ingestion_pipelines}[kind]
    with pytest.raises(InvalidParamsError):
        repository.create(DOCUMENTS[kind](the_id))


@pytest.mark.parametrize(("folder", "kind"), [("context-rule-engines", "rule-engine"),
                                              ("PersistentMemory", "persistent-memory"),
                                              ("MemoryIngestion", "ingestion-pipeline")])
def test_check_reports_a_file_the_repository_cannot_address(tmp_path: Path, folder: str, kind: str) -> None:
    write(tmp_path, f"{folder}/_team.json", DOCUMENTS[kind]("_team"))
    write(tmp_path, f"{folder}/fine.json", DOCUMENTS[kind]("fine"))
    found = _check(tmp_path)  # check was silent: the engine loaded and fired, list and get missed it
    assert sorted(found) == [("_team.json", "", "invalid-id", "error"), ("_team.json", "/id", "schema", "error")]
    [problem] = [p for p in lint_workspace(load_workspace(tmp_path)) if p.code == "invalid-id"]
    assert "'_team' is not a valid id" in problem.message and "rename it" in problem.message


def test_the_editor_reports_it_too(tmp_path: Path) -> None:
    path = write(tmp_path, "context-rule-engines/_team.json", {"id": "_team", "rules": []})
    document = build_document(path.as_uri(), path.read_text(), 1, tmp_path)
    assert document is not None
    found = document_diagnostics(document, overlay(load_workspace(tmp_path), [document]))
    assert sorted(d["code"] for d in found) == ["invalid-id", "schema"]


# -- graph views ----------------------------------------------------------------------------------

VIEWS: dict[str, tuple[dict[str, Any], list[tuple[str, str]]]] = {
    "no-selector": ({"match": {"instance": "default"}}, [("/match", "invalid-view")]),
    "undeclared": ({"match": {"kind": "Module", "name": "$name"}}, [("", "invalid-view")]),
    "writes": ({"cypher": 'CREATE (n:Node {id: "x"}) RETURN n'}, [("/cypher", "invalid-view")]),
    "bad-default": ({"cypher": "MATCH (n) RETURN n LIMIT $k", "params": {"k": {"type": "integer", "default": "ten"}}},
                    [("/params/k/default", "invalid-view")]),
    "fine": ({"match": {"kind": "Module", "name": "$name"}, "params": {"name": {"type": "string"}}}, []),
}


@pytest.mark.parametrize("view_id", sorted(VIEWS))
def test_check_reports_a_view_every_read_refuses(tmp_path: Path, view_id: str) -> None:
    document, expected = VIEWS[view_id]
    write(tmp_path, f"knowledgegraph/views/{view_id}.json", {"id": view_id, **document})
    assert [(path, code) for _, path, code, _ in _check(tmp_path)] == expected  # check said nothing
    if expected:
        runtime = Runtime(tmp_path)
        try:
            with pytest.raises(InvalidParamsError):  # what every read answers
                runtime.memory.read(f"graph://{view_id}")
        finally:
            runtime.close()


def test_a_problem_of_the_whole_view_hides_no_schema_error(tmp_path: Path) -> None:
    write(tmp_path, "knowledgegraph/views/v.json", {"id": "v", "match": {"kind": "$kind"},
                                                    "params": {"name": {"type": "string", "descripton": "typo"}}})
    assert [(path, code) for _, path, code, _ in _check(tmp_path)] == [("", "invalid-view"), ("/params/name", "schema")]


def test_the_schema_knows_a_match_needs_a_selector_and_a_default_its_type() -> None:
    for view_id in ("no-selector", "bad-default"):
        document, [(path, _)] = VIEWS[view_id]
        assert path in {e["path"] for e in validation_errors("graph-view", {"id": view_id, **document})}


def test_the_editor_reports_a_view_every_read_refuses(tmp_path: Path) -> None:
    path = write(tmp_path, "knowledgegraph/views/writes.json", {"id": "writes", **VIEWS["writes"][0]})
    document = build_document(path.as_uri(), path.read_text(), 1, tmp_path)
    assert document is not None
    found = document_diagnostics(document, overlay(load_workspace(tmp_path), [document]))
    assert [(d["code"], d["data"]["pointer"]) for d in found] == [("invalid-view", "/cypher")]
    assert "found CREATE" in found[0]["message"]


# -- steps that fail on every run ------------------------------------------------------------------


def _memory(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "m", "retrieval": {"pipeline": [{"type": "markdown_read", "note": "a"}, *steps]}}


@pytest.mark.parametrize(("step", "path"), [({"type": "summarize"}, "/retrieval/pipeline/1"),
                                            ({"type": "score", "weights": {}}, "/retrieval/pipeline/1/weights")])
def test_check_reports_a_step_that_always_fails(tmp_path: Path, step: dict[str, Any], path: str) -> None:
    write(tmp_path, "PersistentMemory/m.json", _memory([step]))
    assert _check(tmp_path) == [("m.json", path, "schema", "error")]
    assert [e["path"] for e in validate_definition(_memory([step]))["errors"]] == [path]


OVER = [{"type": "episodic_recent", "limit": 20000},
        {"type": "conditional", "condition": {"field": "items.count", "operator": "gt", "value": 0},
         "then_steps": [{"type": "graph_neighbor_expand", "depth": 6.0, "limit": 1001}]},
        {"type": "vector_search", "collection": "docs", "query": "q", "topK": 100001}]
OVER_PATHS = ["/retrieval/pipeline/1/limit", "/retrieval/pipeline/2/then_steps/0/depth",
              "/retrieval/pipeline/2/then_steps/0/limit", "/retrieval/pipeline/3/topK"]


def test_check_warns_of_a_count_above_the_workspace_limit(tmp_path: Path) -> None:
    write(tmp_path, "PersistentMemory/m.json", _memory(OVER))
    found = _check(tmp_path)
    assert found == [("m.json", path, "limits", "warning") for path in OVER_PATHS]
    write(tmp_path, "context-assembly.json", {"limits": {"log_limit": 20000, "graph_depth": 6}})
    assert [path for _, path, _, _ in _check(tmp_path)] == OVER_PATHS[2:]  # within the raised limits


def test_a_count_above_its_limit_fails_every_run(tmp_path: Path) -> None:
    write(tmp_path, "PersistentMemory/m.json", _memory(OVER[:1]))
    runtime = Runtime(tmp_path)
    try:
        request = {"scope_variables": {"thread": {"thread_id": "t"}}, "thread_id": "t", "explicit_memory": ["m"]}
        [call] = unstructure(runtime.assemble(request))["trace"]["memory_calls"]
    finally:
        runtime.close()
    assert call["status"] == "failed" and "limits.log_limit" in call["error"]


def test_persistent_memory_validate_warns_against_the_limits_given() -> None:
    warnings = validate_definition(_memory(OVER[:1]))["warnings"]
    assert [(w["path"], w["code"]) for w in warnings] == [("/retrieval/pipeline/1/limit", "limits")]
    assert validate_definition(_memory(OVER[:1]), limits=Limits(log_limit=20000))["warnings"] == []


def test_the_schema_says_which_limit_holds_a_count() -> None:
    step = build_schema("persistent-memory")["$defs"]["step.episodic_recent"]["properties"]["limit"]
    assert "At most limits.log_limit (10,000" in step["description"]
