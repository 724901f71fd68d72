"""What rule evaluation answers: which memories, and per rule and condition, why."""

from __future__ import annotations

from typing import Any

from attrs import define, field

from .rules import Boost, Cap


@define
class ConditionResult:
    """One condition's outcome. Groups (`any`/`all`/`not`) carry their children in `conditions`."""

    result: bool
    field: Any = None
    operator: Any = None
    value: Any = None
    actual: Any = None
    present: bool | None = None  # on field conditions: False when the variable was absent or null
    ignore_case: bool | None = None
    group: str | None = None  # "any" | "all" | "not"
    conditions: list[ConditionResult] | None = None
    error: str | None = None  # a malformed condition: the rule does not match


@define
class RuleResult:
    rule_id: str
    matched: bool
    name: str | None = None
    priority: int | float = 0
    conditions: list[ConditionResult] = field(factory=list)
    memories: list[str] = field(factory=list)  # what the rule adds (when it matched)
    excluded: list[str] = field(factory=list)  # what it excludes (when it matched)
    per_source: bool = False  # reads memory.source: evaluated per reference during assembly
    error: str | None = None


@define
class EngineResult:
    engine_id: str
    rules: list[RuleResult] = field(factory=list)
    enabled: bool = True


@define
class Decision:
    """A conflict settled by rule order, or an explicit memory a rule tried to exclude."""

    reference: str
    outcome: str  # "included" | "excluded" | "kept_explicit"
    rule: str  # "engine/rule" that decided
    overridden: list[str] = field(factory=list)  # later rules that said otherwise


@define
class EvaluationResult:
    matched_memories: list[str] = field(factory=list)
    excluded_memories: list[str] = field(factory=list)
    engine_results: list[EngineResult] = field(factory=list)
    variables_used: list[str] = field(factory=list)
    missing_variables: list[str] = field(factory=list)
    caps: list[Cap] = field(factory=list)
    set_priority: dict[str, str] = field(factory=dict)
    boost: list[Boost] = field(factory=list)
    decisions: list[Decision] = field(factory=list)
    warnings: list[str] = field(factory=list)
    # values the server derived for variables the request left out (addVar.turn_count from the
    # thread's episodic turns); each is also in variables_used when a rule reads it
    derived_variables: dict[str, Any] = field(factory=dict)
