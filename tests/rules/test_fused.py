"""Fused matchers (rules/fused.py): the same hits as each engine's own matcher on arbitrary engines
and requests, in groups of any size; kept in the compile cache and read back by a warm start
without parsing a rule file; made by the loader's background compiler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure
from context_assembly.rules import fused
from context_assembly.rules.cache import CompileCache
from context_assembly.rules.engine import _Emitter, compile_engine
from context_assembly.rules.evaluate import RuleSet
from context_assembly.rules.lookup import build_lookup, complete
from context_assembly.workspace.loader import WorkspaceLoader

from ..workspace.builder import write
from .test_compile_cache import typed_requests
from .test_properties import json_values, requests, rules

REQUEST = structure({"additional_variables": {"a": 2}, "input": {"text": "please fix"}}, AssemblyRequest)


def engine_doc(name: str, count: int) -> dict[str, Any]:
    return {"id": name, "rules": [
        {"id": f"r{i}", "when": [{"field": "addVar.a", "operator": "gt", "value": i % 3},
                                 {"field": "input.text", "operator": "contains", "value": "fix"}],
         "then": {"add_memories": [f"{name}-{i}"]}} for i in range(count)]}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rules | json_values, max_size=5), min_size=2, max_size=5), requests, st.integers(1, 12))
def test_fused_matchers_give_each_engines_hits(engine_docs: list[Any], request_doc: dict[str, Any],
                                              chunk: int) -> None:
    rule_set = RuleSet([compile_engine(structure({"id": f"e{i}", "rules": docs}, RuleEngine))
                        for i, docs in enumerate(engine_docs)])
    request = structure(request_doc, AssemblyRequest)
    lookup = build_lookup(request)
    selection = rule_set._selection(None)
    separate = rule_set._match(selection, lookup)
    expected = orjson.dumps(rule_set.evaluate_wire(request, explain="all"))
    was, fused.CHUNK_RULES = fused.CHUNK_RULES, chunk  # groups of one engine up to all of them
    try:
        assert rule_set.fuse()
    finally:
        fused.CHUNK_RULES = was
    assert selection.fused is not None
    assert rule_set._match(selection, lookup) == separate
    assert orjson.dumps(rule_set.evaluate_wire(request, explain="all")) == expected


def test_hits_dispatched_by_a_guard_come_in_rule_order() -> None:
    guarded = {"id": "g", "when": [{"field": "scope.agent.agent_type", "operator": "eq", "value": "coder"}],
               "then": {"add_memories": ["guarded"]}}
    unguarded = {"id": "u", "when": [{"field": "input.text", "operator": "contains", "value": "fix"}],
                 "then": {"add_memories": ["unguarded"]}}
    rule_set = RuleSet([compile_engine(structure({"id": name, "rules": [{**guarded, "priority": 9}, unguarded]},
                                                 RuleEngine)) for name in ("a", "b")])
    request = structure({"scope_variables": {"agent": {"agent_type": "coder"}}, "input": {"text": "fix"}},
                        AssemblyRequest)
    assert rule_set.fuse()
    found = rule_set._match(rule_set._selection(None), build_lookup(request))
    assert [hits for _, hits in found] == [[0, 1], [0, 1]]  # the guarded rule's block runs after the others
    assert rule_set.evaluate_wire(request, explain="none")["matched_memories"] == ["guarded", "unguarded"]


def test_a_group_dispatches_each_guard_variable_once_for_all_its_engines() -> None:
    """Three engines guarded on the same variable (by `eq` and by `in`): one table lookup serves
    them all, and each engine still gets its own hits, in its rules' order."""
    def guarded(value: Any, memory: str, priority: int) -> dict[str, Any]:
        operator = "in" if isinstance(value, list) else "eq"
        return {"id": memory, "priority": priority, "then": {"add_memories": [memory]},
                "when": [{"field": "scope.agent.agent_type", "operator": operator, "value": value}]}
    docs = [[guarded("coder", "a1", 1), guarded("tester", "a2", 2)],
            [guarded(["coder", "tester"], "b1", 5), guarded("coder", "b2", 1)],
            [guarded("writer", "c1", 1), {"id": "c2", "then": {"add_memories": ["c2"]},
                                         "when": [{"field": "input.text", "operator": "contains", "value": "fix"}]}]]
    engines = [compile_engine(structure({"id": f"e{i}", "rules": rules}, RuleEngine)) for i, rules in enumerate(docs)]
    emitter = _Emitter()
    function = emitter.build_fused([engine.rules for engine in engines])
    assert sum(name.startswith("D") for name in emitter.globals) == 1  # one dispatch table
    for agent_type in ("coder", "tester", "writer", "other", None):
        request = structure({"scope_variables": {"agent": {"agent_type": agent_type}}, "input": {"text": "fix"}},
                            AssemblyRequest)
        values = complete(build_lookup(request), {key for engine in engines for key in engine.keys})
        assert function(values) == [engine.matcher(values) for engine in engines]
    coder = complete(build_lookup(structure({"scope_variables": {"agent": {"agent_type": "coder"}}}, AssemblyRequest)),
                     {key for engine in engines for key in engine.keys})
    assert function(coder) == [[1], [0, 1], []]  # evaluation order: priority first


def test_one_engine_or_an_interpreted_matcher_is_not_fused() -> None:
    one = RuleSet([compile_engine(structure(engine_doc("a", 3), RuleEngine))])
    assert not one.fuse() and one._selection(None).fused is None
    two = RuleSet([compile_engine(structure(engine_doc(name, 3), RuleEngine)) for name in ("a", "b")])
    two.engines[0].generated = False  # still compiling in the background
    assert not two.fuse() and two._selection(None).fused is None


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(typed_requests, min_size=1, max_size=3))
def test_the_loader_fuses_in_the_background_and_a_warm_start_reads_the_groups(
        tmp_path_factory: pytest.TempPathFactory, request_docs: list[dict[str, Any]]) -> None:
    root = tmp_path_factory.mktemp("ws")
    for name, count in (("a", 4), ("b", 7), ("c", 2)):
        write(root, f"context-rule-engines/{name}.json", engine_doc(name, count))
    store = CompileCache(tmp_path_factory.mktemp("cache"))
    requests_ = [REQUEST, *(structure(doc, AssemblyRequest) for doc in request_docs)]
    plain = WorkspaceLoader(root, cache=False).load().rule_set  # no background compiler: never fused
    expected = [orjson.dumps(plain.evaluate_wire(r, explain="all")) for r in requests_]
    assert plain._selection(None).fused is None
    cold = WorkspaceLoader(root, cache=store, background=True)
    assert cold.compiler is not None
    rule_set = cold.load().rule_set
    assert cold.compiler.wait(30)
    assert rule_set._selection(None).fused is not None
    assert [orjson.dumps(rule_set.evaluate_wire(r, explain="all")) for r in requests_] == expected
    cold.close()
    warm = WorkspaceLoader(root, cache=store, background=True)
    assert warm.compiler is not None
    again = warm.load().rule_set
    assert warm.compiler.wait(30)
    assert again._selection(None).fused is not None
    assert all(rule._rule is None for engine in again.engines for rule in engine.rules)  # no file parsed
    assert [orjson.dumps(again.evaluate_wire(r, explain="none")) for r in requests_] == \
        [orjson.dumps(plain.evaluate_wire(r, explain="none")) for r in requests_]
    warm.close()


def test_a_damaged_group_entry_is_made_again(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for name in ("a", "b"):
        write(root, f"context-rule-engines/{name}.json", engine_doc(name, 3))
    store = CompileCache(tmp_path / "cache")
    cold = WorkspaceLoader(root, cache=store, background=True)  # few rules: fused as it loads
    expected = orjson.dumps(cold.load().rule_set.evaluate_wire(REQUEST, explain="none"))
    [(_, group)] = cold.load().rule_set._selection(None).fused or []
    key = fused.group_key(group)
    assert key is not None and store.get(key) is not None
    cold.close()
    store.path(key).write_bytes(store.path(key).read_bytes()[:40])  # truncated
    warm = WorkspaceLoader(root, cache=store, background=True)
    again = warm.load().rule_set
    assert again._selection(None).fused is not None
    assert orjson.dumps(again.evaluate_wire(REQUEST, explain="none")) == expected
    assert store.get(key) is not None and len(store.path(key).read_bytes()) > 40  # written again
    warm.close()


def test_an_edited_file_is_fused_again_and_the_other_groups_are_kept(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fused, "CHUNK_RULES", 3)  # an engine a group
    root = tmp_path / "ws"
    for name in ("a", "b"):
        write(root, f"context-rule-engines/{name}.json", engine_doc(name, 3))
    loader = WorkspaceLoader(root, cache=False, background=True)  # few rules: fused as it loads
    first = loader.load().rule_set._selection(None).fused
    assert first is not None and len(first) == 2
    edited = engine_doc("a", 3)
    edited["rules"][0]["then"]["add_memories"] = ["edited"]
    write(root, "context-rule-engines/a.json", edited).touch()
    second = loader.load()
    again = second.rule_set._selection(None).fused
    assert again is not None
    assert again[0][0] is not first[0][0] and again[1][0] is first[1][0]  # "a" fused again, "b" kept
    assert "edited" in second.rule_set.evaluate_wire(REQUEST, explain="none")["matched_memories"]
    loader.close()


def test_matches_gives_the_rule_indexes_each_selected_engine_matched() -> None:
    """`RuleSet.matches`: the evaluation's matched rules as indexes, fused or not, for the enabled
    engines or exactly those named (what `bench/rules/replay_server.py --match` times)."""
    rule_set = RuleSet([compile_engine(structure(engine_doc(name, 6), RuleEngine)) for name in ("a", "b")])
    lookup = build_lookup(REQUEST)
    expected = [i for i in range(6) if i % 3 < 2]  # addVar.a (2) > each rule's value, and the text has "fix"
    unfused = rule_set.matches(lookup)
    assert [(engine.id, hits) for engine, hits in unfused] == [("a", expected), ("b", expected)]
    assert rule_set.fuse()
    assert rule_set.matches(lookup) == unfused
    assert [(engine.id, hits) for engine, hits in rule_set.matches(lookup, ["b"])] == [("b", expected)]
    wire = rule_set.evaluate_wire(REQUEST, lookup, explain="none")
    assert [[rule["rule_id"] for rule in entry["rules"]] for entry in wire["engine_results"]] == \
        [[f"r{i}" for i in hits] for _, hits in unfused]


def test_groups_made_in_any_order_come_back_in_order_and_kept_ones_are_read(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fused, "CHUNK_RULES", 3)  # an engine a group
    root = tmp_path / "ws"
    for j, name in enumerate("abcdef"):  # each engine matching other rules of the request (a = 3)
        doc = {"id": name, "rules": [{"id": f"r{i}", "when": [{"field": "addVar.a", "operator": "gt",
                                                                "value": (j + i) % 6}],
                                      "then": {"add_memories": [f"{name}-{i}"]}} for i in range(3)]}
        write(root, f"context-rule-engines/{name}.json", doc)
    engines = WorkspaceLoader(root, cache=CompileCache(tmp_path / "engines")).load().rule_set.engines
    assert all(fused.group_key([engine]) is not None for engine in engines)  # (keyed: kept in a store)
    expected = list(fused.groups(engines))
    lookup = complete(build_lookup(structure({"additional_variables": {"a": 3}}, AssemblyRequest)),
                      [k for engine in engines for k in engine.keys])
    hits = [[engine.matcher(lookup) for engine in group] for group in expected]
    assert len({str(h) for h in hits}) == len(hits)  # every group's answer its own
    made: list[list[str]] = []

    class Counted(_Emitter):
        def build_fused(self, rule_lists: Any) -> Any:
            made.append([rule.ref for rule in rule_lists[0]])
            return super().build_fused(rule_lists)

    monkeypatch.setattr(fused, "_Emitter", Counted)
    orders = set()
    for attempt in range(8):  # (each call makes the groups in an order of its own: 720 of them)
        store = CompileCache(tmp_path / f"cache-{attempt}")
        made.clear()
        first = fused.fuse(engines, store)
        assert [group for _, group in first] == expected and len(made) == len(expected)
        assert [function(lookup) for function, _ in first] == hits
        orders.add(tuple(refs[0] for refs in made))
    assert len(orders) > 1
    made.clear()
    again = fused.fuse(engines, store)  # another process, every group kept: read, none made
    assert made == [] and [group for _, group in again] == expected
    assert [function(lookup) for function, _ in again] == hits
