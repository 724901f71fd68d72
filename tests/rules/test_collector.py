"""The full trace's answer (one dict per condition per rule) is built with the cyclic collector
paused, and the collector is left exactly as it was found, also when evaluation fails."""

from __future__ import annotations

import gc

import pytest

from context_assembly.collector import paused
from context_assembly.model import RuleEngine, structure
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.evaluate import RuleSet
from tests.collector import young_collections

from .support import engine, request, rule

# 2,000 rules of 3 conditions: building their full trace starts ~5 collections unless paused
RULES = [rule(f"r{i}", [{"field": "addVar.phase", "operator": "eq", "value": f"p{i % 7}"},
                        {"field": "addVar.n", "operator": "eq", "value": i % 5},
                        {"field": "addVar.tag", "operator": "eq", "value": "a"}]) for i in range(2000)]


def test_the_full_trace_is_built_without_collections(collector: None) -> None:
    ruleset = RuleSet([compile_engine(structure(engine(RULES), RuleEngine))])
    req = request({"phase": "p3", "n": 2, "tag": "a"})
    ruleset.evaluate_wire(req, explain="all")  # the trace program is made (and frozen) once
    gc.collect()
    before = young_collections()
    answer = ruleset.evaluate_wire(req, explain="all")
    during = young_collections() - before
    rules = answer["engine_results"][0]["rules"]
    assert len(rules) == 2000 and [r["rule_id"] for r in rules if r["matched"]] == \
        [f"r{i}" for i in range(2000) if i % 7 == 3 and i % 5 == 2]
    assert during <= 1  # (the one: after the pause, on the next allocation)
    assert gc.isenabled()


def test_the_collector_is_left_as_found_also_on_errors(collector: None) -> None:
    with pytest.raises(ZeroDivisionError), paused():
        assert not gc.isenabled()
        _ = 1 / 0
    assert gc.isenabled()
    gc.disable()
    with paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
    with pytest.raises(ZeroDivisionError), paused():
        _ = 1 / 0
    assert not gc.isenabled()
