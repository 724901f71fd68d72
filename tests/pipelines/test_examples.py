"""The example workspace's persistent-memory definitions, run against in-memory stores."""

from __future__ import annotations

from typing import Any

import pytest

from context_assembly.pipelines.runner import run_pipeline
from context_assembly.workspace.loader import load_workspace

from ..conftest import EXAMPLE
from .fakes import example_stores, make_request


@pytest.fixture(scope="module")
def memories() -> dict[str, dict[str, Any]]:
    return load_workspace(EXAMPLE).memories


def test_every_example_runs(memories: dict[str, dict[str, Any]]) -> None:
    assert set(memories) == {"architecture-docs", "project-conventions", "recent-history", "user-preferences",
                             "related-tasks", "session-dependents"}
    for memory in memories.values():
        result = run_pipeline(memory, make_request(), example_stores())
        assert result.status == "ok", (memory["id"], result.error)
        assert result.items, memory["id"]


def test_architecture_docs(memories: dict[str, dict[str, Any]]) -> None:
    memory = memories["architecture-docs"]
    result = run_pipeline(memory, make_request(), example_stores())
    assert result.query == "fix login timeout refactor auth session handling"
    assert [i.content.split("\n")[0] for i in result.items] == ["### Session handling", "### Login"]
    assert [s.type for s in result.steps] == ["derive_query", "vector_search", "filter", "rank", "format"]
    out = result.to_result(memory)
    assert {(i["section"], i["priority"], i["memory_id"]) for i in out["items"]} == {
        ("knowledge", "high", "architecture-docs")}


def test_project_conventions_shorthand(memories: dict[str, dict[str, Any]]) -> None:
    result = run_pipeline(memories["project-conventions"], make_request(), example_stores())
    assert [i.content.split("\n")[0] for i in result.items] == ["# Coding standards", "# Style guide"]
    assert result.to_result(memories["project-conventions"])["items"][0]["section"] == "constraints"


def test_recent_history(memories: dict[str, dict[str, Any]]) -> None:
    result = run_pipeline(memories["recent-history"], make_request(), example_stores())
    assert [i.content for i in result.items] == [f"user: turn {i}" for i in range(4, 10)]


def test_user_preferences(memories: dict[str, dict[str, Any]]) -> None:
    result = run_pipeline(memories["user-preferences"], make_request(), example_stores())
    [item] = result.items
    assert item.source == "kv://default/users/u-ada" and item.content.startswith("- {")
    assert result.variables_used == ["scope.user.user_id"]


def test_user_preferences_without_a_user_is_skipped(memories: dict[str, dict[str, Any]]) -> None:
    request = make_request(scope_variables={"project": {"project_id": "p"}})
    result = run_pipeline(memories["user-preferences"], request, example_stores())
    assert result.status == "skipped" and result.missing_variables == ["scope.user"]
    anonymous = make_request(scope_variables={"user": {"user_name": "ada"}})
    result = run_pipeline(memories["user-preferences"], anonymous, example_stores())
    assert result.status == "skipped" and result.missing_variables == ["scope.user.user_id"]
