"""Per-rule reuse between document versions (workspace/memo.py) answers exactly as a fresh run.

Each "next version" is built the way the editor builds it: copy-on-write along the edited path,
so every rule dict the edit did not touch is the very same object as in the previous version.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import attrs
import cattrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.documents import parse_document
from context_assembly.model.converter import structure
from context_assembly.model.problems import Problem
from context_assembly.model.rules import RuleEngine
from context_assembly.rules.checks import (
    LintContext,
    check_duplicate_ids,
    check_engine_document,
    check_rule,
    engine_sites,
)
from context_assembly.schemas import validation_errors
from context_assembly.schemas.validate import validation_errors_by_item
from context_assembly.workspace.lint import file_problems, schema_errors
from context_assembly.workspace.loader import SourceFile, Workspace, load_workspace, prepare_source
from context_assembly.workspace.memo import IdentityCache, SourceMemo

from .builder import memory, write

MEMORIES = ["docs", "guide"]


def _cond(field: str, operator: str, value: Any = "x") -> dict[str, Any]:
    return {"field": field, "operator": operator, "value": value}


# rule templates: valid ones, and ones with schema, structuring or meaning problems
POOL: list[Any] = [
    {"id": "ok", "priority": 1, "when": [_cond("scope.agent.agent_id", "eq")], "then": {"add_memories": ["docs"]}},
    {"id": "ok2", "when": [_cond("input.text", "contains", "api")], "then": {"add_memories": ["guide"]}},
    {"id": "unknown-op", "when": [_cond("input.text", "containz")], "then": {"add_memories": ["docs"]}},
    {"id": "alias", "when": [_cond("input.text", "equals")], "then": {"add_memories": ["docs"]}},
    {"id": "no-memory", "when": [], "then": {"add_memories": ["dosc"], "exclude_memories": ["gone*", "x"]}},
    {"id": "never", "when": [_cond("input.text", "eq", "a"), _cond("input.text", "eq", "b")],
     "then": {"add_memories": ["docs"]}},
    {"id": "bad-var", "when": [_cond("scope.agnt.agent_id", "eq"), _cond("addVar.phse", "eq")],
     "then": {"add_memories": ["guide"]}},
    {"id": "extra", "zz": 1, "when": [{"field": "input.text"}], "then": {"add_memories": [1]}},
    {"id": "bad-priority", "priority": "high", "when": [_cond("input.text", "regex", "(a")], "then": {}},
    {"id": 7, "when": {"field": "input.text"}, "then": []},
    {"id": "ok", "when": [{"any": [_cond("input.text", "eq"), {"not": _cond("input.text", "gt", "s")}]}],
     "then": {"add_memories": ["docs"]}},
    "not a rule",
]
TOP_CHANGES: list[tuple[str, Any]] = [("id", "e"), ("id", 5), ("name", "Rules"), ("foo", 1), ("enabled", "yes"),
                                      ("description", None)]


def fresh(template: Any) -> Any:
    return copy.deepcopy(template)


def base_value(n: int = 30) -> dict[str, Any]:
    return {"id": "e", "rules": [fresh(POOL[i % len(POOL)]) for i in range(n)]}


# -- edits, copy-on-write ----------------------------------------------------------------------------


def replaced(value: dict[str, Any], index: int, rule: Any) -> dict[str, Any]:
    rules = list(value["rules"])
    rules[index] = rule
    return {**value, "rules": rules}


def inserted(value: dict[str, Any], index: int, rule: Any) -> dict[str, Any]:
    rules = list(value["rules"])
    rules.insert(index, rule)
    return {**value, "rules": rules}


def deleted(value: dict[str, Any], index: int) -> dict[str, Any]:
    rules = list(value["rules"])
    del rules[index]
    return {**value, "rules": rules}


def with_member(value: dict[str, Any], key: str, member: Any) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k != key} if member is None else {**value, key: member}


# -- the three stages, with a memo and from scratch ----------------------------------------------------


def source_of(value: Any, memo: SourceMemo | None = None, relpath: str = "rules/e.json") -> SourceFile:
    parsed = parse_document(json.dumps(value, indent=2), "e.json")
    document = attrs.evolve(parsed, value=value)  # the same text, but the value shares rule dicts
    source = SourceFile(Path("/ws/.codebolt") / relpath, relpath, "rule-engine", document, (0, 0),
                        **({"memo": memo} if memo is not None else {}))
    prepare_source(source)
    return source


def context(memory_ids: list[str] = MEMORIES) -> LintContext:
    return LintContext(memory_ids=set(memory_ids), declared_variables={"addVar.phase"})


def scratch_engine(value: dict[str, Any]) -> tuple[RuleEngine | None, list[str]]:
    """What `prepare_source` answered before the memo: the whole engine structured at once."""
    try:
        engine = structure(value, RuleEngine)
    except cattrs.BaseValidationError as exc:
        return None, ["cannot read the rule engine: " + "; ".join(cattrs.transform_error(exc))]
    except (TypeError, ValueError) as exc:
        return None, [f"cannot read the rule engine: {exc}"]
    engine.id = engine.id or "e"
    return engine, []


def scratch_meaning(value: dict[str, Any], ctx: LintContext) -> list[Problem]:
    """What `check_engine_document` answered before the memo: every rule at its place."""
    sites = engine_sites(value)
    return [p for site in sites for p in check_rule(site, ctx)] + list(check_duplicate_ids(sites))


def assert_same_as_scratch(value: dict[str, Any], memo: SourceMemo, ctx: LintContext) -> None:
    source = source_of(value, memo)
    assert (source.engine, [p.message for p in source.problems]) == scratch_engine(value)
    assert schema_errors(source) == validation_errors("rule-engine", value)
    with_memo = check_engine_document(value, ctx, memo.meaning.keyed(repr(sorted(ctx.memory_ids))))
    assert with_memo == scratch_meaning(value, ctx)


def test_each_kind_of_edit_answers_as_from_scratch() -> None:
    memo, ctx = SourceMemo(), context()
    value = base_value()
    assert_same_as_scratch(value, memo, ctx)
    versions = [
        replaced(value, 3, fresh(POOL[0])),
        inserted(value, 0, fresh(POOL[7])),  # shifts every index after it
        deleted(value, 5),
        with_member(value, "foo", 1),
        with_member(value, "id", 5),  # the engine cannot be structured at all
        with_member(value, "id", "e"),
        replaced(value, 1, fresh(POOL[8])),  # an error introduced ...
        replaced(value, 1, fresh(POOL[1])),  # ... and fixed
        inserted(value, 2, fresh(POOL[0])),  # a duplicate rule id
        with_member(value, "rules", {"not": "a list"}),
        with_member(value, "rules", []),
    ]
    for edit in versions:
        assert_same_as_scratch(edit, memo, ctx)


def test_successive_edits_chain() -> None:
    memo, ctx = SourceMemo(), context()
    value = base_value(40)
    for step in range(25):
        index = (step * 7) % len(value["rules"])
        template = POOL[step % len(POOL)]
        value = [replaced, inserted][step % 2](value, index, fresh(template)) if step % 5 else deleted(value, index)
        assert_same_as_scratch(value, memo, ctx)


def test_rules_untouched_by_an_edit_are_not_recomputed() -> None:
    memo = SourceMemo()
    value = base_value(len(POOL) - 1)  # dicts only: a string (one object) twice is computed twice
    first = source_of(value, memo)
    schema_errors(first)
    second_value = replaced(value, 4, fresh(POOL[0]))
    second = source_of(second_value, memo)
    assert first.engine is not None and second.engine is not None
    assert second.engine is not first.engine
    assert all(a is b for i, (a, b) in enumerate(zip(first.engine.rules, second.engine.rules, strict=True)) if i != 4)
    assert second.engine.rules[4] is not first.engine.rules[4]
    calls: list[list[Any]] = []
    cache = memo.schema

    def counting(items: Any, compute: Any) -> Any:
        return cache.reuse(items, lambda misses: calls.append(misses) or compute(misses))
    validation_errors_by_item("rule-engine", second_value, "rules", counting)
    assert calls == [[second_value["rules"][4]]]


def test_a_rule_object_twice_in_one_version_gets_two_structured_rules() -> None:
    memo = SourceMemo()
    rule = fresh(POOL[0])
    value = {"id": "e", "rules": [rule, rule]}
    for _ in range(2):
        source = source_of(value, memo)
        assert source.engine is not None
        assert source.engine.rules[0] == source.engine.rules[1]
        assert source.engine.rules[0] is not source.engine.rules[1]


def test_problems_are_fresh_objects_each_time() -> None:
    memo, ctx = SourceMemo(), context()
    value = base_value()
    reuse = memo.meaning.keyed("ctx")
    first = check_engine_document(value, ctx, reuse)
    for problem in first:
        problem.line, problem.path = 99, "/moved"
        problem.data.get("candidates", []).append("mutated")
        for related in problem.related:
            related.line = 99
    again = check_engine_document(inserted(value, 0, fresh(POOL[0])), ctx, reuse)
    assert again == scratch_meaning(inserted(value, 0, fresh(POOL[0])), ctx)
    assert all(p.line is None for p in again)


def test_meaning_follows_a_changed_context() -> None:
    memo = SourceMemo()
    value = base_value()
    for memory_ids in (MEMORIES, ["docs"], ["docs", "guide", "dosc"], MEMORIES):
        ctx = context(memory_ids)
        reuse = memo.meaning.keyed((frozenset(ctx.memory_ids), frozenset(ctx.declared_variables)))
        assert check_engine_document(value, ctx, reuse) == scratch_meaning(value, ctx)


def test_a_too_deep_rule_is_reported_as_a_whole_document_would() -> None:
    memo = SourceMemo()
    value = base_value(5)
    schema_errors(source_of(value, memo))
    deep: Any = _cond("input.text", "eq")
    for _ in range(150):
        deep = {"any": [deep]}
    deep_value = replaced(value, 2, {"id": "deep", "when": [deep], "then": {}})
    assert validation_errors("rule-engine", deep_value)[0]["message"].startswith("the document is nested")
    assert schema_errors(source_of(deep_value, memo)) == validation_errors("rule-engine", deep_value)
    back = replaced(deep_value, 2, fresh(POOL[0]))
    assert schema_errors(source_of(back, memo)) == validation_errors("rule-engine", back)


def test_the_memo_forgets_rules_that_left_the_document() -> None:
    memo, ctx = SourceMemo(), context()
    value = base_value(20)
    for step in range(60):
        value = replaced(value, step % 20, fresh(POOL[step % len(POOL)]))
        source = source_of(value, memo)
        schema_errors(source)
        check_engine_document(value, ctx, memo.meaning.keyed("ctx"))
        assert len(memo.rules) <= 20 and len(memo.schema) <= 20 and len(memo.meaning) <= 20
    kept = {id(rule) for rule in value["rules"]}
    assert set(memo.rules._state[1]) <= kept


def test_identity_cache_never_hits_a_recycled_id() -> None:
    cache: IdentityCache[int] = IdentityCache()
    first, impostor = {"a": 1}, {"b": 2}
    assert cache.reuse([first], lambda misses: [len(misses)]) == [1]
    entries = cache._state[1]
    entries[id(impostor)] = entries.pop(id(first))  # as if the id had been recycled
    assert cache.reuse([impostor], lambda misses: [len(misses) * 10]) == [10]


def test_file_problems_with_a_memo_match_a_fresh_file(tmp_path: Path) -> None:
    for memory_id in MEMORIES:
        write(tmp_path, f"PersistentMemory/{memory_id}.json", memory(memory_id))
    workspace: Workspace = load_workspace(tmp_path)
    memo = SourceMemo()
    value = base_value()
    for edit in (lambda v: v, lambda v: inserted(v, 0, fresh(POOL[2])), lambda v: replaced(v, 9, fresh(POOL[8])),
                 lambda v: deleted(v, 0), lambda v: with_member(v, "foo", 1)):
        value = edit(value)
        with_memo = file_problems(source_of(value, memo, "context-rule-engines/e.json"), workspace)
        scratch = file_problems(source_of(value, None, "context-rule-engines/e.json"), workspace)
        assert with_memo == scratch
        assert with_memo


_EDITS = st.one_of(
    st.tuples(st.just("replace"), st.integers(0, 200), st.integers(0, len(POOL) - 1)),
    st.tuples(st.just("insert"), st.integers(0, 200), st.integers(0, len(POOL) - 1)),
    st.tuples(st.just("delete"), st.integers(0, 200), st.just(0)),
    st.tuples(st.just("share"), st.integers(0, 200), st.integers(0, 200)),  # one object at two places
    st.tuples(st.just("top"), st.integers(0, len(TOP_CHANGES) - 1), st.just(0)),
)


def _apply(value: dict[str, Any], edit: tuple[str, int, int]) -> dict[str, Any]:
    kind, a, b = edit
    rules = value["rules"]
    if kind == "top":
        return with_member(value, *TOP_CHANGES[a])
    if kind == "insert" or not rules:
        return inserted(value, a % (len(rules) + 1), fresh(POOL[b]))
    if kind == "replace":
        return replaced(value, a % len(rules), fresh(POOL[b]))
    if kind == "delete":
        return deleted(value, a % len(rules))
    return replaced(value, a % len(rules), rules[b % len(rules)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_EDITS, min_size=1, max_size=12))
def test_any_edit_sequence_answers_as_from_scratch(edits: list[tuple[str, int, int]]) -> None:
    memo, ctx = SourceMemo(), context()
    value = base_value(12)
    assert_same_as_scratch(value, memo, ctx)
    for edit in edits:
        value = _apply(value, edit)
        assert_same_as_scratch(value, memo, ctx)


def test_values_kept_for_another_key_are_never_reused() -> None:
    cache: IdentityCache[str] = IdentityCache()
    items = [{"a": 1}, {"b": 2}]
    under_a, under_b = cache.keyed("a"), cache.keyed("b")
    assert under_a(items, lambda misses: ["a"] * len(misses)) == ["a", "a"]
    assert under_b(items, lambda misses: ["b"] * len(misses)) == ["b", "b"]
    assert under_a(items, lambda misses: ["a2"] * len(misses)) == ["a2", "a2"]
    assert under_a(items[:1], lambda misses: ["a3"] * len(misses)) == ["a2"]
    assert len(cache) == 1
