"""Stages 4-5: dedupe keeps the best copy; ranking, limits, caps, boosts and section order."""

from __future__ import annotations

from typing import Any

import pytest

from context_assembly.assembly.candidates import Candidate
from context_assembly.assembly.contribute import SourceRules, contribute, section_order
from context_assembly.assembly.merge import deduplicate
from context_assembly.model.context import ContextItem
from context_assembly.model.rules import Boost, Cap

ORDER = iter(range(10_000))


def candidate(content: str, memory: str = "m", section: str = "knowledge", priority: str = "medium",
              score: float | None = None, tokens: int = 10, source: str | None = None, **limits: Any) -> Candidate:
    item = ContextItem(f"{memory}#{content}", content, memory, source or f"kv://{memory}/{content}", section,
                       priority, score, tokens)
    return Candidate(item, memory, next(ORDER), limits)


def ids(candidates: list[Candidate]) -> list[str]:
    return [c.item.content for c in candidates]


def test_dedupe_keeps_the_highest_priority_copy() -> None:
    low = candidate("same", "a", priority="low")
    high = candidate("same", "b", priority="high")
    other = candidate("other", "a")
    merged = deduplicate([low, other, high])
    assert merged.kept == [other, high]
    assert [(d.kind, d.memory_id, d.by) for d in merged.duplicates()] == [("duplicate", "a", high.item.id)]


def test_dedupe_ties_keep_the_first() -> None:
    first, second = candidate(" same "), candidate("same")
    assert deduplicate([first, second]).kept == [first]


def test_the_next_copy_stands_in_for_a_kept_copy_that_is_removed() -> None:
    best, middle, last = candidate("same", "a", priority="high"), candidate("same", "b"), candidate("same", "c",
                                                                                                    priority="low")
    merged = deduplicate([last, middle, best])
    assert merged.kept == [best]
    assert merged.promoted(best) is middle and merged.kept == [middle]
    assert [(d.memory_id, d.by) for d in merged.duplicates()] == [("c", middle.item.id)]
    assert merged.promoted(middle) is last and merged.duplicates() == []
    assert merged.promoted(last) is None and merged.kept == [last]


def test_rank_by_priority_then_score_then_arrival() -> None:
    items = [candidate("c", score=0.2), candidate("a", priority="high", score=0.1), candidate("b", score=0.9),
             candidate("d", score=0.2)]
    result = contribute(items, [], {}, [], {})
    assert ids(result.sections["knowledge"]) == ["a", "b", "c", "d"]


def test_boost_multiplies_the_score_and_kg_entities_match_content() -> None:
    items = [candidate("plain", score=0.5), candidate("about AuthService", "n", score=0.3)]
    result = contribute(items, [], {}, [Boost("kg_entity:authservice", 2.0)], {})
    assert ids(result.sections["knowledge"]) == ["about AuthService", "plain"]
    assert result.sections["knowledge"][0].effective_score == 0.6


def test_the_reported_score_is_after_boosts() -> None:
    """What an agent reads explains the order: a boosted item's score is the boosted one (on a copy:
    the item may be the pipeline cache's), an item without a score keeps none."""
    shared = candidate("billing", "b", score=0.4)
    original = shared.item
    items = [candidate("session", "s", score=0.9), shared, candidate("note", "b")]
    result = contribute(items, [], {}, [Boost("b", 3.0)], {})
    ranked = result.sections["knowledge"]
    assert ids(ranked) == ["note", "billing", "session"]  # unscored ranks as 1.0 × 3.0
    assert [c.item.score for c in ranked] == [None, pytest.approx(1.2), 0.9]
    assert original.score == 0.4  # the shared item itself is untouched
    again = contribute([Candidate(original, "b", 99)], [], {}, [Boost("b", 3.0)], {})
    assert again.sections["knowledge"][0].item.score == pytest.approx(1.2)  # boosted once, not twice


def test_per_memory_limits_keep_the_best_items() -> None:
    items = [candidate(str(i), score=i / 10, max_items=2) for i in range(5)]
    result = contribute(items, [], {}, [], {})
    assert ids(result.sections["knowledge"]) == ["4", "3"]
    assert {d.kind for d in result.dropped} == {"max_items"}
    tokens = [candidate(str(i), "t", tokens=40, max_tokens=100) for i in range(4)]
    assert len(contribute(tokens, [], {}, [], {}).sections["knowledge"]) == 2


def test_rule_caps_by_section_memory_and_pattern() -> None:
    items = [candidate("h1", "hist", "history"), candidate("h2", "hist", "history"),
             candidate("v1", "vec", source="vector://docs/a"), candidate("v2", "vec", source="vector://docs/b"),
             candidate("k", "kv")]
    result = contribute(items, [Cap("history", max_items=1), Cap("vector://**", max_tokens=10)], {}, [], {})
    assert ids(result.sections["history"]) == ["h1"]
    assert ids(result.sections["knowledge"]) == ["v1", "k"]
    assert sorted(d.by or "" for d in result.dropped) == ["cap on history", "cap on vector://**"]


def test_per_source_rules_cap_and_reprioritise_one_reference() -> None:
    items = [candidate("a1", "a"), candidate("a2", "a"), candidate("b1", "b")]
    per_source = {"a": SourceRules([Cap("whatever", max_items=1)], {"knowledge": "high"}, ["e/r"])}
    result = contribute(items, [], {}, [], per_source)
    assert ids(result.sections["knowledge"]) == ["a1", "b1"]
    assert result.sections["knowledge"][0].item.priority == "high"


def test_section_order_defaults_and_set_priority() -> None:
    assert section_order({}) == ["state", "warnings", "constraints", "knowledge", "history", "suggestions",
                                 "working_memory"]
    assert section_order({"history": "high", "constraints": "low"}) == [
        "state", "warnings", "history", "knowledge", "constraints", "suggestions", "working_memory"]


def test_a_limit_cuts_the_item_that_crosses_it_and_no_later_one() -> None:
    """After the cut item, the next was cut again into the tokens the cut left over (a few words
    and a marker)."""
    from context_assembly.assembly.contribute import _limit
    from context_assembly.assembly.tokens import token_counter

    count = token_counter("estimate")
    sentence = "word " * 23 + "end."  # 30 tokens: a cut at a sentence leaves room over
    texts = [" ".join([sentence] * 8), "tiny words here and there " * 40]
    group = [candidate(text, "m", tokens=count(text)) for text in texts]
    kept, dropped = _limit(group, None, 120, "limit", "m", count, min_cut=8)
    assert [d.kind for d in dropped] == ["shortened", "max_tokens"]
    assert len(kept) == 1 and 120 - kept[0].item.tokens >= 16  # room the old code cut the second into
