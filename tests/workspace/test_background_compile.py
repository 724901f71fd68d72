"""A long-lived loader with many rules to compile answers through interpreted matchers while a
background thread compiles the generated ones: the same answers as a plain loader at any moment,
never from an older version of an edited file, and a prompt close."""

from __future__ import annotations

import marshal
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.methods.session import Session
from context_assembly.model import AssemblyRequest, structure
from context_assembly.rules.cache import CompileCache
from context_assembly.rules.lookup import build_lookup, complete
from context_assembly.rules.persist import restore_matcher
from context_assembly.rules.trace_cache import trace_key
from context_assembly.workspace import loader as loader_module
from context_assembly.workspace.loader import BACKGROUND_FROM_RULES, WorkspaceLoader

from ..rules.test_compile_cache import typed_requests
from .builder import write
from .test_compile_cache import REQUEST, RULE, answers, entries, files, touch, write_version

ENGINE = "context-rule-engines/e.json"


def rules(count: int, memory: str = "m") -> dict[str, Any]:
    return {"id": "e", "rules": [{**RULE, "id": f"r{i}", "then": {"add_memories": [memory]}} for i in range(count)]}


def held(loader: WorkspaceLoader) -> threading.Event:
    """Hold the loader's background compiler until the returned event is set (a job at its head)."""
    gate, started = threading.Event(), threading.Event()

    def wait() -> None:
        started.set()
        gate.wait(30)

    assert loader.compiler is not None
    loader.compiler.submit([wait])
    assert started.wait(10)
    return gate


def generated(loader: WorkspaceLoader) -> list[bool]:
    return [engine.generated for engine in loader.load().rule_set.engines]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(files, min_size=1, max_size=3), st.lists(typed_requests, min_size=1, max_size=2), st.booleans())
def test_a_background_loader_answers_as_a_plain_one_through_edits(versions: list[dict[str, Any]],
                                                                  request_docs: list[dict], hold: bool) -> None:
    requests = [structure(r, AssemblyRequest) for r in request_docs]
    with tempfile.TemporaryDirectory() as scratch:
        root, store = Path(scratch) / "ws", CompileCache(Path(scratch) / "cache")
        loader = WorkspaceLoader(root, cache=store, background=True, background_from=0)
        gate = held(loader) if hold else None  # held: every answer below comes from interpreted matchers
        try:
            for version in versions:
                write_version(root, version)
                plain = answers(WorkspaceLoader(root, cache=False), requests)
                assert answers(loader, requests) == plain  # whatever the compiler has done so far
                if gate is not None:
                    assert not any(generated(loader))
        finally:
            if gate is not None:
                gate.set()
        assert loader.compiler is not None and loader.compiler.wait(30)
        assert all(generated(loader)) and answers(loader, requests) == plain
        assert answers(WorkspaceLoader(root, cache=store), requests) == plain  # the entries it wrote
        loader.close()


def test_a_file_edited_while_its_engine_compiles_is_answered_from_its_new_version(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    write(root, ENGINE, rules(3, "old"))
    loader = WorkspaceLoader(root, cache=store, background=True, background_from=0)
    gate = held(loader)
    first = loader.load()
    request = structure({"input": {"text": "fiix"}}, AssemblyRequest)
    assert first.rule_set.evaluate_wire(request, explain="none")["matched_memories"] == ["old"]
    touch(write(root, ENGINE, rules(3, "new")))
    second = loader.load()
    assert second.rule_set.evaluate_wire(request, explain="none")["matched_memories"] == ["new"]
    gate.set()
    assert loader.compiler is not None and loader.compiler.wait(30)
    [old], [new] = first.rule_set.engines, second.rule_set.engines
    assert not old.generated and new.generated  # the old version's job found it replaced: skipped
    assert loader.load().rule_set.evaluate_wire(request, explain="none")["matched_memories"] == ["new"]
    assert len(entries(store.directory)) == 1  # the new version's entry only
    restarted = WorkspaceLoader(root, cache=store).load()
    assert restarted.rule_set.evaluate_wire(request, explain="all")["matched_memories"] == ["new"]
    loader.close()


def test_few_rules_compile_before_load_returns_and_many_in_the_background(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, ENGINE, rules(3))
    loader = WorkspaceLoader(root, cache=False, background=True)
    assert generated(loader) == [True] and loader.compiler is not None and not loader.compiler.busy
    touch(write(root, ENGINE, rules(BACKGROUND_FROM_RULES)))
    gate = held(loader)
    assert generated(loader) == [False]  # answered interpreted meanwhile
    gate.set()
    assert loader.compiler.wait(60) and generated(loader) == [True]
    one_shot = WorkspaceLoader(root, cache=False)  # no background compiler: compiled first
    assert one_shot.compiler is None and generated(one_shot) == [True]
    loader.close()


def test_closing_a_session_stops_its_background_compile_promptly(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for name in "abcdefgh":
        write(root, f"context-rule-engines/{name}.json", {**rules(BACKGROUND_FROM_RULES // 4), "id": name})
    session = Session(root)
    loader = session.runtime.loader
    gate = held(loader)
    request = structure({"input": {"text": "fiix"}}, AssemblyRequest)
    answer = session.runtime.evaluate(request, explain="none")
    assert answer["matched_memories"] == ["m"]
    closing = threading.Thread(target=session.close)
    closing.start()
    assert loader.compiler is not None
    while loader.compiler._jobs:  # the queued engines are dropped, not compiled
        closing.join(0.01)
    gate.set()
    closing.join(30)
    assert not closing.is_alive() and not loader.compiler.busy
    assert not any(t.name == "rule-compiler" for t in threading.enumerate())
    assert not all(e.generated for e in loader.load().rule_set.engines)  # what was queued never ran


def test_trace_entries_are_written_after_the_answer_and_a_close_finishes_them(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    path = write(root, ENGINE, rules(3, "old"))
    program_key = trace_key(store.key(path.read_bytes(), "e"))
    loader = WorkspaceLoader(root, cache=store, background=True, background_from=0)
    gate = held(loader)  # the thread is busy elsewhere: nothing it was handed is written yet
    request = structure({"input": {"text": "fiix"}}, AssemblyRequest)
    plain = WorkspaceLoader(root, cache=False)  # the same answers without any cache
    assert answers(loader, [request]) == answers(plain, [request])  # every trace: its program and functions
    assert not store.path(program_key).exists()  # the answer came first
    closing = threading.Thread(target=loader.close)
    closing.start()
    gate.set()
    closing.join(30)
    assert not closing.is_alive()
    assert store.get(program_key) is not None  # written whole by close (the engine's compile was dropped)
    written = {p: p.stat().st_ino for p in entries(store.directory)}
    restarted = WorkspaceLoader(root, cache=store)  # a new process: the program from the entries
    assert answers(restarted, [request]) == answers(plain, [request])
    assert {p: p.stat().st_ino for p in entries(store.directory) if p in written} == written  # none rewritten
    touch(write(root, ENGINE, rules(3, "new")))  # an edited file: never traced from the old entries
    edited = restarted.load().rule_set.evaluate_wire(request, explain="all")
    assert edited["matched_memories"] == ["new"]
    assert edited == WorkspaceLoader(root, cache=False).load().rule_set.evaluate_wire(request, explain="all")


def engines_of(root: Path, names: str) -> None:
    """Engines whose rules match different texts (rule i of engine n: the text contains "n<i % 2>")."""
    for name in names:
        doc = {"id": name, "rules": [
            {"id": f"r{i}", "when": [{"field": "input.text", "operator": "contains", "value": f"{name}{i % 2}"}],
             "then": {"add_memories": [f"{name}-{i}"]}} for i in range(4)]}
        write(root, f"context-rule-engines/{name}.json", doc)


TEXTS = ["a0 b1 c0 d1", "a1 b0 c1", "d0", ""]


def each_engine_s_hits(loader: WorkspaceLoader) -> list[list[list[int]]]:
    """Per text, each engine's own matcher's hits (what answers a request naming engines, or one
    evaluated before its engines are fused)."""
    engines = loader.load().rule_set.engines
    return [[engine.matcher(complete(build_lookup(structure({"input": {"text": text}}, AssemblyRequest)),
                                     engine.keys)) for engine in engines] for text in TEXTS]


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the engines whose matchers a loader compiles from now on."""
    ids: list[str] = []
    compile_matcher = loader_module.compile_matcher
    monkeypatch.setattr(loader_module, "compile_matcher", lambda engine: (ids.append(engine.id),
                                                                          compile_matcher(engine))[1])
    return ids


def test_a_matcher_another_process_kept_meanwhile_is_taken_not_compiled(tmp_path: Path, compiled: list[str]) -> None:
    root = tmp_path / "ws"
    engines_of(root, "abcd")
    loader = WorkspaceLoader(root, cache=CompileCache(tmp_path / "cache"), background=True, background_from=0)
    gate = held(loader)
    assert generated(loader) == [False] * 4  # read with no entries: each to compile behind the gate
    other = WorkspaceLoader(root, cache=CompileCache(tmp_path / "cache"))  # another process, compiling first
    assert generated(other) == [True] * 4 and len(entries(tmp_path / "cache")) >= 4
    compiled.clear()  # (what the other process compiled)
    gate.set()
    assert loader.compiler is not None and loader.compiler.wait(30)
    assert compiled == [] and generated(loader) == [True] * 4  # its entries taken
    plain = WorkspaceLoader(root, cache=False)
    want = each_engine_s_hits(plain)
    assert each_engine_s_hits(loader) == want and want[0] == [[0, 2], [1, 3], [0, 2], [1, 3]]  # "a0 b1 c0 d1"
    assert answers(loader, [REQUEST]) == answers(plain, [REQUEST])
    loader.close()


def test_an_entry_of_other_rules_or_a_damaged_one_is_not_taken(tmp_path: Path, compiled: list[str]) -> None:
    root = tmp_path / "ws"
    engines_of(root, "ab")
    store = CompileCache(tmp_path / "cache")
    loader = WorkspaceLoader(root, cache=store, background=True, background_from=0)
    gate = held(loader)
    assert generated(loader) == [False, False]
    other = WorkspaceLoader(root, cache=CompileCache(tmp_path / "cache"))
    assert generated(other) == [True, True]
    [a, b] = loader.load().rule_set.engines
    key_a, key_b = (store.key((root / f".codebolt/context-rule-engines/{n}.json").read_bytes(), n) for n in "ab")
    assert store.put(key_a, marshal.dumps(("not", "an", "entry")))  # a whole cache file, but not an engine's
    assert store.get(key_b) is not None
    b_rules = list(b.rules)
    b.rules.reverse()  # as if the entry listed other rules than this engine's, in another order
    assert restore_matcher(store.get(key_b) or b"", b) is None
    b.rules[:] = b_rules
    compiled.clear()  # (what the other process compiled)
    gate.set()
    assert loader.compiler is not None and loader.compiler.wait(30)
    assert compiled == ["a"] and generated(loader) == [True, True]  # "a" compiled again (and its entry replaced)
    assert restore_matcher(store.get(key_a) or b"", a) is not None  # replaced
    plain = WorkspaceLoader(root, cache=False)
    assert each_engine_s_hits(loader) == each_engine_s_hits(plain)
    assert answers(loader, [REQUEST]) == answers(plain, [REQUEST])
    loader.close()
