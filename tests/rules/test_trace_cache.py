"""Trace programs kept in the compile cache: a restored engine answers every trace as a fresh
compile, without structuring its rule file once the entries are there, and every damaged or
missing entry is built and written again."""

from __future__ import annotations

import marshal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure
from context_assembly.rules.cache import CompileCache
from context_assembly.rules.engine import CompiledEngine, compile_engine
from context_assembly.rules.evaluate import RuleSet
from context_assembly.rules.persist import compile_entry, restore_engine
from context_assembly.rules.trace import TraceProgram
from context_assembly.rules.trace_cache import FORMAT, KeptTrace, trace_key

from .test_compile_cache import typed_requests, typed_rules
from .test_properties import json_values, requests, rules, same_json

# (explain, trace_format): every trace a client can ask for
ANSWERS = [("none", "full"), ("matched", "full"), ("all", "full"), ("matched", "compact"), ("all", "compact")]
KEY = "ee" * 32  # the engine entry's key the trace entries derive from


class Restored:
    """Engines restored from one engine entry, each with the trace entries of `store`; counts how
    often any of them structured the rule file."""

    def __init__(self, doc: dict[str, Any], store: CompileCache) -> None:
        self.doc, self.store, self.structured = doc, store, 0
        _, entry = compile_entry(structure(doc, RuleEngine))
        assert entry is not None
        self.entry = entry

    def _source(self) -> RuleEngine:
        self.structured += 1
        return structure(self.doc, RuleEngine)

    def engine(self) -> CompiledEngine:
        engine = restore_engine(self.entry, self._source)
        engine.kept_trace = KeptTrace(self.store, KEY)
        return engine


def answer(rule_set: RuleSet, request: AssemblyRequest, mode: tuple[str, str]) -> dict[str, Any]:
    return rule_set.evaluate_wire(request, explain=mode[0], trace_format=mode[1])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(typed_rules, min_size=1, max_size=8), st.lists(rules | json_values, max_size=2),
       st.lists(typed_requests, min_size=1, max_size=3) | st.lists(requests, min_size=1, max_size=2),
       st.permutations(ANSWERS), st.permutations(ANSWERS), st.booleans())
def test_a_restored_trace_answers_as_a_fresh_compile(rule_docs: list[Any], odd_docs: list[Any],
                                                     request_docs: list[dict], first: list[tuple[str, str]],
                                                     then: list[tuple[str, str]], enabled: bool) -> None:
    doc = {"id": "e", "enabled": enabled, "rules": rule_docs + odd_docs}
    fresh = RuleSet([compile_engine(structure(doc, RuleEngine))])
    with tempfile.TemporaryDirectory() as folder:
        made = Restored(doc, CompileCache(Path(folder)))
        writer = RuleSet([made.engine()])  # builds the programs (in `first`'s order) and stores them
        for request in map(lambda d: structure(d, AssemblyRequest), request_docs):
            for mode in first:
                assert same_json(answer(writer, request, mode), answer(fresh, request, mode))
        written = _inodes(made.store)
        reader = RuleSet([made.engine()])  # a new process: the programs from the entries
        for request in map(lambda d: structure(d, AssemblyRequest), request_docs):
            for mode in then:
                assert same_json(answer(reader, request, mode), answer(fresh, request, mode))
        assert _inodes(made.store) == written  # the writer's entries were whole: nothing built again


def _inodes(store: CompileCache) -> dict[str, int]:
    """Each entry's inode: a write (a new file, then `os.replace`) always changes it."""
    return {p.name: p.stat().st_ino for p in sorted(store.directory.rglob("*")) if p.is_file()}


def _doc() -> dict[str, Any]:
    return {"id": "e", "rules": [
        {"id": "r", "when": [{"field": "input.text", "operator": "regex", "value": "fi+x"},
                             {"any": [{"field": "addVar.a", "operator": "gt", "value": 1},
                                      {"field": "addVar.a", "operator": "exists"}]}],
         "then": {"add_memories": ["m"]}},
        {"id": "s", "priority": 2, "when": [{"field": "input.text", "operator": "contains", "value": "x",
                                             "ignore_case": True}],
         "then": {"add_memories": ["n"]}},
        {"id": "bad", "when": [{"field": "input.text", "operator": "nope"}], "then": {"add_memories": ["o"]}}]}


REQUESTS = [structure(d, AssemblyRequest) for d in (
    {"input": {"text": "a FIIX here"}, "additional_variables": {"a": 3}}, {"input": {"text": "no"}}, {})]


def _all_answers(rule_set: RuleSet) -> list[dict[str, Any]]:
    return [answer(rule_set, request, mode) for request in REQUESTS for mode in ANSWERS]


def _entries(store: CompileCache) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.directory.rglob("*")) if p.is_file()}


def test_the_first_traces_store_the_program_and_each_function_once(tmp_path: Path) -> None:
    store = CompileCache(tmp_path)
    made = Restored(_doc(), store)
    engine = made.engine()
    RuleSet([engine]).evaluate_wire(REQUESTS[0], explain="none")
    assert _entries(store) == {}  # "none" needs no program: nothing built, nothing written
    RuleSet([engine]).evaluate_wire(REQUESTS[0], explain="matched")
    assert sorted(_entries(store)) == sorted([trace_key(KEY), trace_key(KEY, "outcomes")])
    assert isinstance(engine.trace, TraceProgram) and engine.trace.layout_key is None
    expected = _all_answers(RuleSet([compile_engine(structure(_doc(), RuleEngine))]))
    assert _all_answers(RuleSet([engine])) == expected
    written = _entries(store)
    assert sorted(written) == sorted([trace_key(KEY), trace_key(KEY, "outcomes"), trace_key(KEY, "all_rules")])
    made.structured = 0
    again = RuleSet([made.engine()])
    again.evaluate_wire(REQUESTS[0], explain="all")
    assert again.engines[0].trace.layout_key is not None  # the compact layout's key came with the program
    assert _all_answers(again) == expected and made.structured == 0
    assert _entries(store) == written  # a complete program is only read


Damage = Callable[[CompileCache, str], None]
ANY_ENTRY: dict[str, Damage] = {
    "flip": lambda store, key: store.path(key).write_bytes(
        store.path(key).read_bytes()[:-5] + b"\xff" + store.path(key).read_bytes()[-4:]),
    "truncate": lambda store, key: store.path(key).write_bytes(store.path(key).read_bytes()[:40]),
    "empty": lambda store, key: store.path(key).write_bytes(b""),
    "removed": lambda store, key: store.path(key).unlink(),
    "not marshal": lambda store, key: store.put(key, b"\x00not marshal"),
}
PROGRAM: dict[str, Damage] = {
    "an older format": lambda store, key: store.put(key, marshal.dumps(("trace/0", *marshal.loads(
        store.get(key) or b"")[1:]))),
    "another engine's": lambda store, key: store.put(key, marshal.dumps((FORMAT, [], [], [], {}, {}, None))),
}
CODE: dict[str, Damage] = {"no code": lambda store, key: store.put(key, marshal.dumps((FORMAT, "not code")))}
CASES = [(part, damage) for part, kinds in (("", {**ANY_ENTRY, **PROGRAM}), ("outcomes", {**ANY_ENTRY, **CODE}),
                                            ("all_rules", {**ANY_ENTRY, **CODE})) for damage in kinds]


@pytest.mark.parametrize(("part", "damage"), CASES)
def test_a_damaged_trace_entry_is_built_and_written_again(tmp_path: Path, part: str, damage: str) -> None:
    store = CompileCache(tmp_path)
    made = Restored(_doc(), store)
    expected = _all_answers(RuleSet([compile_engine(structure(_doc(), RuleEngine))]))
    assert _all_answers(RuleSet([made.engine()])) == expected
    names = sorted(_entries(store))
    {**ANY_ENTRY, **PROGRAM, **CODE}[damage](store, trace_key(KEY, part))
    assert _all_answers(RuleSet([made.engine()])) == expected  # built again where the entry was unusable
    assert sorted(_entries(store)) == names and all(store.get(name) is not None for name in names)
    made.structured = 0
    written = _inodes(store)
    assert _all_answers(RuleSet([made.engine()])) == expected  # and written again: whole, only read now
    assert made.structured == 0 and _inodes(store) == written
