"""A compiled engine restored from its compile-cache entry answers exactly as a fresh compile."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure, unstructure
from context_assembly.registry.operators import all_spellings
from context_assembly.registry.values import MISSING
from context_assembly.rules.engine import compile_engine, compile_generated, constant, define_function
from context_assembly.rules.evaluate import RuleSet
from context_assembly.rules.persist import compile_entry, restore_engine

from .test_properties import json_values, requests, rules, same_json

MODES = ("none", "matched", "all")

# Rules that mostly read: every operator over the fields the requests carry, values of the kinds
# the operators take (and some they refuse), and every kind of action.
texts = st.sampled_from(["fix", "FIX", "a", "", "^f", "x$", "\\d+", "fi+x|y", "[", "(?=x)", "ä", "1", "2.5"])
values = texts | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.booleans() | st.none() \
    | st.lists(texts | st.integers(-2, 2), max_size=3)
memories = st.lists(st.sampled_from(["m1", "m2", "m3", "notes/*"]), max_size=2)
SUITED = {  # values each operator takes (a leaf sometimes gets any value instead, which it may refuse)
    "regex": texts, "matches": texts, "in": st.lists(texts, max_size=3), "not_in": st.lists(texts, max_size=3),
    **{op: st.integers(-3, 3) | st.sampled_from(["2", "x"]) for op in ("gt", "gte", "lt", "lte")},
}


@st.composite
def typed_leaf(draw: st.DrawFn) -> dict[str, Any]:
    operator = draw(st.sampled_from(all_spellings()))
    leaf = {"field": draw(st.sampled_from(["input.text", "addVar.a", "addVar.b", "scope.agent.agent_type",
                                           "memory.source"])), "operator": operator}
    if draw(st.integers(0, 9)):
        leaf["value"] = draw(SUITED.get(operator, texts) if draw(st.integers(0, 4)) else values)
    if not draw(st.integers(0, 3)):
        leaf["ignore_case"] = draw(st.booleans())
    return leaf


typed_conditions = st.recursive(
    typed_leaf(), lambda inner: st.fixed_dictionaries({"any": st.lists(inner, max_size=3)})
    | st.fixed_dictionaries({"all": st.lists(inner, max_size=3)}) | st.fixed_dictionaries({"not": inner}),
    max_leaves=5)
actions = st.fixed_dictionaries({"add_memories": memories}, optional={
    "exclude_memories": memories, "set_priority": st.dictionaries(st.sampled_from(["m1", "m2"]),
                                                                  st.sampled_from(["high", "low"]), max_size=1),
    "caps": st.lists(st.fixed_dictionaries({"target": st.sampled_from(["m1", "m2"]),
                                            "max_tokens": st.integers(1, 9)}), max_size=1),
    "boost": st.lists(st.fixed_dictionaries({"target": st.sampled_from(["m1", "m3"]),
                                             "weight": st.sampled_from([0.5, 2.0])}), max_size=1)})
typed_rules = st.fixed_dictionaries(
    {"id": st.sampled_from(["r1", "r2", "r3", ""]),
     # one leaf alone (every request reaches it) or a few conditions
     "when": st.tuples(typed_leaf()).map(list) | st.lists(typed_conditions, max_size=3),
     "then": actions},
    optional={"priority": st.integers(-2, 2) | st.floats(-2, 2, allow_nan=False), "name": st.text(max_size=3)})
typed_requests = st.builds(
    lambda a, b, agent, text: {"scope_variables": {"agent": {"agent_type": agent}},
                               "additional_variables": {k: v for k, v in (("a", a), ("b", b)) if v is not None},
                               "input": {"text": text}},
    values, values, texts, st.none() | texts | texts.map(lambda t: f"a {t} fiix") | st.text(max_size=6))


def restored(doc: dict[str, Any]) -> tuple[RuleSet, RuleSet]:
    """(fresh compile, restored from the entry of another compile) of one engine document."""
    _, entry = compile_entry(structure(doc, RuleEngine))
    assert entry is not None
    return (RuleSet([compile_engine(structure(doc, RuleEngine))]),
            RuleSet([restore_engine(entry, lambda: structure(doc, RuleEngine))]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(typed_rules, min_size=1, max_size=8), st.lists(rules | json_values, max_size=2),
       st.lists(typed_requests, min_size=1, max_size=3) | st.lists(requests, min_size=1, max_size=2),
       st.permutations(MODES), st.booleans())
def test_a_restored_engine_answers_as_a_fresh_compile(rule_docs: list[Any], odd_docs: list[Any],
                                                       request_docs: list[dict], modes: list[str],
                                                       enabled: bool) -> None:
    doc = {"id": "e", "enabled": enabled, "rules": rule_docs + odd_docs}
    fresh, cached = restored(doc)
    for request_doc in request_docs:
        request = structure(request_doc, AssemblyRequest)
        for mode in modes:  # in any order: what a restored engine makes on first use, any mode first
            assert same_json(cached.evaluate_wire(request, explain=mode), fresh.evaluate_wire(request, explain=mode))
        for explain in (False, "matched", True):
            assert same_json(unstructure(cached.evaluate(request, explain=explain)),
                             unstructure(fresh.evaluate(request, explain=explain)))
        named = structure({**request_doc, "rule_engine_ids": ["e"]}, AssemblyRequest)
        assert same_json(cached.evaluate_wire(named, explain="none"), fresh.evaluate_wire(named, explain="none"))
    source = "memory://x"
    assert [r.ref for r in cached.per_source_matches(None, {}, source)] == \
        [r.ref for r in fresh.per_source_matches(None, {}, source)]


def test_a_restored_engine_structures_its_rules_only_when_read() -> None:
    doc = {"id": "e", "rules": [
        {"id": "r", "when": [{"field": "input.text", "operator": "regex", "value": "fi+x"}],
         "then": {"add_memories": ["m"]}}]}
    made: list[RuleEngine] = []

    def source() -> RuleEngine:
        made.append(structure(doc, RuleEngine))
        return made[-1]

    _, entry = compile_entry(structure(doc, RuleEngine))
    assert entry is not None
    engine = restore_engine(entry, source)
    rule_set = RuleSet([engine])
    request = structure({"input": {"text": "a fiiix"}}, AssemblyRequest)
    wire = rule_set.evaluate_wire(request, explain="none")
    assert [r["rule_id"] for r in wire["engine_results"][0]["rules"]] == ["r"] and wire["matched_memories"] == ["m"]
    assert made == []  # the matcher and the matched templates came from the entry alone
    assert engine.rules[0].rule.id == "r" and engine.engine is made[0]  # structured once, on first read
    rule_set.evaluate_wire(request, explain="all")
    assert len(made) == 1


def test_an_entry_that_is_not_one_raises_for_the_caller_to_compile() -> None:
    import marshal

    for payload in (b"", b"\x00garbage", marshal.dumps(("engine/0", "e")), marshal.dumps([1, 2, 3]),
                    marshal.dumps(("engine/1", "e", True, "not code", {}, {}, [], []))):
        try:
            restore_engine(payload, lambda: RuleEngine())
        except Exception:  # noqa: BLE001 (any error: the loader then compiles)
            continue
        raise AssertionError(f"{payload!r} restored")


def test_constants_are_bound_in_nested_code_too() -> None:
    """A placeholder constant inside a comprehension or a lambda of generated code is bound as the
    function's own are (a nested code object keeps its own constants)."""
    source = (f"def f(xs):\n    g = lambda x: x is {constant('M')}\n"
              f"    return [x for x in xs if x != {constant('c')}], g(xs[0]), {constant('c')}")
    namespace: dict[str, Any] = {"M": MISSING, "c": 7}
    f = define_function(compile_generated(source), namespace, "f")
    assert f([MISSING, 7, 8]) == ([MISSING, 8], True, 7)


def test_generated_matchers_read_plain_constants_as_constants() -> None:
    """The values a generated test compares with, MISSING and the guards' dispatch tables are
    constants of the matcher's code (no global load per test), fresh and restored from an entry;
    a regex's remembered answers and the operators' predicates stay globals (a restored matcher's
    stand-ins replace themselves there)."""
    doc = {"id": "e", "rules": [
        {"id": "r1", "when": [{"field": "input.text", "operator": "contains", "value": "Fix"},
                              {"field": "addVar.a", "operator": "gt", "value": 2}],
         "then": {"add_memories": ["m1"]}},
        {"id": "r2", "when": [{"field": "scope.agent.agent_type", "operator": "eq", "value": "coder"},
                              {"field": "input.text", "operator": "regex", "value": "^fi"}],
         "then": {"add_memories": ["m2"]}},
        {"id": "r3", "when": [{"field": "addVar.b", "operator": "not_exists"}], "then": {"add_memories": ["m3"]}},
    ]}
    fresh, restored_set = restored(doc)
    for rule_set in (fresh, restored_set):
        code = rule_set.engines[0].matcher.__code__
        constants = [c for c in code.co_consts if not isinstance(c, int | type(None))]
        assert "fix" in constants and 2 in code.co_consts  # contains folds case; gt's bound
        assert any(c is MISSING for c in constants)
        assert any(isinstance(c, dict) and c.get("coder") == 0 for c in constants)  # the guard's table
        assert not [name for name in code.co_names if name == "M" or name.startswith(("cp", "D"))
                    and rule_set.engines[0].matcher.__globals__[name].__class__ in (str, int, dict)]
        assert any(name.startswith("cp") for name in code.co_names)  # the regex's memo, a global
        for request, expected in [
            ({"additional_variables": {"a": 3}, "input": {"text": "please FIX"}}, ["r1", "r3"]),
            ({"additional_variables": {"a": 3.5, "b": 1}, "input": {"text": "fix"},
              "scope_variables": {"agent": {"agent_type": "coder"}}}, ["r1", "r2"]),
            ({"additional_variables": {"a": True}, "input": {"text": "fix"}}, ["r3"]),  # a bool is no number
            ({"additional_variables": {"a": "3"}, "input": {"text": "fix"}}, ["r1", "r3"]),  # a numeric string
        ]:
            result = rule_set.evaluate_wire(structure(request, AssemblyRequest), explain="none")
            assert [r["rule_id"] for r in result["engine_results"][0]["rules"]] == expected
