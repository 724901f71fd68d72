"""Integers JSON input may hold that no store keeps exactly.

orjson reads an integer literal outside -2^63 .. 2^64-1 as a float without a word
(18446744073709551617 becomes 1.8446744073709552e+19), so a value written that way would be
stored and read back changed. Input is refused instead, with the number named. Only a literal of
20 or more digits, or a negative one of 19, can be out of range, so a message without such a run (anywhere, even
inside a string) costs one pass in C; one with it is read again by the standard
library, whose integers are exact, to tell a number from a string that looks like one.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

INT_MIN, UINT_MAX = -(2**63), 2**64 - 1
# every digit as "1", a minus as "2", anything else as "0": what may be out of range is then a
# substring search in C (~0.7 µs for a 600-byte request, where a regular expression took 5.5 µs on
# every message). Every positive literal of 19 digits is in range (below 2^64 - 1): only 20 digits
# or more, or a minus and 19, go to the slow, exact check (a nanosecond timestamp does not).
_DIGITS = bytes(0x31 if 0x30 <= c <= 0x39 else 0x32 if c == 0x2D else 0x30 for c in range(256))
_LONG_RUN, _LONG_NEGATIVE = b"1" * 20, b"2" + b"1" * 19


class InexactNumber(ValueError):
    """A JSON integer literal orjson would read as a float."""

    def __init__(self, literal: str) -> None:
        shown = literal if len(literal) <= 40 else literal[:37] + "..."
        super().__init__(f"the integer {shown} is outside the range JSON numbers are kept in "
                         f"({INT_MIN} to {UINT_MAX}): write it as a string")
        self.literal = literal


def _checked(literal: str) -> int:
    value = int(literal)
    if not INT_MIN <= value <= UINT_MAX:
        raise InexactNumber(literal)
    return value


def might_be_inexact(raw: bytes) -> bool:
    """Whether `raw` has a run of digits orjson may read as a float (20+, or a minus and 19)."""
    mapped = raw.translate(_DIGITS)
    return _LONG_RUN in mapped or _LONG_NEGATIVE in mapped


def inexact_integer(data: bytes | str) -> InexactNumber | None:
    """The first integer literal of the JSON `data` (already known to parse) that orjson reads as a
    float, or None."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if not might_be_inexact(raw):
        return None
    try:
        json.loads(raw, parse_int=_checked)
    except InexactNumber as exc:
        return exc
    except (ValueError, RecursionError):  # what orjson read, the standard library may not: no verdict
        return None
    return None


def loads_exact(data: bytes | str) -> Any:
    """`orjson.loads`, refusing (InexactNumber) an integer it would read as a float."""
    value = orjson.loads(data)
    problem = inexact_integer(data)
    if problem is not None:
        raise problem
    return value
