"""Stage 6: fit the context into `max_tokens`.

Keep the longest prefix of the global order (sections in effective priority order, items in
section order) that fits, dropping whole items from the lowest-priority end. An item is never cut
mid-sentence, except when the single top item alone exceeds the budget: then it is cut at a
sentence boundary (else a word boundary) and ends with a visible marker. The returned estimate
never exceeds the budget.
"""

from __future__ import annotations

import re

from attrs import define, evolve, field

from ..model.context import ContextItem
from .tokens import Counter

TRUNCATION_MARKER = "\n[… truncated]"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD_END = re.compile(r"\s+")


@define
class Packed:
    kept: list[ContextItem]
    dropped: list[ContextItem] = field(factory=list)
    cut: ContextItem | None = None  # the top item, shortened, when it alone was over budget
    tokens: int = 0

    @property
    def truncated(self) -> bool:
        return bool(self.dropped) or self.cut is not None


def pack(ordered: list[ContextItem], max_tokens: int | None, count: Counter) -> Packed:
    """Keep the longest prefix of `ordered` whose tokens fit in `max_tokens` (None: keep all)."""
    if max_tokens is None:
        return Packed(list(ordered), tokens=sum(i.tokens for i in ordered))
    total = 0
    for index, item in enumerate(ordered):
        if total + item.tokens > max_tokens:
            if index == 0:
                return _cut_top(ordered, max_tokens, count)
            return Packed(list(ordered[:index]), list(ordered[index:]), tokens=total)
        total += item.tokens
    return Packed(list(ordered), tokens=total)


def _cut_top(ordered: list[ContextItem], max_tokens: int, count: Counter) -> Packed:
    top = ordered[0]
    text = shorten(top.content, max_tokens, count)
    if text is None:
        return Packed([], list(ordered))
    cut = evolve(top, content=text, tokens=count(text),
                 metadata={**top.metadata, "truncated": True, "original_tokens": top.tokens})
    return Packed([cut], list(ordered[1:]), cut=cut, tokens=cut.tokens)


def _boundaries(text: str, pattern: re.Pattern[str]) -> list[int]:
    return [m.start() for m in pattern.finditer(text) if m.start() > 0]


def shorten(text: str, max_tokens: int, count: Counter) -> str | None:
    """The longest sentence-bounded (else word-bounded) prefix + marker within the budget."""
    for pattern in (_SENTENCE_END, _WORD_END):
        ends = _boundaries(text, pattern)
        best = _longest_fitting(text, ends, max_tokens, count)
        if best is not None:
            return best
    return None


def _longest_fitting(text: str, ends: list[int], max_tokens: int, count: Counter) -> str | None:
    """Binary search over boundary positions (token counts grow with the prefix length)."""
    low, high, best = 0, len(ends) - 1, None
    while low <= high:
        middle = (low + high) // 2
        candidate = text[: ends[middle]].rstrip() + TRUNCATION_MARKER
        if count(candidate) <= max_tokens:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best
