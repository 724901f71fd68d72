"""Small JSON Schema building blocks shared by every published schema."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_PREFIX = "urn:context-assembly:schema:"

# Ids of definition files double as file names ({id}.json): the repository's rule
# (`workspace.repository.is_safe_id`) spelled as a pattern, so what the schema accepts `create`,
# `get` and `list` can address: 1-128 letters, digits, '_', '.' or '-', starting with a letter or
# digit, not ending in '.', and no Windows device name (con, nul, com1, ...) before the first dot.
_DEVICE = "|".join("".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in name)
                   for name in ("con", "prn", "aux", "nul", "com[0-9]", "lpt[0-9]"))
FILE_ID_PATTERN = rf"^(?!(?:{_DEVICE})(?:\.|$))[A-Za-z0-9](?:[A-Za-z0-9_.-]{{0,126}}[A-Za-z0-9_-])?$"
FILE_ID_RULE = ("1-128 letters, digits, '_', '.' or '-', starting with a letter or digit, not ending in '.', "
                "not a Windows device name (con, nul, com1, ...)")
# Graph views are no repository's files: their store names them (`stores/kuzu/views.py` VIEW_ID).
VIEW_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"

Schema = dict[str, Any]


def schema_id(name: str) -> str:
    return ID_PREFIX + name


def document(name: str, title: str, description: str, body: Schema) -> Schema:
    """A top-level schema: dialect, id, title and description first (editors read them)."""
    return {"$schema": DIALECT, "$id": schema_id(name), "title": title, "description": description, **body}


def ref(definition: str) -> Schema:
    return {"$ref": f"#/$defs/{definition}"}


def fields(properties: Mapping[str, Schema], required: Sequence[str] = (), *, closed: bool = True,
           **extra: Any) -> Schema:
    """An object schema without title (top-level documents carry theirs in `document`)."""
    schema: Schema = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    schema.update(extra)
    return schema


def obj(
    title: str,
    description: str,
    properties: Mapping[str, Schema],
    required: Sequence[str] = (),
    *,
    closed: bool = True,
    **extra: Any,
) -> Schema:
    """An object schema; `closed` rejects properties it does not list."""
    return {"title": title, "description": description,
            **fields(properties, required, closed=closed, **extra)}


def described(schema: Schema, description: str, default: Any = None, *, title: str | None = None) -> Schema:
    """`schema` with a description (and a default, when not None) for editors."""
    out: Schema = {}
    if title:
        out["title"] = title
    out.update(schema)
    out["description"] = description
    if default is not None:
        out["default"] = default
    return out


def enum(values: Iterable[str], description: str, default: str | None = None, *,
         title: str | None = None) -> Schema:
    return described({"enum": list(values)}, description, default, title=title)


def listing(pairs: Iterable[tuple[str, str]]) -> str:
    """`name: description` lines, appended to descriptions so editors show every choice."""
    return "\n".join(f"- `{name}`: {text}" for name, text in pairs)


def string(description: str, default: str | None = None) -> Schema:
    return described({"type": "string"}, description, default)


def strings(description: str, *, unique: bool = False) -> Schema:
    schema: Schema = {"type": "array", "items": {"type": "string", "minLength": 1}}
    if unique:
        schema["uniqueItems"] = True
    return described(schema, description)


# The largest integer every JSON reader holds exactly (a double's 53 bits): a count above it (1e30
# written for "no limit") became an integer no snapshot or answer could encode.
SAFE_INTEGER = 2**53 - 1


def integer(description: str, minimum: int = 0, default: int | None = None) -> Schema:
    return described({"type": "integer", "minimum": minimum, "maximum": SAFE_INTEGER}, description, default)


def boolean(description: str, default: bool | None = None) -> Schema:
    return described({"type": "boolean"}, description, default)


def file_id(what: str, pattern: str = FILE_ID_PATTERN, rule: str = FILE_ID_RULE) -> Schema:
    return described({"type": "string", "pattern": pattern},
                     f"The {what}'s id; also its file name ({{id}}.json): {rule}.")


SCHEMA_KEY: Schema = {
    "type": "string",
    "description": "The JSON Schema this file follows (lets editors validate and complete it).",
}


def one_or_list(single: Schema, title: str, description: str, *, unique: bool = False) -> Schema:
    """A value or an array of such values; `if/then/else` keeps error paths precise."""
    many: Schema = {"type": "array", "items": single, "minItems": 1}
    if unique:
        many["uniqueItems"] = True
    return {"title": title, "description": description,
            "if": {"type": "array"}, "then": many, "else": single}
