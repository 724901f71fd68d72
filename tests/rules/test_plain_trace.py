"""The plain path's trace written straight as JSON (rules/plain_trace.py) is exactly what the
converter writes of `RuleSet.evaluate`'s result: every mode, key order included, also for lookups
that hold a None (which only the plain path answers) and on a second use of the kept templates."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure, unstructure
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.evaluate import RuleSet
from context_assembly.rules.lookup import build_lookup
from context_assembly.rules.plain_trace import engine_results

from .test_properties import json_values, requests, rules

PLAIN = {"all": True, "matched": "matched", "none": False}  # explain mode -> RuleSet.evaluate's
NULLABLE = ["addVar.a", "addVar.b", "input.text", "scope.agent.agent_type"]
nulls = st.just({}) | st.dictionaries(st.sampled_from(NULLABLE), st.none(), min_size=1, max_size=3)


def as_json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)  # key order and 1 / 1.0 / true told apart


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rules | json_values, max_size=4), min_size=1, max_size=2), requests, nulls,
       st.sampled_from(sorted(PLAIN)))
def test_the_written_trace_is_the_converters(engine_docs: list[Any], request_doc: dict[str, Any],
                                             null: dict[str, None], mode: str) -> None:
    rule_set = RuleSet([compile_engine(structure({"id": f"e{i}", "rules": docs}, RuleEngine))
                        for i, docs in enumerate(engine_docs)])
    request = structure(request_doc, AssemblyRequest)
    lookup = {**build_lookup(request), **null}  # a caller's lookup may carry nulls: the plain path's
    for _ in range(2):  # templates made on first use, then reused
        expected = as_json(unstructure(rule_set.evaluate(request, lookup, PLAIN[mode])))
        assert as_json(rule_set.evaluate_wire(request, lookup, mode, later=lambda engines, mode: True)) == expected
        selection = rule_set._selection(None)
        written = engine_results(rule_set._match(selection, lookup), lookup, mode)
        assert as_json(written) == as_json(orjson.loads(expected)["engine_results"])


def test_answers_share_no_list_with_the_templates() -> None:
    rule = {"id": "r", "when": [{"field": "addVar.a", "operator": "exists"}], "then": {"add_memories": ["m"]}}
    rule_set = RuleSet([compile_engine(structure({"id": "e", "rules": [rule]}, RuleEngine))])
    request = structure({"additional_variables": {"a": 1}}, AssemblyRequest)
    lookup = {**build_lookup(request), "addVar.b": None}
    first = rule_set.evaluate_wire(request, lookup, "all")
    first["engine_results"][0]["rules"][0]["memories"].append("changed")
    first["engine_results"][0]["rules"][0]["conditions"][0]["result"] = "changed"
    again = rule_set.evaluate_wire(request, lookup, "all")
    assert again["engine_results"][0]["rules"][0]["memories"] == ["m"]
    assert again["engine_results"][0]["rules"][0]["conditions"][0]["result"] is True
