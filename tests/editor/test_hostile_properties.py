"""Workspace-wide features survive any one file: generated workspaces hold rule engines and memory
definitions with malformed fields, operators, values, ids, references and nesting (and, sometimes,
text cut off mid-way); every editor feature, at random positions, and every read-only method
answers — a domain error at most (a clear code), never an internal error (-32603)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from context_assembly.editor.actions import code_actions
from context_assembly.editor.completion import complete
from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import build_document, overlay
from context_assembly.editor.hover import hover
from context_assembly.editor.navigation import (
    definition,
    document_symbols,
    folding_ranges,
    memory_id_at,
    references,
    rename,
)
from context_assembly.errors import ContextAssemblyError
from context_assembly.methods import Session, call

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


def answers(session: Session, method: str, params: Any) -> None:
    try:
        call(session, method, params)
    except ContextAssemblyError as exc:
        assert exc.code != -32603, f"{method}: {exc.message}"


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
        for spot in spots:
            offset = int(len(document.text) * spot)
            complete(document, offset, workspace)
            hover(document, offset, workspace)
            memory_id = memory_id_at(document, offset, workspace)
            if memory_id is not None:
                definition(memory_id, workspace, open_docs, "utf-16")
                references(memory_id, workspace, open_docs, "utf-16", True)
                rename(memory_id, "renamed", workspace, open_docs, "utf-16")
    for method, params in (("contextRuleEngine/possibleVariables", {}), ("contextRuleEngine/list", {}),
                           ("contextAssembly/requiredVariables", {"memory_ids": ["fuzz-memory", "architecture-docs"]}),
                           ("contextRuleEngine/validate", {"text": engine_text}),
                           ("contextRuleEngine/evaluate", REQUEST), ("contextAssembly/evaluateRules", REQUEST),
                           ("contextAssembly/validate", REQUEST), ("persistentMemory/list", {}),
                           ("persistentMemory/validate", memory if isinstance(memory, dict) else {}),
                           ("contextAssembly/assemble", REQUEST)):
        answers(session, method, params)
