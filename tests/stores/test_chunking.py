"""Chunking: slices of the text, in order, covering every word, within the size, overlapping as asked."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.stores.chunking import chunk_text, estimate_tokens

WORDS = ["a", "an", "the", "cat", "sat.", "on", "mat!", "why?", "x" * 30, "réseau", "naïve", "(ok)", "end.\"",
         "supercalifragilisticexpialidocious"]
SEPARATORS = [" ", " ", " ", "  ", "\n", "\n\n", " \n \n", "\t"]


@st.composite
def documents(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), max_size=120))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(words) + 1, max_size=len(words) + 1))
    return "".join(s + w for s, w in zip(seps, words, strict=False)) + seps[-1]


def word_spans(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def check_properties(text: str, size: int, overlap: int, count=estimate_tokens) -> None:
    chunks = chunk_text(text, size, overlap, None if count is estimate_tokens else count)
    words = word_spans(text)
    if not words:
        assert chunks == []
        return
    assert [c.ord for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text and c.text == text[c.start:c.end]
        assert c.text == c.text.strip()
        # Over the limit only when the chunk is one word that alone is.
        assert count(c.text) <= size or len(word_spans(c.text)) == 1
    assert chunks[0].start == words[0][0] and chunks[-1].end == words[-1][1]
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert prev.start < nxt.start and prev.end < nxt.end  # in order, always moving on
        # no gap: every word between two chunks is in one of them
        gap = text[prev.end:nxt.start] if nxt.start > prev.end else ""
        assert gap.strip() == ""
        if nxt.start < prev.end:
            assert count(text[nxt.start:prev.end]) <= overlap
    covered = [any(c.start <= s and e <= c.end for c in chunks) for s, e in words]
    assert all(covered)


@settings(max_examples=300, deadline=None)
@given(documents(), st.integers(1, 80), st.data())
def test_chunks_cover_the_text_in_order_within_the_limit(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    check_properties(text, size, overlap)


@settings(max_examples=150, deadline=None)
@given(documents(), st.integers(1, 30), st.data())
def test_properties_hold_with_a_tokenizer_callable(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    check_properties(text, size, overlap, count=lambda s: len(s.split()))


@settings(max_examples=100, deadline=None)
@given(documents(), st.integers(1, 50))
def test_deterministic(text: str, size: int) -> None:
    assert chunk_text(text, size, size // 3) == chunk_text(text, size, size // 3)


def test_whitespace_only_gives_no_chunks() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\t \n") == []


def test_short_text_is_one_chunk() -> None:
    [chunk] = chunk_text("  Hello world.  ", 512, 64)
    assert chunk.text == "Hello world." and (chunk.start, chunk.end) == (2, 14)


def test_prefers_paragraph_then_sentence_boundaries() -> None:
    para1 = "Alpha beta gamma delta. Epsilon zeta eta theta."
    para2 = "Iota kappa lambda mu. Nu xi omicron pi rho sigma."
    chunks = chunk_text(f"{para1}\n\n{para2}", chunk_size=estimate_tokens(para1) + 4, overlap=0)
    assert chunks[0].text == para1  # ends at the blank line although more would fit
    sentences = "One two three four five. Six seven eight nine ten. Eleven twelve thirteen fourteen."
    first = chunk_text(sentences, chunk_size=15, overlap=0)[0]
    assert first.text.endswith(".")


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    text = " ".join(f"w{i}." if i % 5 == 4 else f"w{i}" for i in range(400))
    chunks = chunk_text(text, chunk_size=50, overlap=12)
    assert len(chunks) > 3
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.start < prev.end  # there is overlap when the words are small enough
        assert estimate_tokens(text[nxt.start:prev.end]) <= 12


def test_a_word_longer_than_the_limit_is_its_own_chunk() -> None:
    long_word = "z" * 200
    chunks = chunk_text(f"short words here {long_word} and after", chunk_size=8, overlap=2)
    assert long_word in [c.text for c in chunks]


def test_custom_tokenizer_counts() -> None:
    text = " ".join(["word"] * 100)
    chunks = chunk_text(text, chunk_size=10, overlap=3, count_tokens=lambda s: len(s.split()))
    assert all(len(c.text.split()) <= 10 for c in chunks)
    assert all(len(text[n.start:p.end].split()) <= 3 for p, n in zip(chunks, chunks[1:], strict=False))


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1), (5, 7)])
def test_rejects_bad_settings(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("some text", size, overlap)
