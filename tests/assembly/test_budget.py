"""Stage 6 as properties: never over budget, always a prefix, a cut only for a lone top item."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.assembly.budget import TRUNCATION_MARKER, pack, shorten
from context_assembly.assembly.tokens import estimate, token_counter
from context_assembly.model.context import ContextItem

sentences = st.lists(st.text(alphabet="abcdefg ", min_size=1, max_size=40).map(lambda s: s.strip() + "."),
                     min_size=1, max_size=6).map(" ".join)


def item(index: int, content: str) -> ContextItem:
    return ContextItem(f"i{index}", content, "m", "kv://x", "knowledge", "medium", None, estimate(content))


@settings(max_examples=300, deadline=None)
@given(st.lists(sentences, max_size=12), st.integers(min_value=1, max_value=200))
def test_estimate_never_exceeds_and_kept_is_a_prefix(contents: list[str], budget: int) -> None:
    items = [item(i, c) for i, c in enumerate(contents)]
    packed = pack(items, budget, estimate)
    assert packed.tokens == sum(i.tokens for i in packed.kept) <= budget
    if packed.cut is None:
        assert packed.kept == items[: len(packed.kept)]
        assert packed.kept + packed.dropped == items
    else:  # only ever the top item, and only when it alone was over budget
        assert items[0].tokens > budget and packed.kept == [packed.cut]
        assert packed.cut.content.endswith(TRUNCATION_MARKER)
        assert packed.dropped == items[1:]


def test_whole_items_are_dropped_from_the_end() -> None:
    items = [item(0, "a" * 40), item(1, "b" * 40), item(2, "c" * 4)]
    packed = pack(items, 15, estimate)  # i2 alone would fit, but the kept set is a prefix
    assert [i.id for i in packed.kept] == ["i0"] and [i.id for i in packed.dropped] == ["i1", "i2"]
    assert not pack(items, 30, estimate).cut


def test_no_budget_keeps_everything() -> None:
    items = [item(0, "x" * 1000)]
    assert pack(items, None, estimate).kept == items


def test_an_oversized_top_item_is_cut_at_a_sentence_boundary() -> None:
    text = "First sentence is here. Second sentence follows it. Third one is long enough to matter here."
    packed = pack([item(0, text)], 20, estimate)
    assert packed.cut is not None
    assert packed.cut.content == "First sentence is here. Second sentence follows it." + TRUNCATION_MARKER
    assert packed.cut.tokens <= 20 and packed.cut.metadata["truncated"] is True


def test_cut_falls_back_to_words_then_gives_up() -> None:
    assert shorten("one two three four five six seven eight nine ten eleven", 12, estimate) == \
        "one two three four five six seven" + TRUNCATION_MARKER
    assert shorten("word " * 50, 4, estimate) is None  # nothing but the marker would fit
    assert pack([item(0, "word " * 50)], 4, estimate).kept == []


def test_exact_tokenizers_count_and_still_fit() -> None:
    count = token_counter("cl100k")
    assert count("hello world") == 2
    assert token_counter("o200k")("hello world") == 2
    text = "A sentence about auth. " * 50
    packed = pack([ContextItem("a", text, None, "kv://a", "knowledge", "high", None, count(text))], 30, count)
    assert packed.tokens <= 30 and packed.cut is not None
