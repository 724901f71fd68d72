"""possibleVariables and requiredVariables over a loaded workspace (SPEC §3)."""

from __future__ import annotations

import weakref

from ..model.definitions import MemoryDefinition
from ..model.variables import PossibleVariable, RequiredVariables, VariableUse
from ..registry.variables import ADDVAR_PREFIX, INPUT_TEXT, MEMORY_SOURCE, SCOPE_PREFIX, SCOPES
from ..rules.compile import Leaf, walk
from .loader import Workspace

_SCOPES = {s.name: s for s in SCOPES}


def _variable(key: str) -> PossibleVariable | None:
    """The variable a condition's field names; None for a field that names no variable (a scope
    without a field, `scope.agent`, as typed half-way): the lint reports it, nothing lists it."""
    if key.startswith(ADDVAR_PREFIX):
        return PossibleVariable(key, "additional", name=key[len(ADDVAR_PREFIX):])
    if key.startswith(SCOPE_PREFIX):
        parts = key.split(".", 2)
        if len(parts) < 3 or not parts[1] or not parts[2]:
            return None
        _, scope, name = parts
        description = _SCOPES[scope].description if scope in _SCOPES else None
        return PossibleVariable(key, "scope", scope=scope, name=name, description=description)
    if key == INPUT_TEXT:
        return PossibleVariable(key, "input", name="text", description="The task text of this turn.")
    return PossibleVariable(key, "memory" if key == MEMORY_SOURCE else "input", name=key)


def _scope_keys(scope: str) -> list[str]:
    return [f"{SCOPE_PREFIX}{scope}.{f}" for f in _SCOPES[scope].fields] if scope in _SCOPES else []


def _memory_variables(memory_id: str, memory: MemoryDefinition) -> list[tuple[PossibleVariable, VariableUse]]:
    out = []
    for scope in memory.scopes:
        for key in _scope_keys(scope):
            if (found := _variable(key)) is not None:
                out.append((found, VariableUse("memory", memory_id=memory_id, required=True)))
    for var in memory.declared_variables:
        if var.name is None:
            continue
        entry = _variable(ADDVAR_PREFIX + var.name)
        if entry is None:
            continue
        entry.type, entry.description = var.type, var.description
        out.append((entry, VariableUse("memory", memory_id=memory_id, required=bool(var.required))))
    return out


def _merge(table: dict[str, PossibleVariable], entry: PossibleVariable, use: VariableUse) -> None:
    current = table.setdefault(entry.key, entry)
    current.type = current.type or entry.type
    current.description = current.description or entry.description
    if use not in current.used_by:
        current.used_by.append(use)


# One answer per workspace version (workspaces are immutable once loaded): completion and hover
# ask on every request. Read-only: callers must not change the entries.
_POSSIBLE: weakref.WeakKeyDictionary[Workspace, list[PossibleVariable]] = weakref.WeakKeyDictionary()


def possible_variables(workspace: Workspace) -> list[PossibleVariable]:
    found = _POSSIBLE.get(workspace)
    if found is None:
        found = _POSSIBLE[workspace] = _possible_variables(workspace)
    return list(found)


def _possible_variables(workspace: Workspace) -> list[PossibleVariable]:
    table: dict[str, PossibleVariable] = {}
    for engine in workspace.rule_set.engines:
        for rule in engine.rules:
            for node in rule.conditions.nodes:
                for part in walk(node):
                    entry = _variable(part.key) if isinstance(part, Leaf) and isinstance(part.key, str) else None
                    if entry is not None:
                        _merge(table, entry, VariableUse("rule", engine.id, rule.rule_id))
    for memory_id, memory in workspace.memories.items():
        for entry, use in _memory_variables(memory_id, memory):
            _merge(table, entry, use)
    return sorted(table.values(), key=lambda v: v.key)


def required_variables(workspace: Workspace, memory_ids: list[str]) -> RequiredVariables:
    result = RequiredVariables(memory_ids=list(memory_ids))
    table: dict[str, PossibleVariable] = {}
    for memory_id in memory_ids:
        memory = workspace.memories.get(memory_id)
        if memory is None:
            result.unknown_memory_ids.append(memory_id)
            continue
        for scope in memory.scopes:
            if scope not in result.scopes:
                result.scopes.append(scope)
        for entry, use in _memory_variables(memory_id, memory):
            _merge(table, entry, use)
    result.variables = sorted(table.values(), key=lambda v: v.key)
    return result
