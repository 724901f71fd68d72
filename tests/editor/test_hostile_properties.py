"""Workspace-wide features survive any one file: generated workspaces hold rule engines and memory
definitions with malformed fields, operators, values, ids, references and nesting (and, sometimes,
text cut off mid-way); every editor feature, at random positions, and every method of the method
table (writes included, with params made of the generated definitions) answers — a domain error at
most (a clear code), never an internal error (-32603)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from context_assembly.editor.actions import code_actions
from context_assembly.editor.completion import complete
from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import build_document, overlay
from context_assembly.editor.formatting import format_edits
from context_assembly.editor.hover import hover
from context_assembly.editor.navigation import (
    definition,
    document_symbols,
    folding_ranges,
    memory_id_at,
    references,
    rename,
)
from context_assembly.editor.semantics import inlay_hints, semantic_tokens
from context_assembly.editor.tests import code_lenses
from context_assembly.errors import ContextAssemblyError
from context_assembly.methods import METHODS, Session, call
from context_assembly.testing.run import evaluate_rule

from ..lsp.support import EXAMPLE, REQUEST

ODD_TEXT = ["", "scope", "scope.", "scope.agent", "scope.agent.", "scope..x", "addVar.", "addVar", "input.text",
            "scope.agent.agent_type", "a.b.c.d", "\ud800", "memory.source", " ", "é.ü", "$/x", "../.."]
ANY_ODD = st.one_of(st.sampled_from(ODD_TEXT), st.none(), st.integers(-3, 3), st.booleans(), st.just([]),
                    st.just({}), st.floats(allow_nan=False), st.text(max_size=8))
OPERATORS = st.one_of(st.sampled_from(["eq", "eqq", "regex", "in", "not_in", "contains", "gt", "exists", "",
                                       "matches", "startsWith"]), ANY_ODD)
VALUES = st.one_of(st.sampled_from(["((", "[", "a{1000}{1000}", "x", "(?P<n>x)"]), ANY_ODD,
                   st.lists(ANY_ODD, max_size=3))
REFERENCES = st.one_of(st.sampled_from(["architecture-docs", "user-preferences", "", "kv://", "vector://",
                                        "kv://users/*", "file://../x", "ghost", "graph://"]), ANY_ODD)


def condition(depth: int = 0) -> st.SearchStrategy[Any]:
    leaf = st.fixed_dictionaries({"field": st.one_of(st.sampled_from(ODD_TEXT), ANY_ODD), "operator": OPERATORS},
                                 optional={"value": VALUES, "ignore_case": ANY_ODD})
    if depth > 3:
        return st.one_of(leaf, ANY_ODD)
    inner = st.deferred(lambda: condition(depth + 1))
    return st.one_of(leaf, ANY_ODD, st.fixed_dictionaries({"not": inner}),
                     st.fixed_dictionaries({"any": st.one_of(st.lists(inner, max_size=3), ANY_ODD)}),
                     st.fixed_dictionaries({"all": st.lists(inner, max_size=3)}))


def deep_not(levels: int) -> Any:
    value: Any = {"field": "input.text", "operator": "eq", "value": "x"}
    for _ in range(levels):
        value = {"not": value}
    return value


RULE = st.fixed_dictionaries({"id": st.one_of(st.sampled_from(["r", "dup", "dup", ""]), ANY_ODD),
                              "when": st.one_of(st.lists(st.one_of(condition(), st.builds(deep_not, st.integers(
                                  30, 40))), max_size=3), ANY_ODD),
                              "then": st.one_of(st.fixed_dictionaries({}, optional={
                                  "add_memories": st.one_of(st.lists(REFERENCES, max_size=3), ANY_ODD),
                                  "exclude_memories": st.lists(REFERENCES, max_size=2),
                                  "caps": st.one_of(st.lists(st.fixed_dictionaries(
                                      {"target": REFERENCES}, optional={"max_tokens": ANY_ODD}), max_size=2),
                                      ANY_ODD),
                                  "boost": st.lists(st.fixed_dictionaries({"target": REFERENCES,
                                                                           "weight": ANY_ODD}), max_size=2)}),
                                  ANY_ODD)},
                             optional={"priority": ANY_ODD, "name": ANY_ODD})
ENGINE = st.fixed_dictionaries({"id": st.one_of(st.sampled_from(["planning", "fuzz", "dup"]), ANY_ODD),
                                "rules": st.one_of(st.lists(RULE, max_size=4), ANY_ODD)},
                               optional={"enabled": ANY_ODD, "name": ANY_ODD})
MEMORY = st.fixed_dictionaries({"id": st.one_of(st.sampled_from(["architecture-docs", "fuzz-memory"]), ANY_ODD),
                                "label": ANY_ODD,
                                "retrieval": st.one_of(st.fixed_dictionaries({"pipeline": st.lists(
                                    st.fixed_dictionaries({"type": st.one_of(st.sampled_from(
                                        ["kv_get", "graph_view_read", "filter", "conditional", "rank"]), ANY_ODD)},
                                        optional={"where": st.lists(condition(), max_size=2),
                                                  "keys": ANY_ODD, "view": ANY_ODD}), max_size=3)}), ANY_ODD)},
                               optional={"additional_variables": st.one_of(st.lists(st.fixed_dictionaries(
                                   {"name": ANY_ODD}, optional={"type": ANY_ODD}), max_size=2), ANY_ODD),
                                   "inputs_scope": st.one_of(st.lists(ANY_ODD, max_size=2), ANY_ODD)})


def text_of(value: Any, cut: float | None) -> str:
    text = json.dumps(value, indent=1)
    return text if cut is None else text[: int(len(text) * cut)]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    root = tmp_path_factory.mktemp("fuzz") / "ws"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks"))
    opened = Session(root)
    yield opened
    opened.close()


def answers_with(run: Callable[[], Any], what: str) -> None:
    try:
        run()
    except ContextAssemblyError as exc:  # answered with its code over JSON-RPC, a method's or a command's
        assert exc.code != -32603, f"{what}: {exc.message}"


def answers(session: Session, method: str, params: Any) -> None:
    answers_with(lambda: call(session, method, params), method)


def method_calls(engine: Any, memory: Any, engine_text: str) -> dict[str, Any]:
    """Params for every method of the table, made of the generated definitions (the ids they name,
    or odd ones). Writes go to the generated ids: a later example writes its files again."""
    engine_id = engine.get("id") if isinstance(engine, dict) else engine
    memory_id = memory.get("id") if isinstance(memory, dict) else memory
    rules = engine.get("rules") if isinstance(engine, dict) else None
    first_rule = rules[0] if isinstance(rules, list) and rules else engine
    rule_id = first_rule.get("id") if isinstance(first_rule, dict) else first_rule
    drafts = {"contextRuleEngine": engine, "persistentMemory": memory,
              "memoryIngestion": {"id": memory_id, "trigger": "manual", "processors": memory, "routing": []}}
    ids = {"contextRuleEngine": engine_id, "persistentMemory": memory_id, "memoryIngestion": memory_id}
    calls: dict[str, Any] = {}
    for family, draft in drafts.items():
        calls.update({f"{family}/list": {}, f"{family}/get": {"id": ids[family]}, f"{family}/create": draft,
                      f"{family}/update": {"id": ids[family], "updates": draft},
                      f"{family}/delete": {"id": "fuzz-gone"},
                      f"{family}/validate": draft if isinstance(draft, dict) else {"text": engine_text}})
    request = {**REQUEST, "rule_engine_ids": [engine_id], "explicit_memory": [memory_id, "architecture-docs"]}
    calls.update({
        "contextRuleEngine/validate": {"text": engine_text},
        "contextRuleEngine/addRule": {"engine_id": engine_id, "rule": first_rule},
        "contextRuleEngine/updateRule": {"engine_id": engine_id, "rule_id": rule_id, "updates": first_rule},
        "contextRuleEngine/deleteRule": {"engine_id": engine_id, "rule_id": "fuzz-gone"},
        "contextRuleEngine/evaluate": {**request, "id": engine_id, "trace_format": "compact"},
        "contextRuleEngine/possibleVariables": {}, "contextRuleEngine/test": {},
        "contextRuleEngine/traceLayout": {"id": engine_id, "layout": rule_id},
        "contextAssembly/assemble": request, "contextAssembly/validate": request,
        "contextAssembly/evaluateRules": request, "contextAssembly/memoryTypes": {},
        "contextAssembly/requiredVariables": {"memory_ids": [memory_id, "architecture-docs"]},
        "contextAssembly/endTurn": {"thread_id": "t-fuzz"},
        "contextAssembly/replay": {"snapshot": {"request": request, "result": {"context": {}, "trace": {}}}},
        "contextAssembly/diff": {"a": request, "b": {**REQUEST, "explicit_memory": [memory_id]}},
        "contextAssembly/tracePage": {"request": request},
        "persistentMemory/execute": {"id": memory_id, "request": REQUEST}, "persistentMemory/stepSpecs": {},
        "memoryIngestion/execute": {"id": memory_id, "payload": memory},
        "memoryIngestion/activate": {"id": memory_id}, "memoryIngestion/disable": {"id": memory_id},
        "memoryIngestion/processorSpecs": {},
        "memory/event": {"trigger": "manual", "payload": {"memory": memory}},
        "memory/read": {"uri": f"kv://fuzz/{engine_id}"}, "memory/list": {"prefix": "kv://fuzz/"},
        "memory/write": {"uri": "kv://fuzz/value", "value": engine},
        "memory/delete": {"uri": "kv://fuzz/value"},
    })
    return calls


def test_every_method_has_generated_params() -> None:
    assert set(method_calls({}, {}, "")) == set(METHODS)


@settings(max_examples=60, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(engine=ENGINE, memory=MEMORY, cut=st.one_of(st.none(), st.floats(0.05, 0.95)),
       spots=st.lists(st.floats(0, 1), min_size=1, max_size=6))
def test_every_feature_answers_on_malformed_workspaces(session: Session, engine: Any, memory: Any,
                                                       cut: float | None, spots: list[float]) -> None:
    root = session.root
    engine_path = root / ".codebolt" / "context-rule-engines" / "fuzz.json"
    memory_path = root / ".codebolt" / "PersistentMemory" / "fuzz-memory.json"
    engine_text, memory_text = text_of(engine, cut), text_of(memory, None)
    engine_path.write_text(engine_text)
    memory_path.write_text(memory_text)
    disk = session.workspace()
    documents = [build_document(engine_path.as_uri(), engine_text, 1, root),
                 build_document(memory_path.as_uri(), memory_text, 1, root)]
    open_docs = {d.relpath: d for d in documents if d is not None}
    workspace = overlay(disk, list(open_docs.values()))
    for document in open_docs.values():
        found = document_diagnostics(document, workspace)
        code_actions(document, found, root)
        document_symbols(document)
        folding_ranges(document)
        code_lenses(document)
        format_edits(document, "utf-16")
        for spot in spots:
            offset = int(len(document.text) * spot)
            line = document.text.count("\n", 0, offset)
            selection = {"start": {"line": line, "character": 0}, "end": {"line": line + 2, "character": 0}}
            semantic_tokens(document, workspace, "utf-16", selection)
            inlay_hints(document, workspace, "utf-16", selection)
            format_edits(document, "utf-16", selection)
            complete(document, offset, workspace)
            hover(document, offset, workspace)
            memory_id = memory_id_at(document, offset, workspace)
            if memory_id is not None:
                definition(memory_id, workspace, open_docs, "utf-16")
                references(memory_id, workspace, open_docs, "utf-16", True)
                for renames in (True, False):  # without file renames the editor is refused, with an error
                    answers_with(lambda m=memory_id, r=renames: rename(m, "renamed", workspace, open_docs, "utf-16",
                                                                       r), "rename")
    for document in open_docs.values():
        semantic_tokens(document, workspace, "utf-16")
        inlay_hints(document, workspace, "utf-16")
    for engine_id in list(workspace.engines):
        for rule in workspace.engines[engine_id].rules or []:
            if isinstance(rule.id, str):  # the "Evaluate this rule" lens command
                answers_with(lambda e=engine_id, r=rule.id: evaluate_rule(workspace, e, r), "evaluate rule")
    for method, params in method_calls(engine, memory, engine_text).items():
        answers(session, method, params)
