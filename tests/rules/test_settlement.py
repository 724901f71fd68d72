"""One settlement of rule conflicts (SPEC §4.3): what the result lists agrees with what it decided."""

from __future__ import annotations

from itertools import chain

from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.rules.settle import Settlement

from .support import engine, evaluate, request, rule

ALWAYS: list = []


def test_a_reference_an_earlier_rule_included_is_not_also_excluded() -> None:
    engines = [engine([rule("inc", ALWAYS, ["kv://x"], priority=2),
                       rule("exc", ALWAYS, [], priority=1, exclude_memories=["kv://x"])])]
    result = evaluate(engines, request())
    assert result.matched_memories == ["kv://x"]
    assert result.excluded_memories == []  # overridden: told in decisions only
    assert [(d.reference, d.outcome, d.rule, d.overridden) for d in result.decisions] == \
        [("kv://x", "included", "e/inc", ["e/exc"])]


def test_a_pattern_still_in_force_for_pipeline_output_stays_listed() -> None:
    engines = [engine([rule("inc", ALWAYS, ["kv://x"], priority=2),
                       rule("exc", ALWAYS, [], priority=1, exclude_memories=["kv://*"])])]
    result = evaluate(engines, request())
    assert result.matched_memories == ["kv://x"] and result.excluded_memories == ["kv://*"]


def test_an_explicit_memory_a_rule_tried_to_exclude_is_not_listed_as_excluded() -> None:
    engines = [engine([rule("exc", ALWAYS, [], exclude_memories=["kv://x"])])]
    result = evaluate(engines, request(explicit_memory=["kv://x"]))
    assert result.excluded_memories == []
    assert [(d.reference, d.outcome) for d in result.decisions] == [("kv://x", "kept_explicit")]


references = st.sampled_from(["kv://a", "kv://b", "vector://c", "m1", "m2"])
patterns = st.one_of(references, st.sampled_from(["kv://*", "*", "m?"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(references, max_size=3), st.lists(patterns, max_size=2)), max_size=5))
def test_never_in_both_lists(rules: list[tuple[list[str], list[str]]]) -> None:
    engines = [engine([rule(f"r{i}", ALWAYS, adds, priority=-i, exclude_memories=excludes)
                       for i, (adds, excludes) in enumerate(rules)])]
    for explain in (True, False):
        result = evaluate(engines, request(), explain=explain)
        assert not set(result.matched_memories) & set(result.excluded_memories)


def reference_include_all(groups: list[list[tuple[str, ...]]]) -> list[str]:
    """How `include_all` settled when it took the groups per engine (kept as the reference)."""
    settlement = Settlement({})
    settlement.included = dict.fromkeys(chain.from_iterable(
        chain.from_iterable(iter(group)) for group in groups))
    return settlement.matched


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.lists(references, max_size=4).map(tuple), max_size=6), max_size=5))
def test_including_all_memories_of_plain_rules_keeps_the_first_added_order(
        groups: list[list[tuple[str, ...]]]) -> None:
    settlement = Settlement({})
    settlement.include_all([memories for group in groups for memories in group])  # per matched rule, as the
    # evaluator passes them (its engines' matched rules in order)
    expected = reference_include_all(groups)
    assert settlement.matched == expected
    assert settlement.matched == list(dict.fromkeys(m for group in groups for memories in group for m in memories))
    assert settlement.in_force() == [] and settlement.decisions == {}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(references, min_size=0, max_size=3), min_size=1, max_size=8),
       st.lists(st.booleans(), min_size=8, max_size=8))
def test_the_plain_path_settles_as_rule_by_rule(memories: list[list[str]], fires: list[bool]) -> None:
    rules = [rule(f"r{i}", [{"field": "addVar.go", "operator": "eq", "value": True}] if fires[i] else ALWAYS, m,
                  priority=len(memories) - i) for i, m in enumerate(memories)]
    plain = evaluate([engine(rules)], request({"go": False}), explain=False)
    expected = list(dict.fromkeys(m for i, ms in enumerate(memories) if not fires[i] for m in ms))
    assert plain.matched_memories == expected
