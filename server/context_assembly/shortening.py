"""Shortening text without leaving half a sentence: a cut at a sentence (else word) boundary that
ends with a marker saying how much was left out, and an extractive summary (the lead sentence plus
the sentences sharing most words with a task). Pure functions over text and a token counter; the
budget ladder and the `summarize` pipeline step both use them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

Counter = Callable[[str], int]
TRUNCATION_PREFIX = "[… truncated"
# a sentence ends at . ! ? and a space, at a full stop of CJK text (。！？, no space after), or a line
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+")
_WORD_END = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]{3,}")


def truncation_marker(left_out: int, total: int) -> str:
    return f"[… truncated: {left_out} of {total} tokens left out]"


def shorten(text: str, max_tokens: int, count: Counter, total: int | None = None) -> str | None:
    """The longest sentence-bounded prefix plus the marker within `max_tokens`, or a word-bounded
    one where no sentence boundary keeps half the room (one long line: a log, a JSON value); None
    when not even one word fits beside the marker. `total` is the size the marker reports
    (the original item's, when `text` is already a shortened form)."""
    whole = count(text) if total is None else total
    best, best_tokens = None, -1
    for pattern in (SENTENCE_END, _WORD_END):
        ends = [m.start() for m in pattern.finditer(text) if m.start() > 0]
        cut = _longest_fitting(text, ends, max_tokens, count, whole)
        tokens = count(cut) if cut is not None else -1
        if tokens > best_tokens:
            best, best_tokens = cut, tokens
        if best_tokens * 2 >= max_tokens:
            return best  # a sentence boundary that keeps half the room or more: no word cut needed
    if best is None:  # no space to cut at (CJK text, one long token): at a character, not dropped
        best = _longest_fitting(text, range(1, len(text)), max_tokens, count, whole)
    return best


def _cut(text: str, end: int, count: Counter, total: int) -> str:
    prefix = text[:end].rstrip()
    return f"{prefix}\n{truncation_marker(max(0, total - count(prefix)), total)}"


def _longest_fitting(text: str, ends: Sequence[int], max_tokens: int, count: Counter, total: int) -> str | None:
    """Binary search over boundary positions (token counts grow with the prefix length)."""
    low, high, best = 0, len(ends) - 1, None
    while low <= high:
        middle = (low + high) // 2
        candidate = _cut(text, ends[middle], count, total)
        if count(candidate) <= max_tokens:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(text) if s.strip()]


def _json_document(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def extractive(text: str, task: str, max_tokens: int, count: Counter) -> str | None:
    """The lead sentence, then the sentences sharing most words with the task, in text order. None
    where picking sentences keeps nothing useful: a JSON document (its lines are no sentences: a
    pick is a broken object that lost its long values) or text whose sentences past the lead are
    each too long for the room (the lead alone would stand for all of it); the caller then cuts
    the text with the marker instead (`shorten`)."""
    found = split_sentences(text)
    if not found or _json_document(text):
        return None
    words = {w.casefold() for w in _WORD.findall(task)}
    overlap = [len(words & {w.casefold() for w in _WORD.findall(s)}) for s in found]
    ranked = [0] + sorted(range(1, len(found)), key=lambda i: (-overlap[i], i))
    if count(found[0]) > max_tokens:  # even the lead sentence is too long: cut it (the marker tells of the text)
        return shorten(found[0], max_tokens, count, count(text))
    # sum of the parts (+1 per joining space) bounds the whole for ceil(len/4) and is close for
    # exact encodings; the result is checked once and trimmed from the last choice if need be
    chosen: list[int] = []
    used = -1
    for index in ranked:
        size = count(found[index]) + 1
        if used + size <= max_tokens:
            chosen.append(index)
            used += size
    while len(chosen) > 1 and count(" ".join(found[i] for i in sorted(chosen))) > max_tokens:
        chosen.pop()
    if len(chosen) == 1 and len(found) > 1 and count(found[0]) < max_tokens // 4:
        return None  # only the lead fit, and it fills little of the room: a cut keeps more
    return " ".join(found[i] for i in sorted(chosen))
