"""What possibleVariables and requiredVariables answer (SPEC §3)."""

from __future__ import annotations

from attrs import define, field


@define
class VariableUse:
    """One place a variable is read or declared."""

    kind: str  # "rule" | "memory"
    engine_id: str | None = None
    rule_id: str | None = None
    memory_id: str | None = None
    required: bool | None = None  # memories: must the caller provide it?


@define
class PossibleVariable:
    key: str  # the lookup key: scope.<scope>.<field>, addVar.<name>, input.text
    kind: str  # "scope" | "additional" | "input" | "memory"
    scope: str | None = None
    name: str | None = None
    type: str | None = None
    description: str | None = None
    used_by: list[VariableUse] = field(factory=list)


@define
class RequiredVariables:
    memory_ids: list[str]
    scopes: list[str] = field(factory=list)  # scopes that must be present in scope_variables
    variables: list[PossibleVariable] = field(factory=list)  # keys, with `required` per memory
    unknown_memory_ids: list[str] = field(factory=list)
