"""Properties over arbitrary input: evaluation never raises, and both paths agree."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure, unstructure
from context_assembly.registry.operators import all_spellings
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.evaluate import RuleSet

FIELDS = ["addVar.a", "addVar.b", "input.text", "scope.agent.agent_type", "task.text", "memory.source", "nope"]
scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, width=32) | \
    st.sampled_from(["", "a", "A", "1", "2.5", "fix", "(a+)+$", "[", "\\d", "(?=x)", "ä"]) | st.text(max_size=5)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)


def leaf() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"field": st.sampled_from(FIELDS) | json_values, "operator": st.sampled_from(all_spellings()) | json_values},
        optional={"value": json_values, "ignore_case": st.booleans() | json_values},
    )


conditions = st.recursive(
    leaf() | json_values,
    lambda inner: st.fixed_dictionaries({"any": st.lists(inner, max_size=3)})
    | st.fixed_dictionaries({"all": st.lists(inner, max_size=3) | json_values})
    | st.fixed_dictionaries({"not": inner}),
    max_leaves=8,
)
rules = st.fixed_dictionaries(
    {"id": st.text(max_size=4), "when": st.lists(conditions, max_size=4) | json_values},
    optional={"priority": st.integers(-3, 3) | json_values,
              "then": st.fixed_dictionaries({"add_memories": st.lists(st.sampled_from(["m1", "m2", "m3"]))})
              | json_values},
)
variables = st.dictionaries(st.sampled_from(["a", "b", "turn_count"]), json_values, max_size=3)
requests = st.builds(lambda v, t, agent: {"scope_variables": {"agent": {"agent_type": agent}},
                                          "additional_variables": v, "input": {"text": t}},
                     variables, st.none() | st.text(max_size=8), json_values)


def matched_rule_ids(result: Any) -> list[str]:
    return [f"{e.engine_id}/{r.rule_id}" for e in result.engine_results for r in e.rules if r.matched]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rules | json_values, max_size=4), requests)
def test_evaluation_never_raises_and_both_paths_agree(rule_docs: list[Any], request_doc: dict) -> None:
    engine = structure({"id": "e", "rules": rule_docs}, RuleEngine)
    rule_set = RuleSet([compile_engine(engine)])
    request = structure(request_doc, AssemblyRequest)
    fast = rule_set.evaluate(request, explain=False)
    slow = rule_set.evaluate(request, explain=True)
    assert fast.matched_memories == slow.matched_memories
    assert matched_rule_ids(fast) == matched_rule_ids(slow)
    assert set(fast.missing_variables) <= set(fast.variables_used)


def same_json(a: Any, b: Any) -> bool:
    """Equal as the client reads them: key order, and 1 / 1.0 / true told apart."""
    return json.dumps(a) == json.dumps(b)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rules | json_values, max_size=4), min_size=1, max_size=2), requests,
       st.sampled_from([("all", True), ("matched", "matched"), ("none", False)]))
def test_the_compiled_trace_equals_the_plain_one(engine_docs: list[Any], request_doc: dict,
                                                 modes: tuple[str, Any]) -> None:
    rule_set = RuleSet([compile_engine(structure({"id": f"e{i}", "rules": docs}, RuleEngine))
                        for i, docs in enumerate(engine_docs)])
    request = structure(request_doc, AssemblyRequest)
    mode, plain = modes
    for _ in range(2):  # built on first use, then reused
        plain_json = unstructure(rule_set.evaluate(request, explain=plain))
        assert same_json(rule_set.evaluate_wire(request, explain=mode), plain_json)


def test_the_compiled_trace_shares_a_condition_between_rules_without_mixing_them() -> None:
    when = [{"field": "addVar.a", "operator": "eq", "value": 1}]
    engine = structure({"id": "e", "rules": [
        {"id": "x", "when": when, "then": {"add_memories": ["m1"]}},
        {"id": "y", "when": [*when, {"any": [{"field": "addVar.b", "operator": "exists"}]}]},
        {"id": "z", "when": [{"field": "addVar.a", "operator": "eq", "value": 1.0}]},
        {"id": "w", "when": [{"field": "addVar.a", "operator": "bogus"}]},
    ]}, RuleEngine)
    rule_set = RuleSet([compile_engine(engine)])
    for variables in ({"a": 1}, {"a": 2, "b": "x"}, {}):
        request = structure({"scope_variables": {}, "additional_variables": variables}, AssemblyRequest)
        for mode, plain in (("all", True), ("matched", "matched"), ("none", False)):
            wire = rule_set.evaluate_wire(request, explain=mode)
            assert same_json(wire, unstructure(rule_set.evaluate(request, explain=plain)))
    rules = rule_set.evaluate_wire(structure({"scope_variables": {}, "additional_variables": {"a": 1}},
                                             AssemblyRequest))["engine_results"][0]["rules"]
    assert [r["matched"] for r in rules] == [True, False, True, False]
    assert type(rules[2]["conditions"][0]["value"]) is float and type(rules[0]["conditions"][0]["value"]) is int
    assert "unknown operator" in rules[3]["conditions"][0]["error"]


def test_absurdly_deep_nesting_is_refused_not_crashed() -> None:
    deep: Any = {"field": "addVar.a", "operator": "exists"}
    for _ in range(5000):
        deep = {"not": deep}
    engine = structure({"id": "e", "rules": [{"id": "deep", "when": [deep]}, {"id": "ok", "when": []}]}, RuleEngine)
    result = RuleSet([compile_engine(engine)]).evaluate(structure({"scope_variables": {}}, AssemblyRequest))
    assert matched_rule_ids(result) == ["e/ok"]
    deep_rule = next(r for r in result.engine_results[0].rules if r.rule_id == "deep")
    assert "nested too deeply" in (deep_rule.error or "")
