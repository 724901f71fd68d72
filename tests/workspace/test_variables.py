"""possibleVariables and requiredVariables (SPEC §3)."""

from __future__ import annotations

from context_assembly.model import unstructure
from context_assembly.workspace.loader import load_workspace
from context_assembly.workspace.variables import possible_variables, required_variables

from ..conftest import EXAMPLE


def test_possible_variables_cover_rules_and_memory_declarations() -> None:
    variables = {v.key: v for v in possible_variables(load_workspace(EXAMPLE))}
    phase = variables["addVar.phase"]
    assert phase.kind == "additional" and phase.type == "string"
    assert {"kind": "rule", "engine_id": "planning", "rule_id": "arch-in-planning"} in unstructure(phase.used_by)
    assert {"kind": "memory", "memory_id": "architecture-docs", "required": False} in unstructure(phase.used_by)
    # inputs_scope ["project"] declares both documented project fields
    assert variables["scope.project.project_id"].used_by[0].memory_id == "architecture-docs"
    assert variables["scope.project.project_path"].scope == "project"
    # seed-004 aliases resolve to the canonical keys
    assert "input.text" in variables and "task.text" not in variables
    assert "scope.task.task_type" in variables
    assert list(variables) == sorted(variables)


def test_required_variables_for_some_memories() -> None:
    workspace = load_workspace(EXAMPLE)
    result = required_variables(workspace, ["architecture-docs", "recent-history", "nope"])
    assert result.scopes == ["project", "thread"]
    assert result.unknown_memory_ids == ["nope"]
    keys = [v.key for v in result.variables]
    assert keys == sorted(keys)
    assert {"scope.project.project_id", "scope.thread.thread_id", "addVar.phase", "addVar.files_changed"} <= set(keys)
    assert "scope.user.user_id" not in keys
