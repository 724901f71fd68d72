"""JSON value semantics shared by operators: strict equality and numeric coercion."""

from __future__ import annotations

import re
from typing import Any

# The canonical decimal form that counts as a "numeric string" (as in the peer benchmarks).
_NUMERIC_STRING = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def json_equal(a: Any, b: Any) -> bool:
    """Strict JSON equality: no string/number coercion, booleans equal only booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def as_number(value: Any) -> float | int | None:
    """A number, or a canonical numeric string, as a number; anything else (booleans too) is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and len(value) < 64 and _NUMERIC_STRING.fullmatch(value):
        # an integer string stays an integer: as a float, "1700000000000000001" (a nanosecond
        # timestamp, an id a JavaScript client sends as text) compared as 1700000000000000000
        return float(value) if "." in value else int(value)
    return None


def whole_number(value: Any) -> int | None:
    """`value` as an int when it is what JSON Schema calls an integer, else None (booleans too).

    JSON Schema's `integer` admits `2.0`, and JSON parsers read `2.0` as a float: every place the
    schemas say integer reads its value through this, so 2.0 works as 2 and 2.5 is refused."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def json_type(value: Any, integers: bool = False) -> str:
    """The JSON type name of a Python value, as people read it in error messages.

    `integers=True` says "integer" for whole numbers (where a schema type distinguishes them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "integer" if integers and isinstance(value, int) else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class _Missing:
    """The value of a variable the request does not carry (absent or null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def as_list(value: Any) -> list[Any]:
    """`value` when it is a list, else empty: a malformed definition contributes nothing."""
    return value if isinstance(value, list) else []
