"""The one edit between two versions of a text: what the incremental re-parse starts from.

Found by comparing the texts rather than replaying the client's change events, so it is the same
for incremental and full-text synchronisation, and for several changes in one notification (they
become the one stretch that covers them all).
"""

from __future__ import annotations

import attrs

_CHUNK = 1 << 16  # compare this many characters at a time: slices compare in C


@attrs.frozen
class TextEdit:
    """`old[start:old_end]` became `new[start:new_end]`; everything else is unchanged."""

    start: int
    old_end: int
    new_end: int

    @property
    def delta(self) -> int:
        return self.new_end - self.old_end


def text_edit(old: str, new: str) -> TextEdit | None:
    """The shortest edit turning `old` into `new` (None when they are equal)."""
    if old == new:
        return None
    limit = min(len(old), len(new))
    start = _common_prefix(old, new, limit)
    suffix = _common_suffix(old, new, limit - start)
    return TextEdit(start, len(old) - suffix, len(new) - suffix)


def _common_prefix(old: str, new: str, limit: int) -> int:
    position = 0
    while position < limit:
        end = min(position + _CHUNK, limit)
        if old[position:end] != new[position:end]:
            return position + _first_difference(old[position:end], new[position:end])
        position = end
    return limit


def _common_suffix(old: str, new: str, limit: int) -> int:
    """Length of the common ending, at most `limit` (so it never overlaps the common prefix)."""
    length = 0
    old_end, new_end = len(old), len(new)
    while length < limit:
        step = min(_CHUNK, limit - length)
        a = old[old_end - length - step : old_end - length]
        b = new[new_end - length - step : new_end - length]
        if a != b:
            return length + _first_difference(a[::-1], b[::-1])
        length += step
    return limit


def _first_difference(a: str, b: str) -> int:
    """Index of the first character where two equally long strings differ (binary search on
    slices, so the comparisons run in C)."""
    low, high = 0, len(a)  # a[:low] == b[:low]; they differ somewhere before `high`
    while high - low > 1:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low
