"""-32602 errors name what is wrong in their `path`: a missing property is `/<property>` (SPEC §8)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.methods.session import Session
from context_assembly.methods.table import METHODS, call

from ..workspace.builder import memory, write

MISSING = re.compile(r"missing required property '(.+)'$")


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    write(tmp_path, "PersistentMemory/m.json", memory("m"))
    session = Session(tmp_path)
    yield session
    session.runtime.close()


def _errors(session: Session, method: str, params: dict) -> list[dict]:
    try:
        call(session, method, params)
    except InvalidParamsError as exc:
        return exc.errors
    return []


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_missing_required_property_is_named_in_the_path(session: Session, method: str) -> None:
    spec = METHODS[method]
    errors = _errors(session, method, {})
    paths = {e["path"] for e in errors}
    for field in spec.params.fields if spec.params else ():
        if field.required:
            assert f"/{field.name}" in paths, (method, errors)
    for error in errors:
        found = MISSING.match(error["message"])
        if found:
            assert error["path"].endswith("/" + found.group(1)), (method, error)
            assert error["path"] != ""


@pytest.mark.parametrize("method", ["contextAssembly/assemble", "contextAssembly/evaluateRules",
                                    "contextRuleEngine/evaluate"])
def test_a_request_without_scope_variables(session: Session, method: str) -> None:
    errors = _errors(session, method, {"input": {"text": "x"}})
    assert errors == [{"path": "/scope_variables", "message": "missing required property 'scope_variables'"}]


def test_nested_required_properties_in_a_definition(session: Session) -> None:
    errors = _errors(session, "contextRuleEngine/create", {"id": "e", "rules": [{"id": "r", "when": [{}]}]})
    assert "/rules/0/then" in {e["path"] for e in errors}
    assert "/rules/0/when/0/field" in {e["path"] for e in errors}


def test_persistent_memory_execute_names_the_request_property(session: Session) -> None:
    errors = _errors(session, "persistentMemory/execute", {"id": "m", "request": {}})
    assert "/request/scope_variables" in {e["path"] for e in errors}
