"""Canonical key order, read from the published schemas: an object's keys in the order its schema
lists them (`$schema` first), keys the schema does not name after them in their original order.

Which schema applies follows the value as validation would: `$ref`, `allOf`, the `if`/`then`/`else`
branch the value takes, and for `oneOf`/`anyOf` the branch naming most of the object's keys."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import jsonschema

from ..schemas import build_schema

Schema = dict[str, Any]


@functools.cache
def schema(name: str) -> Schema:
    return build_schema(name)


def ordered_keys(value: dict[str, Any], node: Schema | None, root: Schema) -> tuple[list[str], dict[str, Schema]]:
    """The keys of `value` in canonical order, and the schema of each key that has one."""
    known: dict[str, list[Schema]] = {}
    patterns: list[tuple[str, Schema]] = []
    extra: Schema | None = None
    for applied in _applicable(node, value, root):
        for key, sub in applied.get("properties", {}).items():
            known.setdefault(key, []).append(sub)
        patterns += list(applied.get("patternProperties", {}).items())
        if isinstance(applied.get("additionalProperties"), dict):
            extra = applied["additionalProperties"]
    order = [key for key in known if key in value]
    order += [key for key in value if key not in known]
    if "$schema" in value:
        order.remove("$schema")
        order.insert(0, "$schema")
    children: dict[str, Schema] = {}
    for key in order:
        if key in known:
            children[key] = known[key][0] if len(known[key]) == 1 else {"allOf": known[key]}
        elif (sub := _pattern_schema(key, patterns)) is not None or (sub := extra) is not None:
            children[key] = sub
    return order, children


def item_schemas(value: list[Any], node: Schema | None, root: Schema) -> list[Schema | None]:
    """The schema of each element of the array `value`."""
    prefix: list[Schema] = []
    items: Schema | None = None
    for applied in _applicable(node, value, root):
        prefix = applied.get("prefixItems", prefix)
        if isinstance(applied.get("items"), dict):
            items = applied["items"]
    return [prefix[i] if i < len(prefix) else items for i in range(len(value))]


def _applicable(node: Schema | None, value: Any, root: Schema, depth: int = 0) -> Iterator[Schema]:
    """`node` and every subschema that applies to `value` with it."""
    if not isinstance(node, dict) or depth > 64:
        return
    node = _resolve(node, root)
    yield node
    for sub in node.get("allOf", ()):
        yield from _applicable(sub, value, root, depth + 1)
    if "if" in node:
        branch = node.get("then") if _holds(node["if"], value) else node.get("else")
        yield from _applicable(branch, value, root, depth + 1)
    for combinator in ("oneOf", "anyOf"):
        if node.get(combinator):
            best = max(node[combinator], key=lambda sub: _fit(sub, value, root, depth))
            yield from _applicable(best, value, root, depth + 1)


def _fit(node: Schema, value: Any, root: Schema, depth: int) -> int:
    """How well a `oneOf`/`anyOf` branch fits: the keys it names, much more for a matching `const`."""
    if not isinstance(value, dict):
        return 1 if _scalar_fits(_resolve(node, root), value) else 0
    score = 0
    for applied in _applicable(node, {}, root, depth + 1):
        for key, sub in applied.get("properties", {}).items():
            if key in value:
                score += 1
                if isinstance(sub, dict) and "const" in sub:
                    score += 100 if sub["const"] == value[key] else -100
    return score


def _resolve(node: Schema, root: Schema) -> Schema:
    seen = 0
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/") and seen < 32:
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
        node, seen = target, seen + 1
    return node


_JSON_TYPES = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}


def _scalar_fits(node: Schema, value: Any) -> bool:
    """The `type`, `const` and `enum` of a branch against a value that is not an object."""
    if "const" in node:
        return bool(node["const"] == value)
    if "enum" in node:
        return value in node["enum"]
    types = node.get("type")
    if types is None:
        return True
    for name in [types] if isinstance(types, str) else types:
        if name in ("number", "integer"):
            if isinstance(value, int | float) and not isinstance(value, bool):
                return True
        elif isinstance(value, _JSON_TYPES.get(name, ())) and not (name != "boolean" and isinstance(value, bool)):
            return True
    return False


# `if` subschemas are parts of the cached schemas, so they live as long as the process: keyed by id
_VALIDATORS: dict[int, tuple[Schema, jsonschema.protocols.Validator]] = {}


def _holds(condition: Any, value: Any) -> bool:
    if not isinstance(condition, dict):
        return bool(condition)
    entry = _VALIDATORS.get(id(condition))
    if entry is None or entry[0] is not condition:
        entry = _VALIDATORS[id(condition)] = (condition, jsonschema.Draft202012Validator(condition))
    return entry[1].is_valid(value)


def _pattern_schema(key: str, patterns: list[tuple[str, Schema]]) -> Schema | None:
    for pattern, sub in patterns:
        if re.search(pattern, key):
            return sub
    return None
