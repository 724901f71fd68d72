"""The shape of a method's params: which keys it needs, of which JSON type.

Definitions and assembly requests have JSON Schemas of their own (checked by the repositories and
`parse_request`); this covers the small envelopes around them (`{id, updates}`, `{uri, value}`), so
a missing `id` or a `uri` that is not a string is an InvalidParams error listing every problem.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from attrs import frozen

from ..errors import InvalidParamsError


def _count(value: Any) -> bool:
    """A whole number from 1 (2.0 read as 2, as the schemas count integers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return (isinstance(value, int) or math.isfinite(value) and value.is_integer()) and 1 <= value <= 2**53 - 1


JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "boolean": lambda v: isinstance(v, bool),
    "count": _count,
    "any": lambda v: True,
}
_DESCRIBE = {"string": "a string", "object": "an object", "array": "an array", "strings": "an array of strings",
             "boolean": "a boolean", "count": "a whole number from 1", "any": "any JSON value"}


@frozen
class Field:
    name: str
    type: str  # a key of JSON_TYPES
    required: bool = True
    nullable: bool = False  # null counts as absent

    def problem(self, params: dict[str, Any]) -> str | None:
        if self.name not in params or (self.nullable and params[self.name] is None):
            return "is required" if self.required else None
        if not JSON_TYPES[self.type](params[self.name]):
            return f"must be {_DESCRIBE[self.type]}"
        return None


@frozen
class Shape:
    """The keys a method reads; other keys are left to the method (definitions carry any key)."""

    fields: tuple[Field, ...]

    def errors(self, params: dict[str, Any]) -> list[dict[str, str]]:
        out = []
        for spec in self.fields:
            problem = spec.problem(params)
            if problem is not None:
                out.append({"path": f"/{spec.name}", "message": problem})
        return out

    def describe(self) -> dict[str, str]:
        return {f.name: f.type + ("" if f.required else "?") for f in self.fields}


def shape(**fields: str) -> Shape:
    """`shape(id="string", active_only="boolean?")`: a trailing `?` makes a key optional (null allowed)."""
    return Shape(tuple(Field(name, kind.rstrip("?"), required=not kind.endswith("?"), nullable=kind.endswith("?"))
                       for name, kind in fields.items()))


EMPTY = Shape(())


def require_object(params: Any) -> dict[str, Any]:
    """Params of every method are an object; absent params count as `{}`."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InvalidParamsError("params must be an object", [{"path": "", "message": "must be an object"}])
    return params


def check(params: dict[str, Any], spec: Shape | None) -> None:
    if spec is None:
        return
    errors = spec.errors(params)
    if errors:
        raise InvalidParamsError("invalid params: " + "; ".join(f"{e['path']} {e['message']}" for e in errors),
                                 errors)


def prefixed(errors: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """Errors of a nested document, with paths from the params' root (`/request/scope_variables`)."""
    return [{**e, "path": prefix + str(e.get("path") or "")} for e in errors]
