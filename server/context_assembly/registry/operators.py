"""The condition operators: each defined once, with everything every consumer needs.

An operator turns the condition's `value` (checked here, once, when a rule file is compiled) into
a predicate over the variable's actual value. The actual value is `MISSING` when the request does
not carry the variable (absent or null); `absent_matches` says what the operator answers then.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from attrs import frozen

from .patterns import PatternError, compile_search
from .values import MISSING, as_number, is_scalar, json_equal, json_type

Predicate = Callable[[Any], bool]
# An inline form for the generated matcher: (expression, constant) or None. The expression may use
# "{v}" (the actual value, MISSING when absent), "{s}" (whether that value is a str), "{n}"
# (whether it is a number: an int or a float, not a bool), "{c}" (the constant) and "{p}" (the
# operator's own predicate, for present values only). An expression
# "({s} and …)" or "not ({s} and …)" answers an absent value itself (false, true).
Inline = tuple[str, Any] | None


class ConditionValueError(ValueError):
    """The condition's `value` does not suit its operator (the rule then never matches)."""


_NO_SCHEMA: dict[str, Any] = {}


class ValueKind(enum.Enum):
    """What an operator expects in `value`; `schema` is the JSON Schema the published files use."""

    NONE = ("no value (it is ignored)", _NO_SCHEMA)
    ANY = ("any JSON value", _NO_SCHEMA)
    SCALAR = ("a string, number, boolean or null", {"type": ["string", "number", "boolean", "null"]})
    ARRAY = ("an array of values", {"type": "array"})
    STRING = ("a string", {"type": "string"})
    NUMBER = ("a number (or a numeric string)", {"type": ["number", "string"]})
    PATTERN = ("a regular expression (RE2 syntax)", {"type": "string", "format": "regex"})

    def __init__(self, label: str, schema: dict[str, Any]) -> None:
        self.label = label
        self.schema = schema


@frozen
class Operator:
    name: str
    aliases: tuple[str, ...]
    value_kind: ValueKind
    description: str
    example: dict[str, Any]
    build: Callable[[Any, bool], Predicate]
    absent_matches: bool = False
    ignore_case_default: bool = False
    # Where a rule tests it among its AND-ed conditions (tests are pure, so order is free): likely
    # false and cheap first, so a failing rule stops early. 0 for equality (the most selective),
    # 4 for tests that are usually true (presence, and those an absent field passes).
    cost: int = 2
    # Optional: the same test as a Python expression, so the generated matcher avoids a call.
    inline: Callable[[Any, bool], Inline] = lambda _value, _fold: None

    def folds(self, ignore_case: bool | None) -> bool:
        return self.ignore_case_default if ignore_case is None else ignore_case

    def predicate(self, value: Any, ignore_case: bool | None = None) -> Predicate:
        """The test of a present value; raises ConditionValueError when `value` does not fit.

        The predicate is only ever called on present values: callers answer `absent_matches`
        for a missing one (see `answer`), which keeps the generated matcher free of a wrapper call.
        """
        return self.build(value, self.folds(ignore_case))

    def answer(self, predicate: Predicate, actual: Any) -> bool:
        return self.absent_matches if actual is MISSING else predicate(actual)


def _fold(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _equal_to(expected: Any, ignore_case: bool) -> Predicate:
    if ignore_case and isinstance(expected, str):
        folded = expected.casefold()
        return lambda actual: isinstance(actual, str) and actual.casefold() == folded
    if isinstance(expected, str):
        return lambda actual: actual == expected  # only a str equals a str
    return lambda actual: json_equal(actual, expected)


def _member_of(values: Any, ignore_case: bool) -> Predicate:
    if not isinstance(values, list):
        raise ConditionValueError(f"expects an array of values, got {json_type(values)}")
    if ignore_case:
        values = [_fold(v) for v in values]
    strings = frozenset(v for v in values if isinstance(v, str))
    others = [v for v in values if not isinstance(v, str)]

    def member(actual: Any) -> bool:
        if isinstance(actual, str):
            return (actual.casefold() if ignore_case else actual) in strings
        return any(json_equal(actual, v) for v in others)

    return member


def _string_value(value: Any) -> str:
    if not isinstance(value, str):
        raise ConditionValueError(f"expects a string value, got {json_type(value)}")
    return value


def _contains(value: Any, ignore_case: bool) -> Predicate:
    if not is_scalar(value):
        raise ConditionValueError(f"expects a string (or a scalar for array fields), got {json_type(value)}")
    needle = value.casefold() if ignore_case and isinstance(value, str) else value
    element = _equal_to(value, ignore_case)

    def contains(actual: Any) -> bool:
        if isinstance(actual, str):
            if not isinstance(needle, str):
                return False
            return needle in (actual.casefold() if ignore_case else actual)
        if isinstance(actual, list):
            return any(element(item) for item in actual)
        return False

    return contains


def _not(build: Callable[[Any, bool], Predicate]) -> Callable[[Any, bool], Predicate]:
    def negated(value: Any, ignore_case: bool) -> Predicate:
        inner = build(value, ignore_case)
        return lambda actual: not inner(actual)

    return negated


def _affix(method: str) -> Callable[[Any, bool], Predicate]:
    def build(value: Any, ignore_case: bool) -> Predicate:
        affix = _string_value(value)
        if ignore_case:
            affix = affix.casefold()
            return lambda actual: isinstance(actual, str) and getattr(actual.casefold(), method)(affix)
        return lambda actual: isinstance(actual, str) and getattr(actual, method)(affix)

    return build


def _compare(test: Callable[[float, float], bool]) -> Callable[[Any, bool], Predicate]:
    def build(value: Any, _ignore_case: bool) -> Predicate:
        bound = as_number(value)
        if bound is None:
            raise ConditionValueError(f"expects a number, got {json_type(value)}")

        def compare(actual: Any) -> bool:
            number = as_number(actual)
            return number is not None and test(number, bound)

        return compare

    return build


def _regex(value: Any, ignore_case: bool) -> Predicate:
    pattern = _string_value(value)
    try:
        search = compile_search(pattern, ignore_case)
    except PatternError as exc:
        raise ConditionValueError(str(exc)) from None
    return lambda actual: isinstance(actual, str) and search(actual)


def _inline_equal(value: Any, fold: bool) -> Inline:
    if isinstance(value, str):
        return ("({s} and {v} == {c})", value) if not fold else None
    return _inline_json_equal(value)


def _inline_not_equal(value: Any, fold: bool) -> Inline:
    if isinstance(value, str):
        return ("not ({s} and {v} == {c})", value) if not fold else None
    same = _inline_json_equal(value)
    return None if same is None else (f"not {same[0]}", same[1])


def _inline_json_equal(value: Any) -> Inline:
    """`json_equal(v, value)` for a boolean or a number (no case to fold): a boolean is only
    itself; a number equals a number of either kind, never a boolean or a numeric string."""
    if isinstance(value, bool):
        return "({v} is {c})", value
    if isinstance(value, int | float):
        return "({v} == {c} and {n})", value
    return None


def _inline_member(negate: bool) -> Callable[[Any, bool], Inline]:
    def inline(values: Any, fold: bool) -> Inline:
        if fold or not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None
        test = "({s} and {v} in {c})"  # a non-string never equals a string
        return ("not " + test if negate else test), frozenset(values)

    return inline


def _inline_affix(method: str) -> Callable[[Any, bool], Inline]:
    def inline(value: Any, fold: bool) -> Inline:
        if fold or not isinstance(value, str):
            return None
        return f"({{s}} and {{v}}.{method}({{c}}))", value

    return inline


def _inline_contains(negate: bool) -> Callable[[Any, bool], Inline]:
    def inline(value: Any, fold: bool) -> Inline:
        if not isinstance(value, str):
            return None
        text = "{v}.casefold()" if fold else "{v}"
        member = "not in" if negate else "in"
        # strings inline; arrays (and anything else) through the operator's own predicate
        return f"({{c}} {member} {text} if {{s}} else {{p}}({{v}}))", \
            (value.casefold() if fold else value)

    return inline


def _inline_compare(symbol: str) -> Callable[[Any, bool], Inline]:
    def inline(value: Any, _fold: bool) -> Inline:
        bound = as_number(value)
        if bound is None:
            return None
        # numbers inline; numeric strings (and anything else) through the predicate
        return f"({{v}} {symbol} {{c}} if {{n}} else {{p}}({{v}}))", bound

    return inline


def _inline_regex(value: Any, fold: bool) -> Inline:
    if not isinstance(value, str):
        return None
    return "({s} and {c}[{v}])", compile_search(value, fold)  # a remembered answer: no call


def _always(result: bool) -> Callable[[Any, bool], Predicate]:
    return lambda _value, _ignore_case: lambda _actual: result


def _example(operator: str, field: str, value: Any = MISSING) -> dict[str, Any]:
    example = {"field": field, "operator": operator}
    if value is not MISSING:
        example["value"] = value
    return example


OPERATORS: tuple[Operator, ...] = (
    Operator("exists", (), ValueKind.NONE, "True when the field is present and not null.",
             _example("exists", "scope.task.task_id"), _always(True), cost=4,
             inline=lambda _v, _f: ("True", None)),
    Operator("not_exists", (), ValueKind.NONE, "True when the field is absent or null.",
             _example("not_exists", "addVar.query"), _always(False), absent_matches=True, cost=4,
             inline=lambda _v, _f: ("False", None)),
    Operator("eq", ("equals",), ValueKind.ANY,
             'True when the field strictly equals the value (no type coercion: "1" is not 1).',
             _example("eq", "addVar.phase", "planning"), _equal_to, inline=_inline_equal, cost=0),
    Operator("neq", ("not_equals",), ValueKind.ANY,
             "True when the field does not strictly equal the value, or is absent.",
             _example("neq", "scope.agent.agent_type", "reviewer"), _not(_equal_to), absent_matches=True,
             inline=_inline_not_equal, cost=4),
    Operator("in", (), ValueKind.ARRAY, "True when the field value is one of the values in the array.",
             _example("in", "scope.task.task_type", ["bugfix", "refactor"]), _member_of,
             inline=_inline_member(False), cost=0),
    Operator("not_in", (), ValueKind.ARRAY,
             "True when the field value is none of the values in the array, or is absent.",
             _example("not_in", "addVar.env", ["prod"]), _not(_member_of), absent_matches=True,
             inline=_inline_member(True), cost=4),
    Operator("contains", (), ValueKind.SCALAR,
             "A string field contains the value, an array field an element equal to it; "
             "case-insensitive unless ignore_case is false (an array's string elements too).",
             _example("contains", "input.text", "refactor"), _contains, ignore_case_default=True,
             inline=_inline_contains(False)),
    Operator("not_contains", (), ValueKind.SCALAR, "The negation of contains; true when the field is absent.",
             _example("not_contains", "input.text", "refund"), _not(_contains),
             absent_matches=True, ignore_case_default=True, inline=_inline_contains(True), cost=4),
    Operator("starts_with", ("startsWith",), ValueKind.STRING, "A string field starts with the value.",
             _example("starts_with", "scope.project.project_path", "/srv/"), _affix("startswith"),
             inline=_inline_affix("startswith"), cost=1),
    Operator("ends_with", ("endsWith",), ValueKind.STRING, "A string field ends with the value.",
             _example("ends_with", "addVar.active_file", ".py"), _affix("endswith"),
             inline=_inline_affix("endswith"), cost=1),
    Operator("gt", (), ValueKind.NUMBER,
             "Numeric greater-than; numbers and numeric strings compare as numbers, booleans never.",
             _example("gt", "addVar.attempt", 2), _compare(lambda a, b: a > b),
             inline=_inline_compare(">")),
    Operator("gte", (), ValueKind.NUMBER, "Numeric greater-than-or-equal (see gt).",
             _example("gte", "addVar.confidence", 0.5), _compare(lambda a, b: a >= b),
             inline=_inline_compare(">=")),
    Operator("lt", (), ValueKind.NUMBER, "Numeric less-than (see gt).",
             _example("lt", "addVar.token_budget", 16000), _compare(lambda a, b: a < b),
             inline=_inline_compare("<")),
    Operator("lte", (), ValueKind.NUMBER, "Numeric less-than-or-equal (see gt).",
             _example("lte", "addVar.files_changed", 3), _compare(lambda a, b: a <= b),
             inline=_inline_compare("<=")),
    Operator("regex", ("matches",), ValueKind.PATTERN,
             "The string field matches the regular expression anywhere (a search, not a full match); "
             "RE2 syntax, linear time, no backreferences or lookaround. `\\d`, `\\w` and `\\b` are ASCII "
             "(use `\\p{N}`, `\\p{L}`); with ignore_case, letters fold one to one (ß does not match SS, "
             "as it does for the string operators).",
             _example("regex", "input.text", r"\b(fix|bug)\b"), _regex, inline=_inline_regex),
)

_BY_NAME: dict[str, Operator] = {op.name: op for op in OPERATORS}
_BY_SPELLING: dict[str, Operator] = {
    **{alias: op for op in OPERATORS for alias in op.aliases},
    **_BY_NAME,
}


def operator_names() -> list[str]:
    return [op.name for op in OPERATORS]


def all_spellings() -> list[str]:
    """Canonical names followed by aliases: what a file may say in `operator` / `op`."""
    return operator_names() + [alias for op in OPERATORS for alias in op.aliases]


def lookup_operator(spelling: object) -> Operator | None:
    """The operator a name or alias stands for, or None."""
    return _BY_SPELLING.get(spelling) if isinstance(spelling, str) else None
