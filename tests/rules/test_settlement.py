"""One settlement of rule conflicts (SPEC §4.3): what the result lists agrees with what it decided."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
