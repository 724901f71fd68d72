"""Compile conditions once per file version: operators resolved, values checked, regexes built.

A compiled condition is a small tree. `holds` answers it for a complete lookup (what an engine's
matcher answers before its generated code is compiled, engine.py `interpreted`; the generated
fast path calls the same `predicate`), and `explain` answers it with the full why. A malformed condition
compiles to a `Broken` node: its rule never matches and the problem is reported, never raised.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from attrs import define, field

from ..model.evaluation import ConditionResult
from ..model.rules import AllOf, AnyOf, Condition, FieldCondition, InvalidCondition, Not
from ..registry.operators import (
    ConditionValueError,
    Inline,
    Operator,
    Predicate,
    ValueKind,
    all_spellings,
    lookup_operator,
)
from ..registry.values import MISSING
from ..registry.variables import MEMORY_SOURCE, canonical_field
from .lookup import Lookup


@define(eq=False)
class Leaf:
    key: str  # canonical lookup key
    source: FieldCondition
    operator: Operator
    predicate: Predicate  # for present values; absence is answered by operator.absent_matches
    inline: Inline = None
    # trace.py's dicts for this leaf (absent, present) and its signature, made on first use
    templates: Any = field(default=None, init=False, repr=False)

    def holds(self, values: Lookup) -> bool:
        actual = values[self.key]  # complete: every key present, absent ones as MISSING
        return self.operator.absent_matches if actual is MISSING else self.predicate(actual)

    def explain(self, lookup: Lookup) -> ConditionResult:
        actual = lookup.get(self.key, MISSING)
        present = actual is not MISSING
        return ConditionResult(
            result=self.operator.answer(self.predicate, actual), field=self.source.field, operator=self.source.operator,
            value=None if self.source.value is MISSING else self.source.value,
            actual=actual if present else None, present=present, ignore_case=self.source.ignore_case,
        )


@define(eq=False)
class Group:
    kind: str  # "any" | "all" | "not"
    children: list[Node]

    def holds(self, values: Lookup) -> bool:
        if self.kind == "all":
            return all(child.holds(values) for child in self.children)
        if self.kind == "any":
            return any(child.holds(values) for child in self.children)
        return not self.children[0].holds(values)

    def outcome(self, outcomes: list[bool]) -> bool:
        """The group's outcome from its children's, in order (the trace paths have them already)."""
        if self.kind == "any":
            return any(outcomes)
        if self.kind == "all":
            return all(outcomes)
        return not outcomes[0]

    def explain(self, lookup: Lookup) -> ConditionResult:
        results = [child.explain(lookup) for child in self.children]
        return ConditionResult(result=self.outcome([r.result for r in results]), group=self.kind, conditions=results)


@define(eq=False)
class Broken:
    source: Any
    error: str

    def holds(self, values: Lookup) -> bool:
        return False

    def explain(self, lookup: Lookup) -> ConditionResult:
        src = self.source if isinstance(self.source, FieldCondition) else None
        return ConditionResult(
            result=False, field=src.field if src else None, operator=src.operator if src else None,
            value=None if src is None or src.value is MISSING else src.value, error=self.error,
        )


Node = Leaf | Group | Broken


@define
class CompiledConditions:
    """A rule's `when` list (AND), compiled."""

    nodes: list[Node]
    keys: list[str] = field(factory=list)  # lookup keys read, in first-use order
    errors: list[str] = field(factory=list)

    @property
    def per_source(self) -> bool:
        return MEMORY_SOURCE in self.keys

    def explain(self, lookup: Lookup) -> tuple[bool, list[ConditionResult]]:
        results = [node.explain(lookup) for node in self.nodes]
        return (not self.errors and all(r.result for r in results)), results


def did_you_mean(word: str, choices: list[str]) -> list[str]:
    return difflib.get_close_matches(word, choices, n=3, cutoff=0.6)


def _leaf(cond: FieldCondition) -> Node:
    if not isinstance(cond.field, str) or not cond.field:
        return Broken(cond, "'field' must be a non-empty string")
    operator = lookup_operator(cond.operator)
    if operator is None:
        message = f"unknown operator {cond.operator!r}"
        hints = did_you_mean(cond.operator, all_spellings()) if isinstance(cond.operator, str) else []
        return Broken(cond, message + (f" (did you mean {', '.join(hints)}?)" if hints else ""))
    if cond.value is MISSING and operator.value_kind is not ValueKind.NONE:  # as `check` says (checks.py)
        return Broken(cond, f"'{operator.name}' needs a value: {operator.value_kind.label}")
    try:
        predicate = operator.predicate(cond.value, cond.ignore_case)
    except ConditionValueError as exc:
        return Broken(cond, f"{operator.name}: {exc}")
    inline = operator.inline(cond.value, operator.folds(cond.ignore_case))
    return Leaf(canonical_field(cond.field), cond, operator, predicate, inline)


# A load's leaves by what they are made of (`leaf_key`): a leaf depends on nothing else, and
# `large`'s 46,000 leaves are 10,800 distinct ones, so a cold load makes each once.
LeafMemo = dict[tuple[Any, ...], Node]
_SCALARS = (str, int, bool)


def leaf_key(cond: FieldCondition) -> tuple[Any, ...] | None:
    """What `_leaf(cond)` is made of, with the value's JSON type (1, 1.0 and true are equal keys
    in Python, but different values in a trace); None when the value is not a simple one."""
    value, kind = cond.value, type(cond.value)
    if kind in _SCALARS or value is None or value is MISSING:
        made: Any = (kind, value)
    elif kind is float:
        made = (float, repr(value))  # -0.0 and 0.0, written differently
    elif kind is list and all(type(v) is str for v in value):
        made = (list, *value)
    else:
        return None
    if type(cond.field) is not str or type(cond.operator) is not str:
        return None
    return cond.field, cond.operator, made, type(cond.ignore_case), cond.ignore_case


def compile_condition(cond: Condition, leaves: LeafMemo | None = None) -> Node:
    if isinstance(cond, FieldCondition):
        if leaves is None or (key := leaf_key(cond)) is None:
            return _leaf(cond)
        node = leaves.get(key)
        if node is None:
            node = leaves[key] = _leaf(cond)
        return node
    if isinstance(cond, AnyOf):
        return Group("any", [compile_condition(c, leaves) for c in cond.any])
    if isinstance(cond, AllOf):
        return Group("all", [compile_condition(c, leaves) for c in cond.all])
    if isinstance(cond, Not):
        return Group("not", [compile_condition(cond.not_, leaves)])
    if isinstance(cond, InvalidCondition):
        return Broken(cond.raw, cond.reason)
    return Broken(cond, "not a condition")


def walk(node: Node) -> Iterator[Node]:
    yield node
    if isinstance(node, Group):
        for child in node.children:
            yield from walk(child)


def compile_conditions(conditions: list[Condition], leaves: LeafMemo | None = None) -> CompiledConditions:
    """`leaves`: leaves made before, shared (they are never changed once made)."""
    nodes = [compile_condition(c, leaves) for c in conditions]
    compiled = CompiledConditions(nodes)
    for node in nodes:
        for part in walk(node):
            if isinstance(part, Leaf) and part.key not in compiled.keys:
                compiled.keys.append(part.key)
            elif isinstance(part, Broken):
                compiled.errors.append(part.error)
    return compiled
