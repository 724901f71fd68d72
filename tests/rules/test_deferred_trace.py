"""A first trace with many trace programs to build is answered from the plain path while a
background thread builds them (rules/deferred_trace.py): the same JSON as the compiled trace, every
later answer from the programs once they are there, and few rules (or kept programs) built at once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure
from context_assembly.rules.bitmap import QUEUED, build_bits
from context_assembly.rules.cache import ENV, CompileCache
from context_assembly.rules.engine import CompiledEngine, compile_engine
from context_assembly.rules.lookup import build_lookup, complete
from context_assembly.rules.trace import TraceProgram
from context_assembly.runtime import Runtime
from context_assembly.workspace.loader import BACKGROUND_FROM_RULES, WorkspaceLoader

from ..workspace.builder import write
from ..workspace.test_background_compile import held
from ..workspace.test_compile_cache import files
from . import support
from .test_compile_cache import typed_requests

MODES = ("all", "matched")


def wire(value: Any) -> bytes:
    return orjson.dumps(value)  # key order included


def write_files(root: Path, docs: dict[str, Any]) -> None:
    for name, doc in docs.items():
        write(root, f"context-rule-engines/{name}.json", doc)


def three_engines(root: Path) -> Path:
    """A workspace of three engines of 30 rules each (90 rules to build)."""
    rule = {"when": [{"field": "input.text", "operator": "contains", "value": "fix"}], "then": {"add_memories": ["m"]}}
    write_files(root, {name: {"id": name, "rules": [{**rule, "id": f"r{i}"} for i in range(30)]}
                       for name in ("a", "b", "c")})
    return root


def programs(loader: WorkspaceLoader) -> list[bool]:
    return [isinstance(engine.trace, TraceProgram) for engine in loader.load().rule_set.engines]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files, st.lists(typed_requests, min_size=1, max_size=3))
def test_the_plain_answer_of_a_deferred_trace_is_the_compiled_one(tmp_path_factory: Any, docs: dict[str, Any],
                                                                  request_docs: list[dict[str, Any]]) -> None:
    root = tmp_path_factory.mktemp("ws")
    write_files(root, docs)
    requests = [structure(doc, AssemblyRequest) for doc in request_docs]
    compiled = WorkspaceLoader(root, cache=False).load().rule_set  # programs built on the request path
    deferred = WorkspaceLoader(root, cache=False).load().rule_set
    for request in requests:
        for mode in MODES:
            plain = deferred.evaluate_wire(request, explain=mode, later=lambda engines, mode: True)  # never built
            assert wire(plain) == wire(compiled.evaluate_wire(request, explain=mode)), mode
    assert not any(isinstance(e.trace, TraceProgram) for e in deferred.engines)  # every answer was the plain path's


def test_many_rules_are_built_in_the_background_and_answered_alike_meanwhile(tmp_path: Path) -> None:
    root = three_engines(tmp_path / "ws")
    store = CompileCache(tmp_path / "cache")
    loader = WorkspaceLoader(root, cache=store, background=True, background_from=60)  # 90 rules to build
    assert loader.traces is not None and loader.compiler is not None
    request = structure({"input": {"text": "please fix"}}, AssemblyRequest)
    plain = WorkspaceLoader(root, cache=False).load().rule_set
    expected = {mode: wire(plain.evaluate_wire(request, explain=mode)) for mode in MODES}
    workspace = loader.load()
    gate = held(loader)  # the background thread waits: nothing handed to it is built yet
    first = workspace.rule_set.evaluate_wire(request, explain="all", later=loader.traces.later)
    assert wire(first) == expected["all"]
    assert programs(loader) == [False, False, False]  # answered from the plain path
    assert wire(workspace.rule_set.evaluate_wire(request, explain="matched", later=loader.traces.later)) == \
        expected["matched"]  # still, and queued once
    gate.set()
    assert loader.compiler.wait(30)
    assert programs(loader) == [True, True, True]  # built by the background thread
    assert all({"all_rules", "outcomes"} <= set(engine.trace.codes)  # each asked mode's function too
               for engine in loader.load().rule_set.engines)
    for mode in MODES:  # from the programs now
        answer = workspace.rule_set.evaluate_wire(request, explain=mode, later=loader.traces.later)
        assert wire(answer) == expected[mode]
    loader.close()
    restarted = WorkspaceLoader(root, cache=store, background=True, background_from=60)  # kept programs: read at once
    assert restarted.traces is not None
    again = restarted.load()
    assert not restarted.traces.later(list(again.rule_set.engines), "matched")
    assert wire(again.rule_set.evaluate_wire(request, explain="matched", later=restarted.traces.later)) == \
        expected["matched"]
    restarted.close()


def test_programs_kept_without_the_modes_function_answer_from_the_plain_path_meanwhile(tmp_path: Path) -> None:
    root = three_engines(tmp_path / "ws")
    store = CompileCache(tmp_path / "cache")
    request = structure({"input": {"text": "please fix"}}, AssemblyRequest)
    expected = {mode: wire(WorkspaceLoader(root, cache=False).load().rule_set.evaluate_wire(request, explain=mode))
                for mode in MODES}
    compacting = WorkspaceLoader(root, cache=store, background=True, background_from=1000)  # built at once
    assert compacting.traces is not None
    compacting.load().rule_set.evaluate_wire(request, explain="all", trace_format="compact",
                                             later=compacting.traces.later)
    compacting.close()  # programs and bit functions kept; neither "all" nor "matched" function
    loader = WorkspaceLoader(root, cache=store, background=True, background_from=60)
    assert loader.traces is not None and loader.compiler is not None
    rule_set = loader.load().rule_set
    gate = held(loader)
    for mode in MODES:  # 90 rules' functions to compile: the plain path answers, the same JSON
        assert wire(rule_set.evaluate_wire(request, explain=mode, later=loader.traces.later)) == expected[mode]
    assert not any(isinstance(e.trace, TraceProgram) and (e.trace.prepared("all") or e.trace.prepared("matched"))
                   for e in rule_set.engines)
    gate.set()
    assert loader.compiler.wait(30)
    assert all(e.trace.prepared("all") and e.trace.prepared("matched") for e in rule_set.engines)
    for mode in MODES:
        assert wire(rule_set.evaluate_wire(request, explain=mode, later=loader.traces.later)) == expected[mode]
    loader.close()
    restarted = WorkspaceLoader(root, cache=store, background=True, background_from=60)  # every function kept now
    assert restarted.traces is not None
    assert not restarted.traces.later(list(restarted.load().rule_set.engines), "all")
    restarted.close()


def test_few_rules_or_the_compact_formats_programs_are_built_on_the_request_path(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, {"a": {"id": "a", "rules": [{"id": f"r{i}", "when": [], "then": {"add_memories": ["m"]}}
                                                  for i in range(5)]}})
    loader = WorkspaceLoader(root, cache=False, background=True, background_from=60)
    assert loader.traces is not None
    request = structure({"input": {"text": "x"}}, AssemblyRequest)
    rule_set = loader.load().rule_set
    assert not loader.traces.later(list(rule_set.engines), "matched")  # 5 rules: cheaper to build than to hand over
    rule_set.evaluate_wire(request, explain="matched", later=loader.traces.later)
    assert programs(loader) == [True]
    many = WorkspaceLoader(root, cache=False, background=True, background_from=1)
    assert many.traces is not None
    compact = many.load().rule_set.evaluate_wire(request, explain="all", trace_format="compact",
                                                 later=many.traces.later)
    assert compact["trace_format"] == "compact" and programs(many) == [True]  # packed against the programs
    loader.close()
    many.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files, st.lists(typed_requests, min_size=1, max_size=3))
def test_a_compact_trace_packs_plain_outcomes_while_its_bit_functions_compile(
        tmp_path_factory: Any, docs: dict[str, Any], request_docs: list[dict[str, Any]]) -> None:
    root = tmp_path_factory.mktemp("ws")
    write_files(root, docs)
    requests = [structure(doc, AssemblyRequest) for doc in request_docs]
    compiled = WorkspaceLoader(root, cache=False).load().rule_set  # bit functions made on the request path
    loader = WorkspaceLoader(root, cache=False, background=True, background_from=1)
    assert loader.traces is not None and loader.compiler is not None
    rule_set = loader.load().rule_set
    gate = held(loader)  # the background thread waits: the bit functions stay queued
    try:
        for request in requests:
            for mode in MODES:
                answer = rule_set.evaluate_wire(request, explain=mode, trace_format="compact",
                                                later=loader.traces.later)
                assert wire(answer) == wire(compiled.evaluate_wire(request, explain=mode, trace_format="compact"))
        assert all(engine.trace.bits is QUEUED for engine in rule_set.engines  # none made on the request path
                   if isinstance(engine.trace, TraceProgram) and engine.trace.nodes)
    finally:
        gate.set()
    assert loader.compiler.wait(30)
    assert not any(isinstance(engine.trace, TraceProgram) and engine.trace.bits is QUEUED
                   for engine in rule_set.engines)  # each made by the background thread
    for request in requests:  # from the bit functions now
        answer = rule_set.evaluate_wire(request, explain="all", trace_format="compact", later=loader.traces.later)
        assert wire(answer) == wire(compiled.evaluate_wire(request, explain="all", trace_format="compact"))
    loader.close()


def test_a_program_built_again_meanwhile_gets_its_own_bits_job(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    rule = {"when": [{"field": "addVar.a", "operator": "gt", "value": 1}], "then": {"add_memories": ["m"]}}
    write_files(root, {"a": {"id": "a", "rules": [{**rule, "id": f"r{i}"} for i in range(5)]}})
    loader = WorkspaceLoader(root, cache=False, background=True, background_from=1)
    assert loader.traces is not None and loader.compiler is not None
    engine = loader.load().rule_set.engines[0]
    gate = held(loader)
    first = engine.trace = TraceProgram(engine)
    assert loader.traces.later([engine], "bits") and first.bits is QUEUED
    second = engine.trace = TraceProgram(engine)  # another request built the program too
    assert loader.traces.later([engine], "bits") and second.bits is QUEUED
    gate.set()
    assert loader.compiler.wait(30)
    assert first.bits is not QUEUED and second.bits is not QUEUED  # neither left waiting for a job
    request = structure({"additional_variables": {"a": 3}}, AssemblyRequest)
    compact = loader.load().rule_set.evaluate_wire(request, explain="all", trace_format="compact")
    expected = WorkspaceLoader(root, cache=False).load().rule_set.evaluate_wire(request, explain="all",
                                                                               trace_format="compact")
    assert wire(compact) == wire(expected)
    loader.close()


def test_the_sidecar_runtime_defers_its_first_trace(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "ws"
    rule = {"when": [{"field": "addVar.a", "operator": "eq", "value": 1}], "then": {"add_memories": ["m"]}}
    write_files(root, {"a": {"id": "a", "rules": [{**rule, "id": f"r{i}"} for i in range(BACKGROUND_FROM_RULES)]}})
    monkeypatch.setenv(ENV, str(tmp_path / "cache"))
    runtime = Runtime(root, background_compile=True)  # as the sidecar's
    try:
        assert runtime.loader.traces is not None and runtime.loader.compiler is not None
        runtime.workspace()
        gate = held(runtime.loader)
        request = structure({"scope_variables": {}, "additional_variables": {"a": 1}}, AssemblyRequest)
        answer = runtime.evaluate(request, explain="all")
        assert programs(runtime.loader) == [False]  # the plain path's answer
        compiled = WorkspaceLoader(root, cache=False).load().rule_set.evaluate_wire(request, explain="all")
        assert wire(answer) == wire(compiled)
        gate.set()
        assert runtime.loader.compiler.wait(30)
        assert programs(runtime.loader) == [True]
    finally:
        runtime.close()


def _varied_engine() -> CompiledEngine:
    conditions = [{"field": "addVar.phase", "operator": "eq", "value": "p1"},
                  {"field": "input.text", "operator": "matches", "value": "^fix"},
                  {"field": "addVar.n", "operator": "greater_than", "value": 2},
                  {"field": "addVar.tags", "operator": "contains", "value": "ui"},
                  {"any": [{"field": "addVar.tag", "operator": "in", "value": ["a", "b"]},
                           {"field": "addVar.gone", "operator": "not_exists"}]}]
    rules = [support.rule(f"r{i}", [conditions[i % 5], conditions[(i * 3 + 1) % 5]]) for i in range(40)]
    return compile_engine(structure(support.engine(rules), RuleEngine))


def test_expressions_are_written_once_with_the_same_names_whichever_threads_ask() -> None:
    alone = TraceProgram(_varied_engine())
    assert any(slot.expression is None for slot in alone.slots)  # not written by building the program
    expected = [slot.expression for slot in alone.expressions()]
    shared = TraceProgram(_varied_engine())
    start = threading.Barrier(6)

    def ask(work: Any) -> None:
        start.wait(5)
        work()

    jobs = [shared.expressions] * 4 + [lambda: shared.prepare("matched"), lambda: build_bits(shared)]
    threads = [threading.Thread(target=ask, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert [slot.expression for slot in shared.slots] == expected
    assert {k for k in shared.namespace if k.startswith(("p", "cp"))} == \
        {k for k in alone.namespace if k.startswith(("p", "cp"))}
    for variables, text in (({"phase": "p1", "n": 3, "tags": ["ui"]}, "fix it"), ({"tag": "c", "gone": 1}, None)):
        lookup = build_lookup(support.request(variables, text))
        assert shared.outcomes(complete(lookup, shared.keys)) == shared.plain_outcomes(lookup)
