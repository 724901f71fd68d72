"""Validating documents against the published schemas: errors as `{path, message}`, path-sorted.

jsonschema-rs answers when it can (it reported every error with paths ~190x faster than python on
a 1 MB document); the python `jsonschema` package is the reference implementation and the
fallback. Both paths report the same JSON pointers and the messages are rewritten from the failing
keyword, so which engine answered never shows. The python package (and `referencing`) is imported
when first needed: a first `evaluateRules` validates through jsonschema-rs alone (~30 ms less).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import jsonschema_rs
from attrs import frozen

from ..errors import MISSING_PROPERTY
from ..registry.patterns import check_pattern
from ..registry.steps import TEMPLATE_PATTERN
from ..registry.values import json_type
from ..registry.variables import field_problem
from .build import SCHEMA_NAMES, build_schema
from .fragments import Schema, schema_id

if TYPE_CHECKING:
    import jsonschema
    from referencing import Registry

Engine = Literal["auto", "rust", "python"]
InstancePath = tuple[str | int, ...]
Entry = tuple[str, InstancePath, str]  # (JSON pointer, its path, message)
ItemErrors = tuple[tuple[InstancePath, str], ...]  # one array item's errors: (path inside the item, message)
# `IdentityCache.reuse` (workspace/memo.py): each item's errors, kept or from compute(misses)
Reuse = Callable[[Sequence[Any], Callable[[list[Any]], list[ItemErrors]]], list[ItemErrors]]

# Deeper documents are refused before validation; no definition file comes near either limit.
# jsonschema-rs crashes the process (stack overflow) at around 10 000 levels; python jsonschema
# spends about a dozen frames per level of nested conditions and hits the recursion limit near 75.
MAX_DEPTH = 256
PYTHON_MAX_DEPTH = 40
_LIST_LIMIT = 24  # choices named in one message


def _regex_ok(instance: object) -> bool:
    """`format: regex` means what rules run: RE2, linear time (not Python's `re` syntax)."""
    return not isinstance(instance, str) or check_pattern(instance) is None


@functools.cache
def format_checker() -> jsonschema.FormatChecker:
    """The reference validator's format checks, `regex` as rules run it."""
    import jsonschema

    checker = jsonschema.FormatChecker()
    checker.checks("regex")(_regex_ok)
    return checker


@functools.cache
def _schema(name: str) -> Schema:
    return build_schema(name)


def built_schema(name: str) -> Schema:
    """The schema `name`, built once (until `clear_caches`); callers must not change it."""
    return _schema(name)


@functools.cache
def registry() -> Registry[Any]:
    """Every published schema under its `$id`, so `$ref`s between them (and to them) resolve."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        (schema_id(name), Resource.from_contents(_schema(name), default_specification=DRAFT202012))
        for name in SCHEMA_NAMES
    )


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    """The reference validator for schema `name` (cached)."""
    import jsonschema

    return jsonschema.Draft202012Validator(_schema(name), registry=registry(), format_checker=format_checker())


@functools.cache
def _rs_validator(name: str) -> jsonschema_rs.Validator | None:
    try:
        resources = [(schema_id(n), _schema(n)) for n in SCHEMA_NAMES]
        return jsonschema_rs.validator_for(
            _schema(name), registry=jsonschema_rs.Registry(resources), validate_formats=True,
            formats={"regex": _regex_ok},
        )
    except Exception:  # a construct it cannot compile: the reference implementation answers
        return None


def clear_caches() -> None:
    """Forget built schemas and validators (after the registries changed at run time)."""
    for cached in (_schema, registry, validator, _rs_validator):
        cached.cache_clear()


def validation_errors(name: str, document: Any, engine: Engine = "auto", *,
                      nests_within: int | None = None) -> list[dict[str, str]]:
    """Every way `document` breaks schema `name`, as `[{path, message}]` sorted by JSON pointer.

    `nests_within`: the caller has checked that `document` nests at most that many levels (a
    method's params, checked by `methods.table.call`), so the depth guard need not walk it again."""
    root = _schema(name)
    if engine != "python":
        rs = _rs_validator(name)
        if rs is None and engine == "rust":
            raise RuntimeError(f"jsonschema-rs cannot compile the {name} schema")
        if rs is not None:
            if not _within(nests_within, MAX_DEPTH) and too_deep(document, MAX_DEPTH):
                return _depth_error(MAX_DEPTH)
            try:
                return _report(_from_rs(error, root) for error in rs.iter_errors(document))
            except (ValueError, TypeError, OverflowError):  # e.g. a value that is not JSON
                if engine == "rust":
                    raise
    if not _within(nests_within, PYTHON_MAX_DEPTH) and too_deep(document, PYTHON_MAX_DEPTH):
        return _depth_error(PYTHON_MAX_DEPTH)
    return _report(_from_python(error, root) for error in validator(name).iter_errors(document))


# Keywords whose verdict on an object depends only on its member names and each member's own value,
# and (on the split array member) only on each item's own value.
_MEMBERWISE = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "type", "properties",
                         "required", "additionalProperties"})
_ITEMWISE = frozenset({"type", "items", "title", "description", "$comment"})


class _Whole(Exception):
    """The document must go through `validation_errors` whole (too deep, or not plain JSON)."""


@functools.cache
def _splittable(name: str, member: str) -> bool:
    """Are the errors of `document[member]`'s items independent of everything else?"""
    root = _schema(name)
    spec = root.get("properties", {}).get(member)
    return (set(root) <= _MEMBERWISE and root.get("type") == "object" and isinstance(spec, Mapping)
            and set(spec) <= _ITEMWISE and spec.get("type") == "array")


def validation_errors_by_item(name: str, document: Any, member: str, reuse: Reuse) -> list[dict[str, str]]:
    """`validation_errors(name, document)`, validating only the items of the array `document[member]`
    that `reuse` has no errors for (one call for all of them and the rest of the document).

    Falls back to the whole document when the schema or the document does not split that way."""
    items = document.get(member) if isinstance(document, dict) else None
    rs = _rs_validator(name)
    if rs is None or not isinstance(items, list) or not _splittable(name, member):
        return validation_errors(name, document)
    root = _schema(name)
    outside: list[Entry] = []

    def compute(misses: list[Any]) -> list[ItemErrors]:
        part = {**document, member: misses}  # the depth guard walks only what was not seen before
        if too_deep(part, MAX_DEPTH):
            raise _Whole
        try:
            entries = [_from_rs(error, root) for error in rs.iter_errors(part)]
        except (ValueError, TypeError, OverflowError) as exc:
            raise _Whole from exc
        found: list[ItemErrors] = [()] * len(misses)
        for pointer, path, message in entries:
            if len(path) > 1 and path[0] == member and isinstance(path[1], int):
                found[path[1]] += ((path[2:], message),)
            else:
                outside.append((pointer, path, message))
        return found

    try:
        per_item = reuse(items, compute)
    except _Whole:
        return validation_errors(name, document)
    inside = (_placed((member, i, *relative), message)
              for i, errors in enumerate(per_item) if errors for relative, message in errors)
    return _report([*outside, *inside])


def _placed(path: InstancePath, message: str) -> Entry:
    return _pointer(path), path, message


def too_deep(document: Any, limit: int = PYTHON_MAX_DEPTH) -> bool:
    """True when containers nest deeper than `limit` (level by level: no recursion, no tuples).

    Check this before handing a document to `validator(name)` directly."""
    level = [document] if isinstance(document, dict | list) else []
    for _ in range(limit):
        deeper: list[Any] = []
        for value in level:
            children = value.values() if isinstance(value, dict) else value
            deeper += [child for child in children if isinstance(child, dict | list)]
        if not deeper:
            return False
        level = deeper
    return True


def _within(known: int | None, limit: int) -> bool:
    return known is not None and known <= limit


def _depth_error(limit: int) -> list[dict[str, str]]:
    return [{"path": "", "message": f"the document is nested more than {limit} levels deep"}]


# -- one failure, whichever engine found it --------------------------------------------------------


@frozen
class _Failure:
    path: tuple[str | int, ...]
    keyword: str
    value: Any  # the keyword's value in the schema
    parent: Mapping[str, Any]  # the schema object holding the keyword
    instance: Any
    fallback: str  # the engine's own message
    missing: str | None = None  # required: the absent property
    unexpected: tuple[str, ...] = ()  # additionalProperties: the extra names


def _from_python(error: jsonschema.ValidationError, root: Schema) -> tuple[str, tuple[str | int, ...], str]:
    keyword = str(error.validator)
    parent = error.schema if isinstance(error.schema, Mapping) else {}
    instance, value = error.instance, error.validator_value
    missing = unexpected = None
    if keyword == "required" and isinstance(instance, Mapping):
        missing = next((p for p in value if p not in instance and repr(p) in error.message), None)
    if keyword == "additionalProperties" and isinstance(instance, Mapping):
        unexpected = tuple(_extra_properties(instance, parent))
    failure = _Failure(tuple(error.absolute_path), keyword, value, parent, instance, error.message,
                       missing, unexpected or ())
    return _entry(failure, root)


def _from_rs(error: jsonschema_rs.ValidationError, root: Schema) -> tuple[str, tuple[str | int, ...], str]:
    kind = error.kind
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.PropertyNames):
        inner = _from_rs(kind.error, root)
        return _pointer(tuple(error.instance_path)), tuple(error.instance_path), inner[2]
    schema_path = list(error.schema_path)
    keyword = str(schema_path[-1]) if schema_path else kind.name
    parent = _walk(root, schema_path[:-1])
    missing = kind.property if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required) else None
    unexpected = (tuple(kind.unexpected)
                  if isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties) else ())
    value = parent.get(keyword) if isinstance(parent, Mapping) else None
    failure = _Failure(tuple(error.instance_path), keyword, value, parent if isinstance(parent, Mapping) else {},
                       error.instance, error.message, missing, unexpected)
    return _entry(failure, root)


def _entry(failure: _Failure, root: Mapping[str, Any]) -> tuple[str, tuple[str | int, ...], str]:
    return _pointer(failure.path), failure.path, _message(failure, root)


def _report(entries: Iterable[tuple[str, tuple[str | int, ...], str]]) -> list[dict[str, str]]:
    unique = {(pointer, message): path for pointer, path, message in entries}
    ordered = sorted(unique.items(), key=lambda item: (_sort_key(item[1]), item[0][1]))
    return [{"path": pointer, "message": message} for (pointer, message), _ in ordered]


def _sort_key(path: tuple[str | int, ...]) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, seg, "") if isinstance(seg, int) else (1, 0, seg) for seg in path)


def _pointer(path: Iterable[str | int]) -> str:
    return "".join("/" + str(seg).replace("~", "~0").replace("/", "~1") for seg in path)


def _walk(schema: Any, path: Iterable[str | int]) -> Any:
    for seg in path:
        if isinstance(schema, Mapping) and isinstance(seg, str):
            schema = schema.get(seg)
        elif isinstance(schema, list) and isinstance(seg, int) and 0 <= seg < len(schema):
            schema = schema[seg]
        else:
            return None
    return schema


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """Follow a local `$ref` (`#/$defs/x`) inside the same document."""
    target = schema.get("$ref") if isinstance(schema, Mapping) else None
    if not isinstance(target, str) or not target.startswith("#/"):
        return schema
    parts = [p.replace("~1", "/").replace("~0", "~") for p in target[2:].split("/")]
    resolved = _walk(root, parts)
    return resolved if isinstance(resolved, Mapping) else schema


def _extra_properties(instance: Mapping[str, Any], parent: Mapping[str, Any]) -> list[str]:
    known = parent.get("properties", {})
    patterns = list(parent.get("patternProperties", {}))
    return [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]


# -- messages for people ---------------------------------------------------------------------------

_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string",
               "boolean": "true or false", "object": "an object", "array": "an array", "null": "null"}


def _show(value: Any) -> str:
    if isinstance(value, str):
        text = repr(value)
    elif value is None or isinstance(value, bool | int | float):
        text = json.dumps(value)
    else:
        text = json_type(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _choices(values: Iterable[Any]) -> str:
    items = [str(v) if isinstance(v, str) else repr(v) for v in values]
    more = len(items) - _LIST_LIMIT
    return ", ".join(items[:_LIST_LIMIT]) + (f" and {more} more" if more > 0 else "")


def _article(text: str) -> str:
    return ("an " if text[:1] in "aeiou" else "a ") + text


def _types(types: Any) -> str:
    names = [types] if isinstance(types, str) else list(types or [])
    return " or ".join(_TYPE_NAMES.get(t, t) for t in names)


def _describe(schema: Any, root: Mapping[str, Any]) -> str:
    """A short noun phrase for what a schema accepts ("an integer >= 1", "a ${variable} template")."""
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return "a value of another shape"
    if schema.get("pattern") == TEMPLATE_PATTERN:
        return "a ${variable} template"
    if "title" in schema:
        return _article(str(schema["title"]).lower())
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return "one of " + _choices(schema["enum"])
    if "type" in schema:
        text = _types(schema["type"])
        if "minimum" in schema:
            text += f" >= {schema['minimum']}"
        return text
    return "a value of another shape"


def _message(f: _Failure, root: Mapping[str, Any]) -> str:
    handler = _MESSAGES.get(f.keyword)
    text = handler(f, root) if handler else None
    return text or f.fallback


def _msg_type(f: _Failure, _root: Mapping[str, Any]) -> str:
    return f"expected {_types(f.value)}, got {json_type(f.instance)}"


def _msg_enum(f: _Failure, _root: Mapping[str, Any]) -> str:
    what = f"a known {str(f.parent['title']).lower()}" if "title" in f.parent else "allowed here"
    values = list(f.value or [])
    close = difflib.get_close_matches(f.instance, [v for v in values if isinstance(v, str)], n=3, cutoff=0.6) \
        if isinstance(f.instance, str) else []
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return f"{_show(f.instance)} is not {what}{hint}; expected one of: {_choices(values)}"


def _msg_const(f: _Failure, _root: Mapping[str, Any]) -> str:
    return f"expected {f.value!r}"


def _msg_required(f: _Failure, _root: Mapping[str, Any]) -> str | None:
    return MISSING_PROPERTY.format(f.missing) if f.missing else None


_UNKNOWN = re.compile(r"unknown propert(?:y '(.*)'|ies '(.*?)', ')", re.S)


def unknown_property(message: str) -> str | None:
    """The (first) unknown property a schema error's message names, or None."""
    found = _UNKNOWN.match(message)
    if found is None:
        return None
    return found.group(1) if found.group(1) is not None else found.group(2)


def _msg_additional(f: _Failure, _root: Mapping[str, Any]) -> str | None:
    if not f.unexpected:
        return None
    names = ", ".join(f"'{n}'" for n in f.unexpected)
    known = list(f.parent.get("properties", {}))
    allowed = f" (allowed: {_choices(known)})" if known else ""
    return f"unknown propert{'ies' if len(f.unexpected) > 1 else 'y'} {names}{allowed}"


def _msg_branches(f: _Failure, root: Mapping[str, Any]) -> str | None:
    branches = [b for b in f.value or [] if isinstance(b, Mapping)]
    if branches and all(set(b) == {"required"} for b in branches):
        names = [n for b in branches for n in b["required"]]
        return "needs one of the properties " + ", ".join(f"'{n}'" for n in names)
    if not branches:
        return None
    options = list(dict.fromkeys(_describe(b, root) for b in branches))
    return f"expected {' or '.join(options)}, got {_show(f.instance)}"


def _msg_pattern(f: _Failure, _root: Mapping[str, Any]) -> str:
    if f.parent.get("title") == "Variable key" and isinstance(f.instance, str):
        problem = field_problem(f.instance)
        if problem:
            return problem
    if "title" in f.parent:
        return f"{_show(f.instance)} is not {_article(str(f.parent['title']).lower())}"
    if f.value == TEMPLATE_PATTERN:
        return f"{_show(f.instance)} is not a ${{variable}} template"
    if "description" in f.parent:
        return f"{_show(f.instance)} is not valid here. {f.parent['description']}"
    return f"{_show(f.instance)} does not match the pattern {f.value}"


def _msg_format(f: _Failure, _root: Mapping[str, Any]) -> str:
    if f.value == "regex" and isinstance(f.instance, str):
        return check_pattern(f.instance) or f"{_show(f.instance)} is not a valid regular expression"
    return f"{_show(f.instance)} is not a valid {f.value}"


def _bound(text: str) -> Any:
    return lambda f, _root: f"must be {text} {f.value}"


_MESSAGES: dict[str, Any] = {
    "type": _msg_type,
    "enum": _msg_enum,
    "const": _msg_const,
    "required": _msg_required,
    "additionalProperties": _msg_additional,
    "anyOf": _msg_branches,
    "oneOf": _msg_branches,
    "pattern": _msg_pattern,
    "format": _msg_format,
    "minimum": _bound("at least"),
    "maximum": _bound("at most"),
    "exclusiveMinimum": _bound("greater than"),
    "exclusiveMaximum": _bound("less than"),
    "minLength": lambda f, _r: "must not be empty" if f.value == 1 else f"must be at least {f.value} characters",
    "minItems": lambda f, _r: f"must have at least {f.value} item{'s' if f.value != 1 else ''}",
    "minProperties": lambda f, _r: f"must have at least {f.value} propert{'ies' if f.value != 1 else 'y'}",
    "uniqueItems": lambda f, _r: "must not repeat an item",
}
