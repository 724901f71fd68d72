"""Method handlers called directly through the method table (no transport): the CRUD every
definition family shares, the persistent-memory and assembly methods that read the typed
definitions, and the errors a caller gets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError, NotFoundError
from context_assembly.methods import METHODS, CallContext, Session, call

FAMILIES = [
    ("contextRuleEngine/", {"id": "made", "rules": []}, "context-rule-engines"),
    ("persistentMemory/", {"id": "made", "label": "Made", "retrieval": {"pipeline": []}}, "PersistentMemory"),
    ("memoryIngestion/", {"id": "made", "trigger": "manual", "processors": [], "routing": []}, "MemoryIngestion"),
]


@pytest.fixture
def session(example_copy: Path) -> Iterator[Session]:
    opened = Session(example_copy)
    yield opened
    opened.close()


def request() -> dict[str, Any]:
    return json.loads((Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "request.json").read_text())


def test_every_family_has_the_same_crud() -> None:
    for prefix, _, _ in FAMILIES:
        assert {f"{prefix}{verb}" for verb in ("list", "get", "create", "update", "delete")} <= set(METHODS), prefix


@pytest.mark.parametrize(("prefix", "document", "folder"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_create_get_update_delete(session: Session, prefix: str, document: dict[str, Any], folder: str) -> None:
    created = call(session, prefix + "create", document)
    assert created["id"] == "made"
    path = session.layout.codebolt / folder / "made.json"
    assert json.loads(path.read_text())["id"] == "made"
    assert call(session, prefix + "get", {"id": "made"})["id"] == "made"
    updated = call(session, prefix + "update", {"id": "made", "updates": {"description": "changed"}})
    assert updated["description"] == "changed"
    assert json.loads(path.read_text())["description"] == "changed"
    call(session, prefix + "delete", {"id": "made"})
    assert not path.exists()
    with pytest.raises(NotFoundError):
        call(session, prefix + "get", {"id": "made"})


@pytest.mark.parametrize(("prefix", "document", "folder"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_a_missing_id_is_invalid_params(session: Session, prefix: str, document: dict[str, Any], folder: str) -> None:
    with pytest.raises(InvalidParamsError) as raised:
        call(session, prefix + "get", {})
    assert any(e["path"] == "/id" for e in raised.value.errors)


def test_memory_types_read_the_typed_definitions(session: Session) -> None:
    items = {i["id"]: i for i in call(session, "contextAssembly/memoryTypes", {})["items"]}
    assert set(items) == set(session.workspace().memories)
    conventions = items["project-conventions"]  # a shorthand file, normalised
    assert conventions["label"] == "Project conventions" and conventions["status"] == "active"


def test_persistent_memory_get_returns_the_file_as_written(session: Session) -> None:
    path = session.layout.persistent_memory_dir / "architecture-docs.json"
    assert call(session, "persistentMemory/get", {"id": "architecture-docs"}) == json.loads(path.read_text())


def test_persistent_memory_execute_runs_a_pipeline(session: Session) -> None:
    result = call(session, "persistentMemory/execute", {"id": "project-conventions", "request": request()})
    assert result["status"] == "ok" and result["items"]
    assert {i["section"] for i in result["items"]} == {"constraints"}


def test_persistent_memory_execute_of_an_unknown_id(session: Session) -> None:
    with pytest.raises(NotFoundError):
        call(session, "persistentMemory/execute", {"id": "nope", "request": request()})


def test_ingestion_list_gives_back_each_file_as_written(session: Session) -> None:
    """Unknown keys and key order survive the typed model (the editor reports the unknown key)."""
    document = {"trigger": "manual", "owner": {"team": "a"}, "id": "extra", "processors": [], "routing": []}
    (session.layout.ingestion_dir / "extra.json").write_text(json.dumps(document))
    listed = {p["id"]: p for p in call(session, "memoryIngestion/list", {})["items"]}
    assert json.dumps(listed["extra"]) == json.dumps(document)


def test_ingestion_execute_reports_its_processors(session: Session) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    ctx = CallContext(emit=lambda method, payload: events.append((method, payload)))
    result = call(session, "memoryIngestion/execute", {
        "id": "task-completion-embed", "payload": {"summary": "Fixed the login bug in the auth module."}}, ctx)
    assert result["status"] in ("ok", "partial") and result["processors"]
    assert events  # progress notifications went to the caller
