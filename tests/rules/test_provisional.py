"""An engine answering through its interpreted matcher (before its generated one is compiled, as a
cold start answers) answers exactly as a compiled one, in every explain mode and trace format."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure, unstructure
from context_assembly.rules.background import BackgroundCompiler
from context_assembly.rules.compile import LeafMemo
from context_assembly.rules.engine import compile_engine, compile_matcher, provisional_engine
from context_assembly.rules.evaluate import RuleSet
from context_assembly.rules.lookup import build_lookup, complete
from context_assembly.rules.persist import compile_entry, entry_of, restore_engine

from .test_compile_cache import MODES, typed_requests, typed_rules
from .test_properties import json_values, requests, rules, same_json

# conditions whose values Python finds equal (1 == 1.0 == True, 0.0 == -0.0) but a trace tells apart
SIMILAR_VALUES = [1, 1.0, True, 0.0, -0.0, "1", ["a"], [1], None]  # [1]: not a simple value, never shared
SIMILAR = [{"id": f"s{i}", "when": [{"field": "n", "operator": "equal", "value": value}],
            "then": {"add_memories": ["m"]}} for i, value in enumerate(SIMILAR_VALUES)]


def everything(rule_set: RuleSet, request_doc: dict[str, Any], modes: list[str]) -> list[str]:
    """What a client reads of one request: every mode in both trace formats, and the plain path."""
    request = structure(request_doc, AssemblyRequest)
    out = [rule_set.evaluate_wire(request, explain=mode, trace_format=form) for mode in modes
           for form in ("full", "compact")]
    out += [unstructure(rule_set.evaluate(request, explain=explain)) for explain in (False, "matched", True)]
    named = structure({**request_doc, "rule_engine_ids": ["e"]}, AssemblyRequest)
    out.append(rule_set.evaluate_wire(named, explain="none"))
    out.append([r.ref for r in rule_set.per_source_matches(None, {}, "memory://x")])
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(typed_rules, min_size=1, max_size=8), st.lists(rules | json_values, max_size=2),
       st.lists(typed_requests, min_size=1, max_size=3) | st.lists(requests, min_size=1, max_size=2),
       st.permutations(MODES), st.booleans())
def test_an_interpreted_engine_answers_as_a_compiled_one(rule_docs: list[Any], odd_docs: list[Any],
                                                         request_docs: list[dict], modes: list[str],
                                                         enabled: bool) -> None:
    doc = {"id": "e", "enabled": enabled, "rules": rule_docs + odd_docs}
    compiled = compile_engine(structure(doc, RuleEngine))
    provisional = provisional_engine(structure(doc, RuleEngine))
    assert not provisional.generated and compiled.generated
    assert set(provisional.keys) == set(compiled.keys)  # the variables an answer reports
    fresh, interpreted = RuleSet([compiled]), RuleSet([provisional])
    for request_doc in request_docs:
        values = complete(build_lookup(structure(request_doc, AssemblyRequest)), compiled.keys)
        assert provisional.matcher(values) == compiled.matcher(values)
        assert same_json(everything(interpreted, request_doc, modes), everything(fresh, request_doc, modes))
    emitter = compile_matcher(provisional)  # swapped in place, as the background compiler does
    assert provisional.generated
    assert entry_of(provisional, emitter) == compile_entry(structure(doc, RuleEngine))[1]  # the same cache entry
    for request_doc in request_docs:
        assert same_json(everything(interpreted, request_doc, modes), everything(fresh, request_doc, modes))
    # leaves shared with another engine of the same load, as the loader shares them: the same
    # answers interpreted, generated, and restored from the entry written (its code may differ)
    leaves: LeafMemo = {}
    provisional_engine(structure({"id": "f", "rules": [*reversed(rule_docs), *SIMILAR]}, RuleEngine), leaves)
    shared = provisional_engine(structure(doc, RuleEngine), leaves)
    for request_doc in request_docs:
        assert same_json(everything(RuleSet([shared]), request_doc, modes), everything(fresh, request_doc, modes))
    entry = entry_of(shared, compile_matcher(shared))
    assert entry is not None
    restored = restore_engine(entry, lambda: structure(doc, RuleEngine))
    for request_doc in request_docs:
        assert same_json(everything(RuleSet([shared]), request_doc, modes), everything(fresh, request_doc, modes))
        assert same_json(everything(RuleSet([restored]), request_doc, modes), everything(fresh, request_doc, modes))


def test_leaves_equal_in_python_but_not_in_json_are_never_shared() -> None:
    leaves: LeafMemo = {}
    engines = [provisional_engine(structure({"id": f"e{i}", "rules": SIMILAR}, RuleEngine), leaves) for i in range(2)]
    request = {"additional_variables": {"n": 1, "tags": ["a"]}}
    for engine in engines:
        plain = compile_engine(structure({"id": engine.id, "rules": SIMILAR}, RuleEngine))
        assert same_json(everything(RuleSet([engine]), request, MODES), everything(RuleSet([plain]), request, MODES))
    [first, second] = [[rule.conditions.nodes[0] for rule in engine.rules] for engine in engines]
    assert [a is b for a, b in zip(first, second, strict=True)] == [v != [1] for v in SIMILAR_VALUES]  # made once
    assert len({id(node) for node in first}) == len(SIMILAR)  # 1, 1.0, true, 0.0, -0.0, "1", [..]: all apart


def test_each_condition_holds_as_it_explains() -> None:
    doc = {"id": "e", "rules": [{"id": "r", "when": [
        {"any": [{"field": "input.text", "operator": "regex", "value": "fi+x"},
                 {"not": {"field": "addVar.a", "operator": "exists"}}]},
        {"all": [{"field": "addVar.b", "operator": "neq", "value": 2}, {"all": []}]}, {"any": []}],
        "then": {"add_memories": ["m"]}}]}
    engine = provisional_engine(structure(doc, RuleEngine))
    [rule] = engine.rules
    for variables in ({}, {"a": 1}, {"b": 2}, {"a": 1, "b": 3}):
        lookup = complete(build_lookup(structure({"additional_variables": variables, "input": {"text": "fiix"}},
                                                 AssemblyRequest)), rule.conditions.keys)
        assert [node.holds(lookup) for node in rule.conditions.nodes] == \
            [r.result for r in rule.conditions.explain(lookup)[1]]


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rule-compiler"]


def test_the_background_compiler_runs_jobs_in_order_and_ends_its_thread() -> None:
    compiler, done = BackgroundCompiler(), []
    compiler.submit([lambda i=i: done.append(i) for i in range(5)])
    assert compiler.wait(10) and done == [0, 1, 2, 3, 4]
    assert not compiler.busy and not _threads()  # no thread left while there is nothing to do
    compiler.submit([lambda: done.append(5)])  # a new batch starts a new thread
    assert compiler.wait(10) and done[-1] == 5 and not _threads()


def test_a_failing_job_is_logged_and_the_next_ones_run(caplog: pytest.LogCaptureFixture) -> None:
    compiler, done = BackgroundCompiler(), []

    def fails() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR):
        compiler.submit([fails, lambda: done.append(1)])
        assert compiler.wait(10)
    assert done == [1] and "in the background failed" in caplog.text


def test_close_drops_queued_jobs_waits_for_the_running_one_and_refuses_more() -> None:
    compiler, gate, started, done = BackgroundCompiler(), threading.Event(), threading.Event(), []

    def blocking() -> None:
        started.set()
        gate.wait(10)
        done.append("running")

    compiler.submit([blocking, *(lambda i=i: done.append(i) for i in range(3))])
    assert started.wait(10)
    closing = threading.Thread(target=compiler.close)
    closing.start()
    while compiler._jobs:  # close clears the queue before it waits for the running job
        closing.join(0.01)
    assert closing.is_alive()  # waiting for the running job
    gate.set()
    closing.join(10)
    assert not closing.is_alive() and done == ["running"] and not _threads()
    compiler.submit([lambda: done.append("late")])
    assert compiler.wait(1) and done == ["running"]


def test_requests_running_cannot_stop_the_compiling() -> None:
    compiler, done = BackgroundCompiler(), []
    with compiler.foreground(), compiler.foreground():  # requests without end: each job waits a while, then runs
        compiler.submit([lambda i=i: done.append(i) for i in range(3)])
        assert compiler.wait(30) and done == [0, 1, 2]
    compiler.submit([lambda: done.append(3)])
    assert compiler.wait(30) and done[-1] == 3
