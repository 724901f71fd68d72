"""The variables a rule can read: the 8 scopes and their fields, additional variables, input text,
and the seed-004 field names that are aliases of them."""

from __future__ import annotations

import re

from attrs import frozen


@frozen
class Scope:
    name: str
    fields: tuple[str, ...]
    description: str


SCOPES: tuple[Scope, ...] = (
    Scope("swarm", ("swarm_id", "swarm_name"), "The swarm of agents this run belongs to."),
    Scope("project", ("project_id", "project_path"), "The project (workspace) being worked on."),
    Scope("agent", ("agent_id", "agent_name", "agent_type"), "The agent asking for context."),
    Scope("thread", ("thread_id",), "The conversation thread."),
    Scope("task", ("task_id", "task_type"), "The task being worked on."),
    Scope("user", ("user_id",), "The user the agent acts for."),
    Scope("org", ("org_id",), "The organisation."),
    Scope("orchestrator", ("orchestrator_id",), "The orchestrator driving the agents."),
)
SCOPE_NAMES: tuple[str, ...] = tuple(s.name for s in SCOPES)

INPUT_TEXT = "input.text"
SCOPE_PREFIX = "scope."
ADDVAR_PREFIX = "addVar."
# `memory.source` is bound per memory reference during contribution (per-source rules).
MEMORY_SOURCE = "memory.source"
TURN_COUNT = "addVar.turn_count"

# seed-004 condition fields -> canonical keys
FIELD_ALIASES: dict[str, str] = {
    "task.text": INPUT_TEXT,
    "task.type": "scope.task.task_type",
    "agent.name": "scope.agent.agent_name",
    "project.name": "scope.project.project_name",
    "session.turnCount": TURN_COUNT,
}

_ADDVAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_SCOPE_FIELD = re.compile(r"scope\.([a-z_]+)\.([A-Za-z_][A-Za-z0-9_]*)")


def documented_keys() -> list[str]:
    """Every documented scope key plus `input.text`, in table order."""
    keys = [f"{SCOPE_PREFIX}{s.name}.{f}" for s in SCOPES for f in s.fields]
    keys.append(INPUT_TEXT)
    return keys


def canonical_field(field: str) -> str:
    """The lookup key a field name stands for (seed-004 aliases resolved)."""
    return FIELD_ALIASES.get(field, field)


def variable_origin(field: str) -> str | None:
    """Where a condition's field is read from in an assembly request (`scope_variables.agent.
    agent_name`, `additional_variables.phase`, `input.text`), else None for an unknown field."""
    key = canonical_field(field)
    if key == INPUT_TEXT:
        return "input.text"
    if key == MEMORY_SOURCE:
        return "each memory reference's source"
    if key.startswith(ADDVAR_PREFIX) and _ADDVAR_NAME.fullmatch(key[len(ADDVAR_PREFIX):]):
        return "additional_variables." + key[len(ADDVAR_PREFIX):]
    if (match := _SCOPE_FIELD.fullmatch(key)) is not None:
        return f"scope_variables.{match.group(1)}.{match.group(2)}"
    return None


def field_problem(field: str) -> str | None:
    """Why `field` can never be a variable key, or None when it is well-formed.

    Extra scope fields (`scope.project.project_name`) are allowed; unknown scopes are not.
    """
    key = canonical_field(field)
    if key in (INPUT_TEXT, MEMORY_SOURCE):
        return None
    if key.startswith(ADDVAR_PREFIX):
        name = key[len(ADDVAR_PREFIX):]
        return None if _ADDVAR_NAME.fullmatch(name) else f"'{name}' is not a valid additional variable name"
    match = _SCOPE_FIELD.fullmatch(key)
    if match:
        if match.group(1) in SCOPE_NAMES:
            return None
        return f"unknown scope '{match.group(1)}' (scopes: {', '.join(SCOPE_NAMES)})"
    return (f"'{field}' is not a variable: use scope.<scope>.<field>, addVar.<name>, input.text "
            "or a seed-004 name (" + ", ".join(FIELD_ALIASES) + ")")


def is_documented(field: str) -> bool:
    """True for documented scope keys, input.text, memory.source and any addVar name."""
    key = canonical_field(field)
    return key in _DOCUMENTED or key == MEMORY_SOURCE or key.startswith(ADDVAR_PREFIX)


_DOCUMENTED = frozenset(documented_keys())
