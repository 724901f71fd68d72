"""Every operator against every kind of actual value (SPEC §4.2), on both evaluation paths."""

from __future__ import annotations

import pytest

from context_assembly.registry.operators import OPERATORS, lookup_operator

from .support import engine, evaluate, holds, request, rule

ABSENT = object()

# operator -> (value, {case: (actual, expected)}). Cases: present, absent, null, wrong type,
# numeric string, boolean. The actual value is the variable addVar.x.
TABLE = {
    "exists": (None, {"present": ("x", True), "absent": (ABSENT, False), "null": (None, False),
                      "wrong type": ([1], True), "numeric string": ("5", True), "boolean": (False, True)}),
    "not_exists": (None, {"present": ("x", False), "absent": (ABSENT, True), "null": (None, True),
                          "wrong type": ([1], False), "numeric string": ("5", False), "boolean": (False, False)}),
    "eq": ("planning", {"present": ("planning", True), "absent": (ABSENT, False), "null": (None, False),
                        "wrong type": (1, False), "numeric string": ("1", False), "boolean": (True, False)}),
    "neq": ("planning", {"present": ("planning", False), "absent": (ABSENT, True), "null": (None, True),
                         "wrong type": (1, True), "numeric string": ("1", True), "boolean": (True, True)}),
    "in": (["a", 1], {"present": ("a", True), "absent": (ABSENT, False), "null": (None, False),
                      "wrong type": (["a"], False), "numeric string": ("1", False), "boolean": (True, False)}),
    "not_in": (["a", 1], {"present": ("a", False), "absent": (ABSENT, True), "null": (None, True),
                          "wrong type": (["a"], True), "numeric string": ("1", True), "boolean": (True, True)}),
    "contains": ("fix", {"present": ("Please FIX it", True), "absent": (ABSENT, False), "null": (None, False),
                         "wrong type": (5, False), "numeric string": ("a fix 42", True), "boolean": (True, False)}),
    "not_contains": ("fix", {"present": ("Please FIX it", False), "absent": (ABSENT, True), "null": (None, True),
                             "wrong type": (5, True), "numeric string": ("42", True), "boolean": (True, True)}),
    "starts_with": ("src/", {"present": ("src/a.py", True), "absent": (ABSENT, False), "null": (None, False),
                             "wrong type": (["src/"], False), "numeric string": ("12", False),
                             "boolean": (True, False)}),
    "ends_with": (".py", {"present": ("a.py", True), "absent": (ABSENT, False), "null": (None, False),
                          "wrong type": (3, False), "numeric string": ("3.py", True), "boolean": (False, False)}),
    "gt": (5, {"present": (6, True), "absent": (ABSENT, False), "null": (None, False),
               "wrong type": ("six", False), "numeric string": ("6", True), "boolean": (True, False)}),
    "gte": (5, {"present": (5, True), "absent": (ABSENT, False), "null": (None, False),
                "wrong type": ([5], False), "numeric string": ("5.0", True), "boolean": (True, False)}),
    "lt": (5, {"present": (4.5, True), "absent": (ABSENT, False), "null": (None, False),
               "wrong type": ({"n": 1}, False), "numeric string": ("-3", True), "boolean": (False, False)}),
    "lte": (5, {"present": (5, True), "absent": (ABSENT, False), "null": (None, False),
                "wrong type": ("5 apples", False), "numeric string": ("5", True), "boolean": (False, False)}),
    "regex": (r"^fix(es|ed)?\b", {"present": ("fixed it", True), "absent": (ABSENT, False),
                                  "null": (None, False), "wrong type": (7, False),
                                  "numeric string": ("42", False), "boolean": (True, False)}),
}

CASES = [(op, case) for op, (_, cases) in TABLE.items() for case in cases]


def test_the_table_covers_every_operator() -> None:
    assert set(TABLE) | {"not_contains"} == {op.name for op in OPERATORS}


@pytest.mark.parametrize(("operator", "case"), CASES, ids=[f"{o}-{c}" for o, c in CASES])
def test_operator_table(operator: str, case: str) -> None:
    value, cases = TABLE[operator]
    actual, expected = cases[case]
    condition = {"field": "addVar.x", "operator": operator}
    if value is not None:
        condition["value"] = value
    variables = {} if actual is ABSENT else {"x": actual}
    assert holds(condition, variables) is expected


@pytest.mark.parametrize(("alias", "name", "value", "actual"), [
    ("equals", "eq", "a", "a"), ("not_equals", "neq", "a", "b"), ("startsWith", "starts_with", "ab", "abc"),
    ("endsWith", "ends_with", "bc", "abc"), ("matches", "regex", "b+", "abbc"),
])
def test_aliases_behave_as_their_operator(alias: str, name: str, value: str, actual: str) -> None:
    assert lookup_operator(alias) is lookup_operator(name)
    for candidate in (actual, "zzz"):
        assert holds({"field": "addVar.x", "operator": alias, "value": value}, {"x": candidate}) is \
            holds({"field": "addVar.x", "operator": name, "value": value}, {"x": candidate})


def test_contains_on_arrays_is_element_equality() -> None:
    assert holds({"field": "addVar.tags", "operator": "contains", "value": "Auth"}, {"tags": ["auth", "db"]})
    assert not holds({"field": "addVar.tags", "operator": "contains", "value": "Auth", "ignore_case": False},
                     {"tags": ["auth", "db"]})
    assert holds({"field": "addVar.ids", "operator": "contains", "value": 2}, {"ids": [1, 2]})
    assert not holds({"field": "addVar.ids", "operator": "contains", "value": True}, {"ids": [1, 2]})


@pytest.mark.parametrize(("condition", "actual", "expected"), [
    ({"operator": "eq", "value": "Planning"}, "planning", False),
    ({"operator": "eq", "value": "Planning", "ignore_case": True}, "planning", True),
    ({"operator": "contains", "value": "FIX"}, "a fix", True),
    ({"operator": "contains", "value": "FIX", "ignore_case": False}, "a fix", False),
    ({"operator": "starts_with", "value": "SRC"}, "src/x", False),
    ({"operator": "starts_with", "value": "SRC", "ignore_case": True}, "src/x", True),
    ({"operator": "ends_with", "value": ".PY", "ignore_case": True}, "a.py", True),
    ({"operator": "regex", "value": "^FIX"}, "fix it", False),
    ({"operator": "regex", "value": "^FIX", "ignore_case": True}, "fix it", True),
    ({"operator": "in", "value": ["A", "B"], "ignore_case": True}, "b", True),
    ({"operator": "in", "value": ["A", "B"]}, "b", False),
    ({"operator": "not_in", "value": ["A"], "ignore_case": True}, "a", False),
    ({"operator": "neq", "value": "A", "ignore_case": True}, "a", False),
])
def test_case_rules_and_ignore_case(condition: dict, actual: str, expected: bool) -> None:
    assert holds({"field": "addVar.x", **condition}, {"x": actual}) is expected


@pytest.mark.parametrize("bad", [
    {"field": "addVar.x", "operator": "equal", "value": 1},  # unknown operator
    {"field": "addVar.x", "operator": "in", "value": "a"},  # in without an array
    {"field": "addVar.x", "operator": "regex", "value": "(a)\\1"},  # backreference: not linear
    {"field": "addVar.x", "operator": "regex", "value": "(?=a)"},  # lookahead
    {"field": "addVar.x", "operator": "regex", "value": "["},  # invalid
    {"field": "addVar.x", "operator": "gt", "value": "many"},  # not a number
    {"field": "addVar.x", "operator": "starts_with", "value": 5},  # not a string
    {"field": 7, "operator": "exists"},  # field not a string
    {"operator": "exists"},  # no field
    {"any": "nope"},
])
def test_malformed_conditions_never_match_even_negated(bad: dict) -> None:
    assert not holds(bad, {"x": "a"})
    assert not holds({"not": bad}, {"x": "a"})
    assert not holds({"any": [bad, {"field": "addVar.x", "operator": "exists"}]} if "any" not in bad else bad,
                     {"x": "a"})


NON_STRING_VALUES = [1, 1.0, 0, -2.5, True, False]
ACTUALS = [1, 1.0, 0, 0.0, -2.5, True, False, "1", "true", [1], {"a": 1}, None, ABSENT]


@pytest.mark.parametrize("value", NON_STRING_VALUES, ids=repr)
def test_eq_and_neq_with_a_number_or_boolean_are_strict_json_equality(value: object) -> None:
    """A number equals a number of either kind, never a boolean or a numeric string; a boolean only
    itself (the generated matcher tests these inline, the explain path through the predicate)."""
    from context_assembly.registry.values import json_equal

    for actual in ACTUALS:
        variables = {} if actual is ABSENT else {"x": actual}
        same = actual is not ABSENT and actual is not None and json_equal(actual, value)
        assert holds({"field": "addVar.x", "operator": "eq", "value": value}, variables) is same, actual
        assert holds({"field": "addVar.x", "operator": "neq", "value": value}, variables) is not same, actual


def test_numeric_strings_are_canonical_decimals_only() -> None:
    for text, expected in (("10", True), ("10.5", True), ("-1", False), ("1e3", False), (" 10", False),
                           ("0x10", False), ("", False)):
        assert holds({"field": "addVar.n", "operator": "gt", "value": 0}, {"n": text}) is expected, text
    assert holds({"field": "addVar.n", "operator": "lt", "value": "20"}, {"n": 15})


def test_tests_an_absent_field_passes_go_last_in_a_rule() -> None:
    """The rule compiler orders a rule's tests by each operator's registry `cost`."""
    from context_assembly.registry.operators import OPERATORS

    assert all(op.cost == max(o.cost for o in OPERATORS) for op in OPERATORS if op.absent_matches)
    assert min(OPERATORS, key=lambda op: op.cost).name in ("eq", "in")


def test_a_pattern_remembers_its_answers_within_a_bound() -> None:
    """`regex` searches through `patterns.Search`: called (the explain path) or subscripted (the
    generated matcher), the same answer; each text searched once; at most `_MEMO_LIMIT` kept."""
    from context_assembly.registry import patterns

    calls: list[str] = []
    search = patterns.compile_search(r"\bfix(es|ed)?\b", False)
    counted = patterns.Search(lambda text: calls.append(text) or search._search(text))
    assert counted("we fixed it") is True and counted["we fixed it"] is True and counted("prefix") is False
    assert calls == ["we fixed it", "prefix"]  # the second look at a text is a dict lookup
    for n in range(patterns._MEMO_LIMIT + 5):
        counted[f"text {n}"]
    assert len(counted) <= patterns._MEMO_LIMIT and counted["fix"] is True
    # a long text (a prompt, a file) is searched and answered, never kept: 20 patterns remembering a
    # 100 KB task text each grew a session by ~300 MB
    long_text = "we fixed it " + "x" * 100_000
    assert counted[long_text] is True and long_text not in counted  # dict membership: no search
    # both matchers agree on it, with a value the memo has and has not seen
    for text, expected in (("fix", True), ("a fix", True), ("affix", False), ("FIX", False)):
        assert holds({"field": "addVar.x", "operator": "regex", "value": r"\bfix\b"}, {"x": text}) is expected



def test_integer_strings_compare_exactly_beyond_double_precision() -> None:
    """"1700000000000000001" (a nanosecond timestamp sent as text) compared as a float, equal to
    1700000000000000000: the number and its string gave different answers."""
    for actual in (1700000000000000001, "1700000000000000001"):
        assert holds({"field": "addVar.ts", "operator": "gt", "value": 1700000000000000000}, {"ts": actual})
        assert not holds({"field": "addVar.ts", "operator": "lte", "value": "1700000000000000000"}, {"ts": actual})


def test_a_valueless_comparison_is_malformed_at_run_time_too() -> None:
    """`neq` with no value fired on every request (and `eq` never) while `check` called it an error:
    now it never matches, even under `not`, and the rule carries the error."""
    for condition in ({"field": "addVar.a", "operator": "neq"}, {"not": {"field": "addVar.a", "operator": "eq"}},
                      {"field": "addVar.a", "operator": "eq"}):
        for variables in ({}, {"a": "x"}):
            assert not holds(condition, variables), (condition, variables)
    result = evaluate([engine([rule("r", [{"field": "addVar.a", "operator": "neq"}])])], request({}))
    assert result.engine_results[0].rules[0].error == "'neq' needs a value: any JSON value"


def test_a_pattern_with_a_lone_surrogate_is_refused_not_raised() -> None:
    from context_assembly.registry.patterns import PatternError, check_pattern, compile_search

    assert check_pattern("a\ud800") == "the pattern holds a lone surrogate, which is not valid Unicode"
    with pytest.raises(PatternError):
        compile_search("a\ud800", False)
    assert compile_search("b", False)("a\ud800b") is True  # a text holding one is still searched


def test_a_priority_too_large_for_a_float_sorts_first_and_breaks_nothing() -> None:
    """A 401-digit priority made `float()` overflow: every method of the workspace failed."""
    from context_assembly.model import RuleEngine, structure
    from context_assembly.rules.engine import provisional_engine

    rules = [rule("low", [], priority=1), rule("huge", [], priority=10**400), rule("nan", [], priority=float("nan"))]
    compiled = provisional_engine(structure(engine(rules), RuleEngine))
    assert [r.rule_id for r in compiled.rules] == ["huge", "low", "nan"]
    assert evaluate([engine(rules)], request({})).matched_memories == ["huge", "low", "nan"]
