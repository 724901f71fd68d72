"""One truth about every decision: evaluateRules, assemble, `check`, the editor and the CLI agree
(SPEC §4.3): conflicts settled once, one variable lookup with derived values, seed-004 aliases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.cli.main import main
from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import build_document, overlay
from context_assembly.methods.session import Session
from context_assembly.methods.table import call
from context_assembly.workspace.loader import load_workspace

from ..workspace.builder import write

SEED004 = [
    {"name": "named-project", "condition": {"field": "project.name", "op": "eq", "value": "demo"},
     "action": {"include": ["kv://notes/project"]}},
    {"name": "long-session", "condition": {"field": "session.turnCount", "op": "gt", "value": 1},
     "action": {"include": ["kv://notes/long"]}},
]
REQUEST: dict[str, Any] = {"scope_variables": {"project": {"project_name": "demo"}, "thread": {"thread_id": "t-1"}},
                           "input": {"text": "go"}}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    write(tmp_path, "ContextRuleEngine/rules.json", SEED004)
    write(tmp_path, "context-rule-engines/main.json", {"id": "main", "rules": [
        {"id": "include", "priority": 10, "when": [], "then": {"add_memories": ["kv://notes/kept"]}},
        {"id": "exclude", "priority": 1, "when": [], "then": {"exclude_memories": ["kv://notes/kept"]}},
    ]})
    return tmp_path


@pytest.fixture
def session(workspace: Path) -> Iterator[Session]:
    session = Session(workspace)
    for key in ("project", "long", "kept"):
        session.runtime.memory.write(f"kv://notes/{key}", {"note": key})
    for content in ("one", "two", "three"):
        session.runtime.memory.write("episodic://t-1", {"role": "user", "content": content})
    yield session
    session.runtime.close()


def test_evaluate_rules_derives_the_turn_count_as_assemble_does(session: Session) -> None:
    evaluation = call(session, "contextAssembly/evaluateRules", REQUEST)
    assert "kv://notes/long" in evaluation["matched_memories"]
    assert evaluation["derived_variables"] == {"addVar.turn_count": 3}
    assert "addVar.turn_count" in evaluation["variables_used"]
    assert "addVar.turn_count" not in evaluation["missing_variables"]
    engine = call(session, "contextRuleEngine/evaluate", {**REQUEST, "id": "context-rules"})
    assert engine["matched_memories"] == ["kv://notes/project", "kv://notes/long"]
    assembled = call(session, "contextAssembly/assemble", REQUEST)
    ran = [c["reference"] for c in assembled["trace"]["memory_calls"]]
    assert ran == evaluation["matched_memories"]


def test_a_passed_turn_count_wins_over_the_derived_one(session: Session) -> None:
    evaluation = call(session, "contextAssembly/evaluateRules", {**REQUEST, "additional_variables": {"turn_count": 0}})
    assert "kv://notes/long" not in evaluation["matched_memories"] and evaluation["derived_variables"] == {}


def test_what_evaluate_rules_decides_is_what_assemble_keeps(session: Session) -> None:
    evaluation = call(session, "contextAssembly/evaluateRules", REQUEST)
    assert "kv://notes/kept" in evaluation["matched_memories"]
    assert "kv://notes/kept" not in evaluation["excluded_memories"]
    assert [(d["reference"], d["outcome"], d["rule"], d["overridden"]) for d in evaluation["decisions"]] == \
        [("kv://notes/kept", "included", "main/include", ["main/exclude"])]
    assembled = call(session, "contextAssembly/assemble", REQUEST)
    assert "kv://notes/kept" in [item["source"] for item in assembled["context"]["knowledge"]]
    assert [d for d in assembled["trace"]["decisions"] if d["kind"] == "excluded"] == []


def test_the_cli_reports_the_same_decision(workspace: Path, session: Session, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    assert main(["evaluate", "--workspace", str(workspace), "--request", str(request)]) == 0
    out = capsys.readouterr().out
    assert "Derived: addVar.turn_count = 3" in out
    assert "Excluded" not in out
    assert "Decision: kv://notes/kept included by main/include (overrides main/exclude)" in out
    assert main(["assemble", "--workspace", str(workspace), "--request", str(request)]) == 0
    out = capsys.readouterr().out
    assert "kv://notes/kept" in out.split("Section")[0]  # in the context
    assert "excluded" not in out.split("Dropped:")[-1] if "Dropped:" in out else True


def test_project_name_is_a_known_seed004_name(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(workspace), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []
    path = workspace / ".codebolt/ContextRuleEngine/rules.json"
    document = build_document(path.as_uri(), path.read_text(), 1, workspace)
    assert document is not None
    assert document_diagnostics(document, overlay(load_workspace(workspace), [document])) == []


RULE_TEST = {"cases": [{"name": "a long session", "request": REQUEST,
                        "expect": {"memories_included": ["kv://notes/long"], "rules_fired": ["long-session"]}}]}


def test_rule_tests_see_the_derived_turn_count(workspace: Path, session: Session,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A rules-only case is evaluated over the lookup `evaluateRules` uses (the thread's 3 turns):
    the CLI, the method, the editor's diagnostics and "evaluate this rule" all see them."""
    write(workspace, "tests/long.json", RULE_TEST)
    ran = call(session, "contextRuleEngine/test", {})
    assert ran["summary"]["passed"] == 1 and ran["summary"]["ok"], ran
    assert main(["test", str(workspace), "--coverage"]) == 0
    out = capsys.readouterr().out
    assert "PASS .codebolt/tests/long.json::a long session [rules]" in out
    assert "context-rules/long-session" not in out.split("Rules never fired")[1].split("Rules never failed")[0]
    path = workspace / ".codebolt" / "tests" / "long.json"
    document = build_document(path.as_uri(), path.read_text(), None, workspace)
    assert document is not None
    seen = overlay(load_workspace(workspace), [document])
    assert document_diagnostics(document, seen, lookup_of=session.runtime.lookup) == []
    unseen = document_diagnostics(document, seen)  # without the runtime: no turns, the case fails
    assert any(d["data"]["code"] == "test-failed" for d in unseen), unseen
    from context_assembly.testing.run import evaluate_rule

    fired = evaluate_rule(session.workspace(), "context-rules", "long-session", session.runtime.lookup)
    assert fired["fired"] == 1
