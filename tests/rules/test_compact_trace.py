"""The compact trace (`trace_format: "compact"`): the client's expansion of it is exactly the full
answer, on arbitrary engines and requests, as both travel (through JSON)."""

from __future__ import annotations

import gc
import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.client.compact_trace import LayoutError, TraceLayouts, unpack
from context_assembly.model import AssemblyRequest, RuleEngine, structure
from context_assembly.rules.compact import layout, pack
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.evaluate import RuleSet
from context_assembly.rules.lookup import build_lookup

from .test_properties import json_values, requests, rules


def wire(value: Any) -> Any:
    """As the other side reads it."""
    return orjson.loads(orjson.dumps(value))


def same_json(a: Any, b: Any) -> bool:
    """Equal key for key, in order, with 1 / 1.0 / true told apart."""
    return json.dumps(a) == json.dumps(b)


def rule_set_of(engine_docs: list[Any], disabled: int | None = None) -> RuleSet:
    return RuleSet([compile_engine(structure({"id": f"e{i}", "enabled": i != disabled, "rules": docs}, RuleEngine))
                    for i, docs in enumerate(engine_docs)])


def layouts_of(rule_set: RuleSet) -> TraceLayouts:
    layouts = TraceLayouts()
    for engine in rule_set.engines:
        layouts.add(wire(layout(engine).document))
    return layouts


def check(rule_set: RuleSet, request: AssemblyRequest, lookup: dict[str, Any] | None = None) -> None:
    layouts = layouts_of(rule_set)
    for mode in ("all", "matched", "none"):
        full = wire(rule_set.evaluate_wire(request, lookup, explain=mode))
        compact = wire(rule_set.evaluate_wire(request, lookup, explain=mode, trace_format="compact"))
        assert same_json(layouts.expand(compact), full)
        assert compact["trace_format"] == "compact" and compact["explain"] == mode
        assert ("actual_values" in compact) is (mode != "none")
        for entry in compact["engine_results"]:
            assert list(entry) == ["engine_id", "enabled", "trace"]  # the rules are the layout's
            assert entry["trace"]["matched"] == [i for i, rule in enumerate(
                full_rules(rule_set, entry["engine_id"], request, lookup)) if rule["matched"]]
            assert ("outcomes" in entry["trace"]) is (mode != "none")
        assert len(orjson.dumps(compact)) <= len(orjson.dumps(full)) + 200 * len(compact["engine_results"]) + 500


def full_rules(rule_set: RuleSet, engine_id: str, request: AssemblyRequest, lookup: dict[str, Any] | None) -> Any:
    """Every rule of the engine as `explain: "all"` lists them, in the layout's (evaluation) order."""
    answer = wire(rule_set.evaluate_wire(request, lookup, explain="all"))
    return next(entry["rules"] for entry in answer["engine_results"] if entry["engine_id"] == engine_id)


def _json(value: Any) -> bool:
    """Whether a value holds no float JSON cannot write (infinity: orjson writes it as null, so the
    full answer's `actual` reads null where the compact one, expanded, has the value's place)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        value = list(value.values())
    return all(map(_json, value)) if isinstance(value, list) else True


# lookups as the methods make them from JSON requests, plus nulls (an in-process caller's)
null_variables = st.dictionaries(st.sampled_from(["a", "b", "turn_count"]), st.none() | json_values.filter(_json),
                                 max_size=3)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rules | json_values, max_size=4), min_size=1, max_size=3), requests,
       st.none() | st.integers(0, 2), st.none() | st.lists(st.sampled_from(["e0", "e1", "e2", "nope"]), max_size=3))
def test_the_expanded_compact_trace_is_the_full_one(engine_docs: list[Any], request_doc: dict,
                                                    disabled: int | None, engine_ids: list[str] | None) -> None:
    rule_set = rule_set_of(engine_docs, disabled)
    request = structure({**request_doc, "rule_engine_ids": engine_ids}, AssemblyRequest)
    for _ in range(2):  # the trace programs and layouts are built on first use, then reused
        check(rule_set, request)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rules | json_values, max_size=4), min_size=1, max_size=2), null_variables)
def test_a_null_value_in_the_lookup_expands_as_the_plain_path_answers_it(engine_docs: list[Any],
                                                                         variables: dict[str, Any]) -> None:
    """A lookup holding None (an in-process caller's; the methods' lookups leave nulls out) takes
    the plain path: present, without `actual`."""
    rule_set = rule_set_of(engine_docs)
    request = structure({"scope_variables": {}}, AssemblyRequest)
    check(rule_set, request, {f"addVar.{k}": v for k, v in variables.items()})


NESTED = [
    {"id": "nested", "priority": 2, "name": "nested groups", "when": [
        {"field": "addVar.a", "operator": "eq", "value": 1},
        {"any": [{"field": "addVar.b", "operator": "exists"},
                 {"not": {"field": "input.text", "operator": "contains", "value": "X", "ignore_case": True}},
                 {"all": []}]}],
     "then": {"add_memories": ["m1"], "exclude_memories": ["m2"]}},
    {"id": "shared", "when": [{"field": "addVar.a", "operator": "eq", "value": 1}], "then": {"add_memories": ["m3"]}},
    {"id": "float", "when": [{"field": "addVar.a", "operator": "in", "value": [1.0, "1"]}]},
    {"id": "broken", "when": [{"field": "addVar.a", "operator": "bogus", "value": [1]}, {"weird": True}]},
    {"id": "per-source", "when": [{"field": "memory.source", "operator": "starts_with", "value": "kv://"},
                                  {"field": "addVar.b", "operator": "eq", "value": "x"}]},
    {"id": "absent", "when": [{"field": "addVar.c", "operator": "not_exists"}]},
]


@pytest.mark.parametrize("variables", [{"a": 1, "b": "x"}, {"a": 1.0}, {"a": 2, "b": None}, {},
                                       {"a": 1, "b": {"deep": [1, {"x": None}]}}])
def test_nested_groups_shared_and_malformed_conditions_and_per_source_rules(variables: dict[str, Any]) -> None:
    rule_set = rule_set_of([NESTED, [{"id": "other", "when": [{"field": "addVar.b", "operator": "eq", "value": "x"}]}]])
    request = structure({"scope_variables": {}, "additional_variables": variables, "input": {"text": "an x"}},
                        AssemblyRequest)
    check(rule_set, request)
    check(rule_set, request, {**build_lookup(request), "addVar.c": None})
    compact = wire(rule_set.evaluate_wire(request, trace_format="compact"))
    values = {k: v for k, v in build_lookup(request).items() if k in ("addVar.a", "addVar.b", "input.text")}
    assert compact["actual_values"] == wire(values)  # each value once, only the variables conditions read


def test_the_expanded_answer_shares_nothing_with_the_cache_or_another_answer() -> None:
    rule_set = rule_set_of([NESTED])
    layouts = layouts_of(rule_set)
    request = structure({"scope_variables": {}, "additional_variables": {"a": 3}}, AssemblyRequest)
    compact = wire(rule_set.evaluate_wire(request, trace_format="compact"))
    first = layouts.expand(compact)
    rule = first["engine_results"][0]["rules"][3]
    rule["conditions"][0]["value"].append("changed")
    rule["memories"].append("changed")
    assert same_json(layouts.expand(compact), wire(rule_set.evaluate_wire(request)))
    request = structure({"scope_variables": {}, "additional_variables": {"a": 1}}, AssemblyRequest)
    packed = wire(rule_set.evaluate_wire(request, explain="none", trace_format="compact"))
    expanded = layouts.expand(packed)
    assert [r["rule_id"] for r in expanded["engine_results"][0]["rules"]] == ["nested", "shared", "float", "absent"]
    for rule in expanded["engine_results"][0]["rules"]:  # a "none" answer's rules, fresh each time
        for key in ("conditions", "memories", "excluded"):
            rule[key].append("changed")
    assert same_json(layouts.expand(packed), wire(rule_set.evaluate_wire(request, explain="none")))


def test_the_layout_key_follows_the_content() -> None:
    first, again = rule_set_of([NESTED]), rule_set_of([NESTED])
    edited = rule_set_of([[*NESTED[:-1], {**NESTED[-1], "name": "renamed"}]])
    key = layout(first.engines[0]).key
    assert layout(again.engines[0]).key == key  # recompiled, same content: same key (a client's cache holds)
    assert layout(edited.engines[0]).key != key


def test_an_answer_needs_its_own_layout() -> None:
    rule_set, edited = rule_set_of([NESTED]), rule_set_of([NESTED[:-1]])
    request = structure({"scope_variables": {}, "additional_variables": {"a": 1}}, AssemblyRequest)
    compact = wire(rule_set.evaluate_wire(request, trace_format="compact"))
    layouts = TraceLayouts()
    assert layouts.missing(compact) == [("e0", layout(rule_set.engines[0]).key)]
    with pytest.raises(LayoutError, match="no trace layout"):
        layouts.expand(compact)
    layouts.add(wire(layout(edited.engines[0]).document))  # another version of the engine
    assert layouts.missing(compact) == [("e0", layout(rule_set.engines[0]).key)]
    with pytest.raises(LayoutError, match="no trace layout"):
        layouts.expand(compact)
    layouts.add(wire(layout(rule_set.engines[0]).document))
    assert layouts.missing(compact) == []
    assert same_json(layouts.expand(compact), wire(rule_set.evaluate_wire(request)))
    full = wire(rule_set.evaluate_wire(request))
    assert layouts.expand(full) is full  # not compact: as it is


def test_malformed_layouts_and_outcomes_are_refused_clearly() -> None:
    document = wire(layout(rule_set_of([NESTED]).engines[0]).document)
    forward = {**document, "conditions": [{"group": "any", "conditions": [1]}, *document["conditions"]]}
    with pytest.raises(LayoutError, match="must come before"):
        TraceLayouts().add(forward)
    with pytest.raises(LayoutError, match="malformed"):
        TraceLayouts().add({k: v for k, v in document.items() if k != "rules"})
    with pytest.raises(LayoutError, match="must be lists"):
        TraceLayouts().add({**document, "rules": [{**document["rules"][0], "memories": "m1"}]})
    with pytest.raises(LayoutError, match="bytes for"):
        unpack(pack([True] * 9), 8)
    with pytest.raises(LayoutError, match="beyond"):
        unpack(pack([True] * 8), 7)
    with pytest.raises(LayoutError, match="base64"):
        unpack("not base64!", 3)


@given(st.lists(st.booleans(), max_size=300))
def test_bits_round_trip(outcomes: list[bool]) -> None:
    assert unpack(pack(outcomes), len(outcomes)) == outcomes


def test_expanding_leaves_the_collector_as_it_found_it() -> None:
    rule_set = rule_set_of([NESTED])
    layouts = layouts_of(rule_set)
    compact = wire(rule_set.evaluate_wire(structure({"scope_variables": {}}, AssemblyRequest),
                                          trace_format="compact"))
    layouts.expand(compact)
    assert gc.isenabled()
    gc.disable()
    try:
        layouts.expand(compact)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(LayoutError):
        entry = compact["engine_results"][0]
        layouts.expand({**compact, "engine_results": [{**entry, "trace": {**entry["trace"], "matched": [99]}}]})
    assert gc.isenabled()
