"""The published JSON Schemas: well-formed, up to date, accepting real documents, rejecting broken
ones at the right JSON pointers, and generated from the registries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import pytest

from context_assembly.registry import operators
from context_assembly.registry.operators import Operator, ValueKind
from context_assembly.registry.values import as_number
from context_assembly.registry.variables import field_problem
from context_assembly.schemas import (
    SCHEMA_NAMES,
    Sources,
    all_schemas,
    build_schema,
    check_files,
    registry,
    schema_id,
    too_deep,
    validation_errors,
    validator,
    write_files,
)
from context_assembly.schemas.conditions import NUMERIC_STRING, variable_key_pattern
from context_assembly.schemas.validate import MAX_DEPTH, PYTHON_MAX_DEPTH, Engine

from .schema_documents import INVALID, OPERATOR_ENGINES, VALID

REPO = Path(__file__).resolve().parents[2]
ENGINES: tuple[Engine, ...] = ("rust", "python")


def _paths(name: str, document: Any, engine: Engine) -> set[str]:
    return {e["path"] for e in validation_errors(name, document, engine=engine)}


# -- the schemas themselves -------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    schema = build_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert jsonschema_rs.meta.is_valid(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == schema_id(name) == f"urn:context-assembly:schema:{name}"
    assert schema["title"] and schema["description"]


def _objects(node: Any, where: str = "#") -> list[tuple[str, dict[str, Any]]]:
    """Every object-shaped schema reachable through $defs, properties, items, additionalProperties."""
    found: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(node, dict):
        return found
    if node.get("type") == "object" or "object" in (node.get("type") or []):
        found.append((where, node))
    for key in ("$defs", "properties"):
        for child, sub in (node.get(key) or {}).items():
            found += _objects(sub, f"{where}/{key}/{child}")
    for key in ("items", "additionalProperties", "then", "else"):
        found += _objects(node.get(key), f"{where}/{key}")
    return found


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_object_has_a_title_and_description(name: str) -> None:
    schema = build_schema(name)
    bare = [where for where, node in _objects(schema)
            if where != "#" and node.get("properties") and not (node.get("title") and node.get("description"))]
    assert bare == []


@pytest.mark.parametrize("name", ["rule-engine", "persistent-memory", "ingestion-pipeline", "settings",
                                  "graph-view"])
def test_definition_files_may_name_their_schema(name: str) -> None:
    assert "$schema" in build_schema(name)["properties"]


def test_shipped_files_are_the_generated_ones() -> None:
    assert check_files(REPO / "schemas") == []


def test_cli_check_reports_a_stale_file(tmp_path: Path) -> None:
    write_files(tmp_path)
    cli = [sys.executable, "-m", "context_assembly.schemas", "--check", str(tmp_path)]
    assert subprocess.run(cli, capture_output=True, text=True).returncode == 0
    (tmp_path / "settings.schema.json").write_text("{}\n")
    (tmp_path / "rule-engine.schema.json").unlink()
    done = subprocess.run(cli, capture_output=True, text=True)
    assert done.returncode == 1
    assert "settings.schema.json" in done.stderr and "rule-engine.schema.json" in done.stderr


def test_cli_write(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "context_assembly.schemas", "--write", str(tmp_path / "out")]
    assert subprocess.run(cli, capture_output=True, text=True).returncode == 0
    written = json.loads((tmp_path / "out" / "rule-engine.schema.json").read_text())
    assert written == build_schema("rule-engine")


def test_build_returns_fresh_copies() -> None:
    first = build_schema("persistent-memory")
    first["$defs"]["step.rank"]["properties"]["topK"]["anyOf"].clear()
    assert build_schema("persistent-memory")["$defs"]["step.rank"]["properties"]["topK"]["anyOf"]


def test_cross_schema_refs_resolve() -> None:
    wrapper = {"type": "array", "items": {"$ref": schema_id("settings")}}
    check = jsonschema.Draft202012Validator(wrapper, registry=registry())
    assert check.is_valid([{"tokenizer": "o200k"}])
    assert not check.is_valid([{"tokenizer": "bpe"}])


# -- documents --------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("name", "document"), VALID, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VALID)])
def test_valid_documents(name: str, document: Any, engine: Engine) -> None:
    assert validation_errors(name, document, engine=engine) == []
    assert validator(name).is_valid(document)


@pytest.mark.parametrize(("case", "name", "document", "paths"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_documents_fail_at_their_paths(case: str, name: str, document: Any, paths: set[str]) -> None:
    assert not validator(name).is_valid(document)
    for engine in ENGINES:
        assert _paths(name, document, engine) == paths, engine


@pytest.mark.parametrize(("case", "name", "document", "paths"), INVALID, ids=[c[0] for c in INVALID])
def test_engines_agree_on_messages(case: str, name: str, document: Any, paths: set[str]) -> None:
    rust = validation_errors(name, document, engine="rust")
    assert rust == validation_errors(name, document, engine="python")
    assert validation_errors(name, document) == rust
    for error in rust:
        assert error["message"] and "\n" not in error["message"]


def test_messages_read_well() -> None:
    doc = {"id": "e", "rules": [{"id": "r", "then": {}, "when": [
        {"field": "scope.foo.bar", "operator": "exists"},
        {"field": "input.text", "operator": "gt", "value": "many"},
        {"field": "input.text", "operator": "eqq", "value": 1},
    ]}]}
    messages = {e["path"]: e["message"] for e in validation_errors("rule-engine", doc)}
    assert "unknown scope 'foo'" in messages["/rules/0/when/0/field"]
    assert "number" in messages["/rules/0/when/1/value"]
    assert "'eqq' is not a known operator" in messages["/rules/0/when/2/operator"]
    assert "regex" in messages["/rules/0/when/2/operator"]  # the full list, not cut short
    step = {"name": "m", "pipeline": [{"step": "rank", "topK": "ten"}, {"step": "markdown_read"}]}
    messages = {e["path"]: e["message"] for e in validation_errors("persistent-memory", step)}
    assert messages["/pipeline/0/topK"] == "expected an integer >= 1 or a ${variable} template, got 'ten'"
    assert messages["/pipeline/1"] == "needs one of the properties 'note', 'notes'"


def test_errors_sort_by_pointer_with_numeric_indexes() -> None:
    rules = [{"id": f"r{i}", "then": {}} if i not in (2, 10) else {"id": f"r{i}"} for i in range(12)]
    paths = [e["path"] for e in validation_errors("rule-engine", {"id": "e", "rules": rules})]
    assert paths == ["/rules/2", "/rules/10"]


def test_pointer_escaping() -> None:
    errors = validation_errors("graph-view", {"id": "v", "cypher": "x", "params": {"a/b~": {"type": "x"}}})
    assert {"/params/a~1b~0/type"} <= {e["path"] for e in errors}


def _nested_nots(depth: int) -> dict[str, Any]:
    condition: dict[str, Any] = {"field": "input.text", "operator": "exists"}
    for _ in range(depth):
        condition = {"not": condition}
    return {"id": "e", "rules": [{"id": "r", "when": [condition], "then": {}}]}


@pytest.mark.parametrize(("engine", "limit"), [("rust", MAX_DEPTH), ("python", PYTHON_MAX_DEPTH)])
def test_too_deep_documents_are_refused_not_walked(engine: Engine, limit: int) -> None:
    for depth in (limit, 20_000):  # 20 000 levels would crash jsonschema-rs (stack overflow)
        errors = validation_errors("rule-engine", _nested_nots(depth), engine=engine)
        assert errors == [{"path": "", "message": f"the document is nested more than {limit} levels deep"}]


@pytest.mark.parametrize(("engine", "depth"), [("rust", MAX_DEPTH - 10), ("python", PYTHON_MAX_DEPTH - 10)])
def test_deep_but_allowed_nesting_validates(engine: Engine, depth: int) -> None:
    assert validation_errors("rule-engine", _nested_nots(depth), engine=engine) == []
    broken = _nested_nots(depth)
    node = broken["rules"][0]["when"][0]
    while "not" in node:
        node = node["not"]
    node["operator"] = "bogus"
    [error] = validation_errors("rule-engine", broken, engine=engine)
    assert error["path"] == "/rules/0/when/0" + "/not" * depth + "/operator"


def test_too_deep_counts_containers_only() -> None:
    assert not too_deep("x" * 10_000, 1)
    assert not too_deep({"a": [1, 2]}, 2)
    assert too_deep({"a": [[1]]}, 2)


# -- generated from the registries ------------------------------------------------------------------


def test_every_operator_spelling_is_in_the_enum() -> None:
    leaf = build_schema("rule-engine")["$defs"]["field_condition"]
    assert leaf["properties"]["operator"]["enum"] == operators.all_spellings()
    assert {s for s, _ in OPERATOR_ENGINES} == set(operators.all_spellings())
    seed_004 = build_schema("context-rules")["$defs"]["field_condition"]
    assert seed_004["properties"]["op"]["enum"] == operators.all_spellings()


@pytest.mark.parametrize("op", operators.OPERATORS, ids=lambda op: op.name)
def test_each_operator_value_type_is_enforced(op: Operator) -> None:
    wrong = {ValueKind.ARRAY: "x", ValueKind.STRING: 1, ValueKind.NUMBER: "x",
             ValueKind.PATTERN: ["x"], ValueKind.SCALAR: {"a": 1}}.get(op.value_kind)
    if wrong is None:  # NONE and ANY take anything
        return
    for spelling in (op.name, *op.aliases):
        doc = {"id": "e", "rules": [{"id": "r", "then": {}, "when": [
            {"field": "input.text", "operator": spelling, "value": wrong}]}]}
        for engine in ENGINES:
            assert _paths("rule-engine", doc, engine) == {"/rules/0/when/0/value"}, (spelling, engine)


_NEW_OPERATOR = Operator(
    "within_days", ("withinDays",), ValueKind.NUMBER, "True when a timestamp is at most value days old.",
    {"field": "addVar.updated_at", "operator": "within_days", "value": 7},
    lambda _value, _ignore_case: lambda _actual: True,
)


def test_a_new_operator_needs_no_schema_edit() -> None:
    src = Sources.current().with_operators(_NEW_OPERATOR)
    for name, key in (("rule-engine", "operator"), ("context-rules", "op")):
        schema = build_schema(name, src)
        assert {"within_days", "withinDays"} <= set(schema["$defs"]["field_condition"]["properties"][key]["enum"])
    check = jsonschema.Draft202012Validator(build_schema("rule-engine", src))
    good: dict[str, Any] = {"id": "e", "rules": [{"id": "r", "then": {}, "when": [
        {"field": "addVar.updated_at", "operator": "withinDays", "value": 7}]}]}
    assert check.is_valid(good)
    good["rules"][0]["when"][0]["value"] = "a week"
    assert [list(e.absolute_path) for e in check.iter_errors(good)] == [["rules", 0, "when", 0, "value"]]


def test_default_build_reads_the_registry_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(operators, "OPERATORS", (*operators.OPERATORS, _NEW_OPERATOR))
    enum = build_schema("rule-engine")["$defs"]["field_condition"]["properties"]["operator"]["enum"]
    assert "within_days" in enum and "withinDays" in enum


def test_all_schemas_uses_one_source() -> None:
    schemas = all_schemas(Sources.current().with_operators(_NEW_OPERATOR))
    assert set(schemas) == set(SCHEMA_NAMES)
    filter_ops = schemas["persistent-memory"]["$defs"]["field_condition"]["properties"]["operator"]["enum"]
    assert "within_days" in filter_ops


@pytest.mark.parametrize("field", [
    "scope.swarm.swarm_id", "scope.project.project_name", "scope.foo.bar", "scope.agent", "addVar.phase",
    "addVar.my-var", "addVar.", "addVar.9x", "input.text", "input.other", "memory.source", "task.text",
    "task.type", "agent.name", "project.name", "session.turnCount", "session.turns", "phase", "",
])
def test_variable_key_pattern_agrees_with_the_registry(field: str) -> None:
    import re

    assert (re.fullmatch(variable_key_pattern(Sources.current()).strip("^$"), field) is not None) == (
        field_problem(field) is None), field


@pytest.mark.parametrize("text", ["1", "-2", "3.5", "0.25", "1e3", "1.", ".5", "x", "", "--1", "1.2.3", " 1"])
def test_numeric_string_pattern_agrees_with_as_number(text: str) -> None:
    import re

    assert (re.search(NUMERIC_STRING, text) is not None) == (as_number(text) is not None), text
