"""Nesting depth limit for parsed values.

Everything in this package walks documents iteratively, but the consumers of `value` (schema
validation, structuring, evaluation) recurse; a value nested deeper than MAX_DEPTH is therefore
refused as a syntax error instead of being handed on.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

MAX_DEPTH = 512
TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels)"

_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\[\s\S])*"?|[\[\]{}]')


def value_too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    if not isinstance(value, dict | list):
        return False
    if _orjson_refuses_deeper_than(limit):
        try:
            orjson.dumps(value)  # ~1 ms per MB, in C: cheaper than walking the value
            return False
        except (orjson.JSONEncodeError, TypeError):
            pass  # too deep for orjson, or not serializable by it (big int, lone surrogate): walk
    return _walk_exceeds(value, limit)


PROBE_DEPTH = 4096  # an orjson writing deeper than this is taken as having no limit of its own


def _orjson_refuses_deeper_than(limit: int) -> bool:
    """orjson.dumps refuses values nested deeper than its own limit (255 in orjson 3.x). When that
    limit is at most ours, a successful dumps proves the value is shallow enough. Its limit is
    probed once (a value PROBE_DEPTH deep at most, whatever `limit` is: building one `limit` deep
    took all memory for a limit of 2**31), so a future orjson with a higher limit only costs
    speed, never correctness."""
    deepest = _orjson_deepest()
    return deepest is not None and deepest <= limit


@functools.cache
def _orjson_deepest() -> int | None:
    """The deepest nesting orjson.dumps writes, None when it writes PROBE_DEPTH levels."""
    deep: list[Any] = []
    for depth in range(1, PROBE_DEPTH + 1):
        deep = [deep]  # `depth + 1` levels: the list and the empty one inside
        try:
            orjson.dumps(deep)
        except (orjson.JSONEncodeError, TypeError):
            return depth
    return None


def _walk_exceeds(value: Any, limit: int) -> bool:
    """Level by level: every container of one depth, then their children (no tuple, no generator
    per container: a method's params are walked on every call)."""
    level = [value]
    depth = 1
    while level:
        if depth > limit:
            return True
        below = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, dict | list):
                    below.append(child)
        level = below
        depth += 1
    return False


def too_deep_offset(text: str, limit: int = MAX_DEPTH) -> int | None:
    """Character offset of the first bracket that opens level `limit + 1` (outside strings)."""
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif char in "]}":
            depth -= 1
    return None
