"""The published schemas say what the server does: a request's `assembly_id` wherever a request is
taken, hover texts that tell the truth (shorthand `name`, `contribution.format`, a seed-004 `id`),
and the seed-003 `{rules: [...]}` form the loader reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from context_assembly.errors import InvalidParamsError
from context_assembly.methods.session import Session
from context_assembly.methods.table import call
from context_assembly.rules.dialects import normalise_file
from context_assembly.schemas import build_schema, validation_errors
from context_assembly.workspace.loader import load_workspace

from ..workspace.builder import write

ENGINES = ("rust", "python")


# -- assembly_id ------------------------------------------------------------------------------------


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    write(tmp_path, "context-rule-engines/e.json", {"id": "e", "rules": [{"id": "r", "then": {
        "add_memories": ["kv://x"]}}]})
    session = Session(tmp_path)
    yield session
    session.runtime.close()


REQUEST = {"scope_variables": {}, "assembly_id": "mine-1"}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_request_schema_takes_an_assembly_id(engine: Any) -> None:
    assert validation_errors("assembly-request", REQUEST, engine) == []
    for bad in ("../x", "_drafts", "a."):
        errors = validation_errors("assembly-request", {**REQUEST, "assembly_id": bad}, engine)
        assert [e["path"] for e in errors] == ["/assembly_id"]


@pytest.mark.parametrize("method", ["contextAssembly/evaluateRules", "contextRuleEngine/evaluate"])
def test_every_method_taking_a_request_takes_its_assembly_id(session: Session, method: str) -> None:
    assert call(session, method, REQUEST)["matched_memories"] == ["kv://x"]  # InvalidParams: unknown property
    with pytest.raises(InvalidParamsError) as caught:
        call(session, method, {**REQUEST, "assembly_id": "../x"})
    assert [e["path"] for e in caught.value.errors] == ["/assembly_id"]


def test_assemble_and_validate_take_it_as_before(session: Session) -> None:
    assert call(session, "contextAssembly/validate", REQUEST)["valid"] is True
    assert call(session, "contextAssembly/assemble", REQUEST)["meta"]["assembly_id"] == "mine-1"


def test_validate_refuses_the_assembly_id_assemble_refuses(session: Session) -> None:
    """validate said "valid" of an assembly_id that assemble then refused (it removed the id first)."""
    checked = call(session, "contextAssembly/validate", {**REQUEST, "assembly_id": "../x"})
    assert checked["valid"] is False and [e["path"] for e in checked["errors"]] == ["/assembly_id"]
    with pytest.raises(InvalidParamsError) as caught:
        call(session, "contextAssembly/assemble", {**REQUEST, "assembly_id": "../x"})
    assert [e["path"] for e in caught.value.errors] == ["/assembly_id"]


# -- hover texts ------------------------------------------------------------------------------------


def _description(schema: str, *path: str) -> str:
    node: Any = build_schema(schema)
    for key in path:
        node = node[key]
    return str(node["description"])


def test_the_shorthand_name_is_the_label_and_the_file_name_the_id(tmp_path: Path) -> None:
    write(tmp_path, "PersistentMemory/conventions.json",
          {"name": "project-conventions", "pipeline": [{"step": "markdown_read", "note": "style"}]})
    [(memory_id, definition)] = load_workspace(tmp_path).memories.items()
    assert (memory_id, definition.label) == ("conventions", "project-conventions")
    text = _description("persistent-memory", "properties", "name")
    assert "used as its id" not in text  # what the hover said
    assert "label" in text and "the id is the file name" in text


def test_contribution_format_says_it_is_not_applied() -> None:
    text = _description("persistent-memory", "$defs", "contribution", "properties", "format")
    assert not text.startswith("How items are rendered")
    assert "not applied" in text and "`format` step" in text


def test_a_seed_004_id_is_said_to_be_unread_as_the_loader_ignores_it() -> None:
    document = [{"id": "always-style", "condition": {"field": "task.text", "op": "exists"},
                 "action": {"include": "markdown://style"}}]
    dialect, rules, _ = normalise_file(document, "10_base", ".json")
    assert (dialect, [r.rule["id"] for r in rules]) == ("seed-004", ["10_base"])
    text = _description("context-rules", "$defs", "rule_004", "properties", "id")
    assert text != "An optional id." and text.startswith("Not read") and "`name`" in text


# -- the seed-003 `{rules: [...]}` form -------------------------------------------------------------

SEED_003 = """\
rules:
  - name: security-docs
    when: {task_contains: [auth, login]}
    then:
      always_include: [{path: docs/security.md}]
      boost: [{kg_entity: AuthService, weight: 2.0}]
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_the_context_rules_schema_takes_the_seed_003_rules_form(engine: Any) -> None:
    document = yaml.safe_load(SEED_003)
    dialect, rules, problems = normalise_file(document, "20_sec", ".yaml")
    assert (dialect, len(rules), problems) == ("seed-003", 1, [])  # what the loader reads
    assert validation_errors("context-rules", document, engine) == []  # 'rules' was unexpected
    document["rules"][0]["then"]["always_include"] = [{"file": "x"}]
    errors = validation_errors("context-rules", document, engine)
    assert {e["path"] for e in errors} == {"/rules/0/then/always_include/0"}
