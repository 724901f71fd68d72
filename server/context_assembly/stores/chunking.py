"""Split a document into overlapping chunks of about `chunk_size` tokens for embedding.

Chunks are slices of the original text (`text[start:end]`), in order, each starting and ending on
a word. A chunk ends at the strongest boundary in the back half of the room it has: a blank line
(paragraph), else a line break, else a sentence end, else any space. The next chunk starts up to
`overlap` tokens before the previous end, at the strongest boundary in that window. A chunk exceeds
`chunk_size` only when it is a single word that alone does. Tokens are `ceil(chars / 4)` (the seeds'
estimate) unless a counting callable is given. Whitespace-only text gives no chunks.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from attrs import frozen

TokenCounter = Callable[[str], int]

PARAGRAPH, LINE, SENTENCE, SPACE = 3, 2, 1, 0

_WORD = re.compile(r"\S+")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


@frozen
class Chunk:
    ord: int
    start: int
    end: int
    text: str


def estimate_tokens(text: str) -> int:
    return -(-len(text) // 4)


def chunk_text(text: str, chunk_size: int = 512, overlap: int = 64,
               count_tokens: TokenCounter | None = None) -> list[Chunk]:
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    if not 0 <= overlap < chunk_size:
        raise ValueError("overlap must be at least 0 and less than chunk_size")
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    if not words:
        return []
    # strength[i]: the boundary between word i-1 and word i (strength[0] unused).
    strength = [PARAGRAPH] + [_boundary(text, words[i - 1], words[i]) for i in range(1, len(words))]

    def tokens(first: int, last: int) -> int:
        span = text[words[first][0]:words[last][1]]
        return count_tokens(span) if count_tokens is not None else -(-len(span) // 4)

    n = len(words)
    chunks: list[Chunk] = []
    first, floor = 0, 0  # floor: the first word the next chunk must reach, so chunks always advance
    while True:
        last = _last_fitting(tokens, first, n, chunk_size)
        if last < n - 1:
            last = _best_end(tokens, strength, first, max(first, floor), last, chunk_size)
        start, end = words[first][0], words[last][1]
        chunks.append(Chunk(len(chunks), start, end, text[start:end]))
        if last == n - 1:
            return chunks
        first = _next_start(tokens, strength, first, last, chunk_size, overlap)
        floor = last + 1


def _boundary(text: str, before: tuple[int, int], after: tuple[int, int]) -> int:
    gap = text[before[1]:after[0]]
    if "\n" in gap:
        return PARAGRAPH if _BLANK_LINE.search(gap) else LINE
    return SENTENCE if _SENTENCE_END.search(text, before[0], before[1]) else SPACE


def _last_fitting(tokens: Callable[[int, int], int], first: int, n: int, limit: int) -> int:
    """The last word index `last` >= first with tokens(first, last) <= limit (first if none fits)."""
    # Galloping then bisection: O(log) counts per chunk, so a slow tokenizer callable stays cheap.
    lo, step = first, 1
    while lo + step < n and tokens(first, lo + step) <= limit:
        lo += step
        step *= 2
    hi = min(lo + step, n)  # tokens(first, hi) > limit, or hi == n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tokens(first, mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def _best_end(tokens: Callable[[int, int], int], strength: list[int], first: int, floor: int, last: int,
              limit: int) -> int:
    """The strongest boundary to end on in [floor, last], among ends that fill at least half the chunk."""
    best, best_strength = last, strength[last + 1]
    for end in range(last - 1, floor - 1, -1):
        if strength[end + 1] > best_strength:
            if 2 * tokens(first, end) < limit:
                break
            best, best_strength = end, strength[end + 1]
            if best_strength == PARAGRAPH:
                break
    return best


def _next_start(tokens: Callable[[int, int], int], strength: list[int], first: int, last: int,
                limit: int, overlap: int) -> int:
    """Where the next chunk starts: inside the last `overlap` tokens, yet leaving room to get past `last`."""
    start = last + 1
    candidates = []
    k = last
    while k > first and overlap and tokens(k, last) <= overlap and tokens(k, last + 1) <= limit:
        candidates.append(k)
        k -= 1
    if candidates:
        # The earliest start among the strongest boundaries: most overlap at the best seam.
        strongest = max(strength[c] for c in candidates)
        start = min(c for c in candidates if strength[c] == strongest)
    return start
