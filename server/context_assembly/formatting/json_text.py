"""Definition files in JSON: parsed keeping each number's own spelling, written back with the
canonical key order, two-space indentation and a final newline. An object or array holding only
scalars stays on one line (below the top level) when the line fits in WIDTH columns (`{ "field": "input.text", ... }`,
`["a", "b"]`); every other one has a key or element per line."""

from __future__ import annotations

import json
import math
from typing import Any

from .order import Schema, item_schemas, ordered_keys

INDENT = "  "
WIDTH = 100


class FormatError(ValueError):
    """A file that cannot be formatted (it does not parse, or formatting would change its value)."""


class RawInt(int):
    """An integer that remembers how it was written (`-0`, leading zeros are not JSON anyway)."""

    text: str

    def __new__(cls, text: str) -> RawInt:
        number = super().__new__(cls, int(text))
        number.text = text
        return number


class RawFloat(float):
    """A number with a fraction or exponent, written back exactly as it was (`1.50`, `1e3`)."""

    text: str

    def __new__(cls, text: str) -> RawFloat:
        number = super().__new__(cls, float(text))
        number.text = text
        return number


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:  # formatting would silently drop one of them
            raise FormatError(f"the key {key!r} appears twice in one object")
        result[key] = value
    return result


def _constant(name: str) -> Any:
    raise FormatError(f"{name} is not JSON")


def load_json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_int=RawInt, parse_float=RawFloat,
                          parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise FormatError(f"line {exc.lineno} column {exc.colno}: {exc.msg}") from exc


def dump_json(value: Any, node: Schema | None, root: Schema) -> str:
    out: list[str] = []
    _emit(value, node, root, 0, out, 0)
    out.append("\n")
    return "".join(out)


def _emit(value: Any, node: Schema | None, root: Schema, depth: int, out: list[str], column: int) -> None:
    """`column`: where the value starts on its line (the indentation and the key before it)."""
    if depth and (one_line := _one_line(value, node, root)) is not None and column + len(one_line) + 1 <= WIDTH:
        out.append(one_line)
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        keys, children = ordered_keys(value, node, root)
        if not all(isinstance(key, str) for key in keys):
            raise FormatError("object keys must be strings")
        inner = INDENT * (depth + 1)
        out.append("{\n")
        for index, key in enumerate(keys):
            prefix = f"{inner}{_string(key)}: "
            out.append(prefix)
            _emit(value[key], children.get(key), root, depth + 1, out, len(prefix))
            out.append(",\n" if index < len(keys) - 1 else "\n")
        out.append(INDENT * depth + "}")
    elif isinstance(value, list):
        if not value:
            out.append("[]")
            return
        inner = INDENT * (depth + 1)
        out.append("[\n")
        for index, (item, sub) in enumerate(zip(value, item_schemas(value, node, root), strict=True)):
            out.append(inner)
            _emit(item, sub, root, depth + 1, out, len(inner))
            out.append(",\n" if index < len(value) - 1 else "\n")
        out.append(INDENT * depth + "]")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, RawInt | RawFloat):
        out.append(value.text)
    elif value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        out.append(json.dumps(value))  # true, false, null, and numbers built in code
    else:
        raise FormatError(f"{value!r} cannot be written as JSON")


def _one_line(value: Any, node: Schema | None, root: Schema) -> str | None:
    """A non-empty object or array of scalars on one line; None for anything else."""
    if isinstance(value, dict) and value and not any(_is_container(v) for v in value.values()):
        keys, _ = ordered_keys(value, node, root)
        return "{ " + ", ".join(f"{_string(key)}: {_scalar(value[key])}" for key in keys) + " }"
    if isinstance(value, list) and value and not any(_is_container(v) for v in value):
        return "[" + ", ".join(_scalar(item) for item in value) + "]"
    return None


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list) and bool(value)


def _scalar(value: Any) -> str:
    out: list[str] = []
    _emit(value, None, {}, 0, out, 0)
    return "".join(out)


def _string(text: str) -> str:
    # keep non-ASCII as written, but never emit a lone surrogate (it cannot be encoded as UTF-8)
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        return json.dumps(text)
    return json.dumps(text, ensure_ascii=False)
