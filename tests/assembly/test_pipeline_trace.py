"""What an assembly says of the pipelines it ran: the steps' own warnings, skipped and nested
steps, cached runs, and graph views edited since a run was cached."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.methods import Session, call

from ..lsp.support import REQUEST
from ..workspace.builder import write


def memory(memory_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": memory_id, "label": memory_id, "status": "active", "retrieval": {"pipeline": steps},
            "contribution": {"section": "knowledge", "priority": "medium"}}


@pytest.fixture
def session(example_copy: Path) -> Iterator[Session]:
    write(example_copy, "PersistentMemory/misses.json", memory("misses", [
        {"type": "kv_get", "namespace": "users", "keys": ["u-nobody"]},
        {"type": "markdown_read", "notes": ["deleted-note"]},
        {"type": "early_exit", "when": [], "reason": "enough"},
        {"type": "markdown_read", "notes": ["style-guide"]}]))
    write(example_copy, "PersistentMemory/nested.json", memory("nested", [
        {"type": "conditional", "condition": {"field": "items.count", "operator": "eq", "value": 0},
         "then_steps": [{"type": "markdown_read", "notes": ["style-guide"]}],
         "else_steps": [{"type": "markdown_read", "notes": ["coding-standards"]}]}]))
    write(example_copy, "knowledgegraph/views/names.json", {
        "id": "names", "description": "Entity names.", "params": {},
        "cypher": "MATCH (d:Entity) RETURN d.name AS name ORDER BY d.name"})
    write(example_copy, "PersistentMemory/view-reader.json", memory("view-reader", [
        {"type": "graph_view_read", "view": "names"}]))
    opened = Session(example_copy)
    opened.runtime.memory.write("graph://default/node/auth", {"kind": "module", "name": "auth"})
    yield opened
    opened.close()


def assemble(session: Session, *memories: str) -> dict[str, Any]:
    request = {**REQUEST, "explicit_memory": list(memories)}
    request.pop("constraints", None)
    result: dict[str, Any] = call(session, "contextAssembly/assemble", request)
    return result


def memory_call(result: dict[str, Any], reference: str) -> dict[str, Any]:
    return next(c for c in result["trace"]["memory_calls"] if c["reference"] == reference)


def contents(result: dict[str, Any], reference: str) -> list[str]:
    return [i["content"] for items in result["context"].values() for i in items if i.get("memory_id") == reference]


def test_a_step_that_finds_nothing_warns_the_agent(session: Session) -> None:
    """SPEC §5.1: a missing key or note becomes a warning, never a silent drop (the assembly
    dropped the steps' warnings; only persistentMemory/execute showed them)."""
    result = assemble(session, "misses")
    warnings = " ".join(w["content"] for w in result["context"]["warnings"])
    assert "memory 'misses'" in warnings
    assert "kv://default/users/u-nobody does not exist" in warnings
    assert "markdown://deleted-note does not exist" in warnings
    steps = memory_call(result, "misses")["steps"]
    assert steps[0]["warnings"] == ["kv://default/users/u-nobody does not exist"]
    assert [s.get("skipped", False) for s in steps] == [False, False, False, True]  # after early_exit
    again = assemble(session, "misses")  # from the cache: the same warnings, the steps marked
    assert memory_call(again, "misses")["status"] == "cached"
    assert all(s["cached"] for s in memory_call(again, "misses")["steps"])
    assert [w["content"] for w in again["context"]["warnings"]] == [w["content"] for w in result["context"]["warnings"]]


def test_nested_steps_say_where_they_ran(session: Session) -> None:
    steps = memory_call(assemble(session, "nested"), "nested")["steps"]
    assert [(s["type"], s.get("depth", 0), s.get("branch")) for s in steps] == [
        ("conditional", 0, "then_steps"), ("markdown_read", 1, None)]


def test_an_edited_graph_view_is_not_served_from_the_cache(session: Session, example_copy: Path) -> None:
    first = assemble(session, "view-reader")
    assert contents(first, "view-reader") == ["name: auth"]
    assert memory_call(assemble(session, "view-reader"), "view-reader")["status"] == "cached"
    path = example_copy / ".codebolt/knowledgegraph/views/names.json"
    view = json.loads(path.read_text())
    view["cypher"] = "MATCH (d:Entity) RETURN upper(d.name) AS name ORDER BY d.name"
    path.write_text(json.dumps(view))
    stat = path.stat()  # a later mtime even on a coarse clock
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    edited = assemble(session, "view-reader")
    assert memory_call(edited, "view-reader")["status"] == "ok"
    assert contents(edited, "view-reader") == ["name: AUTH"]


def test_annotated_fields_survive_the_assembly(session: Session, example_copy: Path) -> None:
    """The assembly wrote its own `title` over what an `annotate` step had set. `origin` stays the
    assembly's (why the memory ran), whatever a step or a stored document calls its origin."""
    (example_copy / ".codebolt/memory/team-notes.md").write_text("The web team reviews every change.")
    (example_copy / ".codebolt/memory/other-notes.md").write_text("Releases go out on Tuesdays.")
    write(example_copy, "PersistentMemory/annotated.json", memory("annotated", [
        {"type": "markdown_read", "notes": ["team-notes"]},
        {"type": "annotate", "fields": {"origin": "docs", "title": "House style", "team": "web"}}]))
    write(example_copy, "PersistentMemory/plain.json", memory("plain", [
        {"type": "markdown_read", "notes": ["other-notes"]}]))
    result = assemble(session, "annotated", "plain")
    found = {i["memory_id"]: i for items in result["context"].values() for i in items
             if i.get("memory_id") in ("annotated", "plain")}
    assert {k: found["annotated"]["metadata"][k] for k in ("origin", "title", "team")} == {
        "origin": ["explicit"], "title": "House style", "team": "web"}
    assert found["plain"]["metadata"]["origin"] == ["explicit"]
