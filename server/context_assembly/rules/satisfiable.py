"""Finding two conditions of one rule (AND) that can never hold together.

Deliberately conservative: only pairs on the same field whose operators are understood exactly
(presence, equality, membership, numeric bounds). A false alarm would teach people to ignore
the warning, so anything subtler (regexes, case folding) is left alone.
"""

from __future__ import annotations

from typing import Any

from ..registry.operators import OPERATORS, lookup_operator
from ..registry.values import as_number, json_equal
from ..registry.variables import canonical_field

_PRESENCE_FREE = {op.name for op in OPERATORS if op.absent_matches}  # hold on an absent field
_BOUNDS = {"gt": (">", False), "gte": (">", True), "lt": ("<", False), "lte": ("<", True)}


def _leaf(cond: dict[str, Any]) -> tuple[str, str, Any] | None:
    field = cond.get("field")
    operator = lookup_operator(cond.get("operator", cond.get("op")))
    if not isinstance(field, str) or operator is None or cond.get("ignore_case") is not None:
        return None
    return canonical_field(field), operator.name, cond.get("value")


def _member(value: Any, values: Any) -> bool:
    return isinstance(values, list) and any(json_equal(value, v) for v in values)


def _bound_excludes(op: str, bound: Any, value: Any) -> bool:
    """True when `value` fails the numeric bound `op bound`."""
    a, b = as_number(value), as_number(bound)
    if a is None or b is None:
        return False
    return not {"gt": a > b, "gte": a >= b, "lt": a < b, "lte": a <= b}[op]


def _clash(a: tuple[str, Any], b: tuple[str, Any]) -> str | None:
    (op1, v1), (op2, v2) = a, b
    ops = {op1, op2}
    if "not_exists" in ops and (ops - _PRESENCE_FREE):
        other = op2 if op1 == "not_exists" else op1
        return f"'not_exists' and '{other}' on the same field"
    if op1 == op2 == "eq" and not json_equal(v1, v2):
        return f"equal to both {v1!r} and {v2!r}"
    if ops == {"eq", "neq"} and json_equal(v1, v2):
        return f"equal and not equal to {v1!r}"
    if ops == {"eq", "in"}:
        value, values = (v1, v2) if op1 == "eq" else (v2, v1)
        if isinstance(values, list) and not _member(value, values):
            return f"{value!r} is not in {values!r}"
    if ops == {"eq", "not_in"}:
        value, values = (v1, v2) if op1 == "eq" else (v2, v1)
        if _member(value, values):
            return f"{value!r} is excluded by not_in"
    if op1 == op2 == "in" and isinstance(v1, list) and isinstance(v2, list) \
            and not any(_member(x, v2) for x in v1):
        return "the two 'in' lists share no value"
    if op1 == "eq" and op2 in _BOUNDS and _bound_excludes(op2, v2, v1):
        return f"{v1!r} fails {op2} {v2!r}"
    if op2 == "eq" and op1 in _BOUNDS and _bound_excludes(op1, v1, v2):
        return f"{v2!r} fails {op1} {v1!r}"
    if op1 in _BOUNDS and op2 in _BOUNDS and _BOUNDS[op1][0] != _BOUNDS[op2][0]:
        return _empty_range((op1, v1), (op2, v2))
    return None


def _empty_range(a: tuple[str, Any], b: tuple[str, Any]) -> str | None:
    (low_op, low), (high_op, high) = (a, b) if _BOUNDS[a[0]][0] == ">" else (b, a)
    lo, hi = as_number(low), as_number(high)
    if lo is None or hi is None:
        return None
    inclusive = _BOUNDS[low_op][1] and _BOUNDS[high_op][1]
    if lo > hi or (lo == hi and not inclusive):
        return f"no number is {low_op} {low!r} and {high_op} {high!r}"
    return None


def contradiction(conditions: list[dict[str, Any]]) -> tuple[dict, dict, str] | None:
    """The first pair of top-level conditions that cannot both hold, with the reason."""
    seen: dict[str, list[tuple[dict[str, Any], tuple[str, Any]]]] = {}
    for cond in conditions:
        leaf = _leaf(cond)
        if leaf is None:
            continue
        key, op, value = leaf
        if op == "in" and value == []:
            return cond, cond, "'in' an empty list never holds"
        for earlier, spec in seen.get(key, []):
            why = _clash(spec, (op, value))
            if why:
                return earlier, cond, why
        seen.setdefault(key, []).append((cond, (op, value)))
    return None
