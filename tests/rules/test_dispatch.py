"""The generated matcher's shortcuts: guard dispatch, test reordering, shared results.

Rules with a top-level `eq` / `in` over strings run only in the block of the value the request
has; conditions are tested cheapest-and-likeliest-false first. None of it may change an answer:
every case here is checked against the explaining path, which walks the conditions one by one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.evaluate import RuleSet
from context_assembly.rules.lookup import build_lookup

from .support import engine, request, rule


def eq(field: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"field": field, "operator": "eq", "value": value, **extra}


def one_of(field: str, values: Any) -> dict[str, Any]:
    return {"field": field, "operator": "in", "value": values}


def both_paths(engines: list[dict[str, Any]], req: AssemblyRequest) -> tuple[list[str], list[str]]:
    """(matched `engine/rule` ids, memories) — asserted equal on the fast and the explaining path."""
    rule_set = RuleSet([compile_engine(structure(e, RuleEngine)) for e in engines])
    fast, slow = rule_set.evaluate(req, explain=False), rule_set.evaluate(req, explain=True)
    ids = [[f"{e.engine_id}/{r.rule_id}" for e in result.engine_results for r in e.rules if r.matched]
           for result in (fast, slow)]
    assert ids[0] == ids[1]
    assert fast.matched_memories == slow.matched_memories
    assert fast.excluded_memories == slow.excluded_memories
    return ids[0], fast.matched_memories


def matched(rules: list[dict[str, Any]], variables: dict[str, Any] | None = None) -> list[str]:
    ids, _ = both_paths([engine(rules)], request(variables))
    return [i.split("/", 1)[1] for i in ids]


def test_guarded_and_unguarded_rules_keep_priority_order() -> None:
    rules = [rule("g-low", [eq("addVar.phase", "plan")], priority=1),
             rule("free", [{"field": "addVar.phase", "operator": "exists"}], priority=5),
             rule("g-high", [one_of("addVar.phase", ["plan", "review"])], priority=9),
             rule("g-tie", [eq("addVar.phase", "plan")], priority=5)]
    assert matched(rules, {"phase": "plan"}) == ["g-high", "free", "g-tie", "g-low"]
    assert matched(rules, {"phase": "review"}) == ["g-high", "free"]
    assert matched(rules, {"phase": "other"}) == ["free"]
    assert matched(rules, {}) == []


def test_guard_values_match_strings_only_and_exactly() -> None:
    rules = [rule("one", [eq("addVar.x", "1")]), rule("set", [one_of("addVar.x", ["true", "1"])]),
             rule("num", [eq("addVar.x", 1)]), rule("bool", [eq("addVar.x", True)])]
    assert matched(rules, {"x": "1"}) == ["one", "set"]
    assert matched(rules, {"x": 1}) == ["num"]
    assert matched(rules, {"x": 1.0}) == ["num"]
    assert matched(rules, {"x": True}) == ["bool"]
    assert matched(rules, {"x": ["1"]}) == []  # an unhashable value reaches no bucket, raises nothing
    assert matched(rules, {"x": {"1": 1}}) == []
    assert matched(rules, {"x": None}) == []


def test_ignore_case_equality_is_not_dispatched_exactly() -> None:
    rules = [rule("folded", [eq("addVar.x", "Plan", ignore_case=True)]),
             rule("exact", [eq("addVar.x", "Plan")]),
             rule("folded-in", [{"field": "addVar.x", "operator": "in", "value": ["PLAN"], "ignore_case": True}])]
    assert matched(rules, {"x": "plan"}) == ["folded", "folded-in"]
    assert matched(rules, {"x": "Plan"}) == ["folded", "exact", "folded-in"]


def test_absent_variables_in_guarded_rules() -> None:
    rules = [rule("neq", [eq("addVar.k", "a"), {"field": "addVar.other", "operator": "neq", "value": "z"}]),
             rule("not-in", [eq("addVar.k", "a"), {"field": "addVar.other", "operator": "not_in", "value": ["z"]}]),
             rule("absent", [eq("addVar.k", "a"), {"field": "addVar.other", "operator": "not_exists"}]),
             rule("present", [eq("addVar.k", "a"), {"field": "addVar.other", "operator": "exists"}]),
             rule("no-guard", [{"field": "addVar.k", "operator": "neq", "value": "a"}])]
    assert matched(rules, {"k": "a"}) == ["neq", "not-in", "absent"]
    assert matched(rules, {"k": "a", "other": "z"}) == ["present"]
    assert matched(rules, {"k": "a", "other": "y"}) == ["neq", "not-in", "present"]
    assert matched(rules, {}) == ["no-guard"]


def test_duplicate_and_conflicting_guard_values() -> None:
    rules = [rule("dup-in", [one_of("addVar.k", ["a", "a", "b"])]),
             rule("two-eq", [eq("addVar.k", "a"), eq("addVar.k", "b")]),  # never both
             rule("eq-and-in", [eq("addVar.k", "a"), one_of("addVar.k", ["b", "a"])]),
             rule("same", [eq("addVar.k", "a")]), rule("empty-in", [one_of("addVar.k", [])])]
    assert matched(rules, {"k": "a"}) == ["dup-in", "eq-and-in", "same"]
    assert matched(rules, {"k": "b"}) == ["dup-in"]


def test_guards_under_nested_groups() -> None:
    rules = [rule("not", [{"not": eq("addVar.k", "a")}]),
             rule("any", [{"any": [eq("addVar.k", "a"), eq("addVar.j", "b")]}]),
             rule("all", [{"all": [eq("addVar.k", "a"), {"not": {"any": [eq("addVar.j", "x")]}}]},
                          eq("addVar.k", "a")])]
    assert matched(rules, {"k": "a"}) == ["any", "all"]
    assert matched(rules, {"k": "a", "j": "x"}) == ["any"]
    assert matched(rules, {"j": "b"}) == ["not", "any"]


def test_many_guard_values_reach_their_blocks() -> None:
    rules = [rule(f"r{i}", [eq("addVar.k", f"v{i % 37}"), {"field": "addVar.n", "operator": "gt", "value": i % 5}])
             for i in range(200)]
    for value in (0, 17, 36):
        expected = [f"r{i}" for i in range(200) if i % 37 == value and i % 5 < 3]
        assert matched(rules, {"k": f"v{value}", "n": 3}) == expected


def test_broken_and_per_source_rules_stay_out_of_the_matcher() -> None:
    rules = [rule("broken", [eq("addVar.k", "a"), {"field": "addVar.k", "operator": "nope"}]),
             rule("bad-in", [{"field": "addVar.k", "operator": "in", "value": "a"}]),
             rule("source", [eq("addVar.k", "a"), {"field": "memory.source", "operator": "exists"}]),
             rule("ok", [eq("addVar.k", "a")])]
    assert matched(rules, {"k": "a"}) == ["ok"]
    compiled = compile_engine(structure(engine(rules), RuleEngine))
    assert [r.rule_id for r in compiled.match(build_lookup(request({"k": "a"})))] == ["ok"]


def test_excludes_across_engines_use_the_settling_path() -> None:
    engines = [engine([rule("inc", [eq("addVar.k", "a")], ["kv://x", "kv://y"])], "a"),
               engine([rule("exc", [eq("addVar.k", "a")], [], exclude_memories=["kv://*"])], "b"),
               engine([rule("late", [eq("addVar.k", "a")], ["kv://z", "other"])], "c")]
    _, memories = both_paths(engines, request({"k": "a"}))
    assert memories == ["kv://x", "kv://y", "other"]


def test_engine_match_takes_a_plain_lookup() -> None:
    compiled = compile_engine(structure(engine([rule("r", [{"field": "addVar.k", "operator": "not_exists"}])]),
                                        RuleEngine))
    assert [r.rule_id for r in compiled.match({})] == ["r"]
    assert compiled.match({"addVar.k": 1}) == []


# Arbitrary rules over a small vocabulary, so that guards, blocks and absent values all occur.
FIELDS = ["addVar.a", "addVar.b", "scope.agent.agent_type"]
VALUES = st.sampled_from(["x", "y", "X", "1", "", 1, 1.0, True, False, 0])
OPERATORS = ["eq", "neq", "in", "not_in", "exists", "not_exists", "contains", "starts_with", "gt", "regex"]
leaves = st.builds(
    lambda f, op, v, vs, ic: {"field": f, "operator": op, "value": vs if op in ("in", "not_in") else v,
                              **({} if ic is None else {"ignore_case": ic})},
    st.sampled_from(FIELDS), st.sampled_from(OPERATORS), VALUES, st.lists(VALUES, max_size=3),
    st.none() | st.booleans())
conditions = st.recursive(leaves, lambda inner: st.fixed_dictionaries({"any": st.lists(inner, max_size=3)})
                          | st.fixed_dictionaries({"all": st.lists(inner, max_size=3)})
                          | st.fixed_dictionaries({"not": inner}), max_leaves=4)
rule_docs = st.builds(
    lambda i, when, priority, memories, exclude: rule(f"r{i}", when, memories, priority,
                                                      **({"exclude_memories": exclude} if exclude else {})),
    st.integers(0, 99), st.lists(conditions, max_size=3), st.integers(0, 2),
    st.lists(st.sampled_from(["m1", "m2", "m3"]), max_size=2), st.lists(st.sampled_from(["m2", "m*"]), max_size=1))
engine_docs = st.builds(lambda i, rules: engine(rules, f"e{i}"), st.integers(0, 3), st.lists(rule_docs, max_size=8))
variables = st.dictionaries(st.sampled_from(["a", "b"]), VALUES | st.lists(VALUES, max_size=2), max_size=2)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(engine_docs, max_size=3), variables, st.none() | VALUES)
def test_dispatch_agrees_with_the_explaining_path(engines: list[dict[str, Any]], addvars: dict[str, Any],
                                                  agent: Any) -> None:
    req = request(addvars, scopes={"agent": {"agent_type": agent}}, explicit_memory=["m2"])
    both_paths(engines, req)
