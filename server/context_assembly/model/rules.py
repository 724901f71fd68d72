"""Rule engines in the canonical format (seed 000), with the seed-003/004 actions and nesting."""

from __future__ import annotations

from typing import Any

from attrs import define, field

from ..registry.values import MISSING


@define
class FieldCondition:
    """`{field, operator, value?, ignore_case?}`; `value` is MISSING when the file leaves it out."""

    field: Any
    operator: Any
    value: Any = MISSING
    ignore_case: bool | None = None


@define
class AnyOf:
    """`{"any": [...]}`: true when at least one condition holds."""

    any: list[Condition]


@define
class AllOf:
    """`{"all": [...]}`: true when every condition holds."""

    all: list[Condition]


@define
class Not:
    """`{"not": {...}}`: true when the inner condition does not hold."""

    not_: Condition


# `{"$unreadable": raw, "reason": why}`: a condition a rule dialect could not read, kept so its rule
# never matches. The dialect has reported it; the canonical checks leave it alone, and it reads back
# as an InvalidCondition with the dialect's reason.
UNREADABLE = "$unreadable"


@define
class InvalidCondition:
    """Something in a condition list that is not a condition; its rule never matches."""

    raw: Any
    reason: str


Condition = FieldCondition | AnyOf | AllOf | Not | InvalidCondition


@define
class Cap:
    """Limit what a memory id, URI pattern or section contributes."""

    target: str
    max_tokens: int | None = None
    max_items: int | None = None


@define
class Boost:
    """Multiply the score of what a memory id, URI pattern or knowledge-graph entity contributes."""

    target: str
    weight: float = 1.0


@define
class RuleActions:
    add_memories: list[str] = field(factory=list)
    exclude_memories: list[str] = field(factory=list)
    caps: list[Cap] = field(factory=list)
    set_priority: dict[str, str] = field(factory=dict)
    boost: list[Boost] = field(factory=list)


@define
class Rule:
    id: str | None = None
    name: str | None = None
    description: str | None = None
    priority: int | float = 0
    when: list[Condition] = field(factory=list)
    then: RuleActions = field(factory=RuleActions)


@define
class RuleEngine:
    id: str | None = None
    name: str | None = None
    description: str | None = None
    enabled: bool = True
    rules: list[Rule] = field(factory=list)
    schema: str | None = None  # "$schema" on the wire
