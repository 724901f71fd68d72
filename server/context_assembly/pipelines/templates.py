"""Step-parameter templates: `${variable}` filled from the request, the query and earlier outputs.

A parameter that is exactly one `${x}` keeps the value's type (a number stays a number); anything
else is string interpolation. Filled values are never evaluated again, so a value that happens to
contain `${...}` or `{{...}}` stays literal text. An unknown variable is an error naming it, never
an empty string.

`{{field}}` is the separate, logic-less template of the `format` step: item fields only. A template
holding both is filled into parts (`fill_parts`) and rendered part by part, so a value a `${...}`
filled in is never read as a `{{field}}` (a task text cannot pull an item's metadata into view).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import define, field

from ..registry.values import MISSING
from ..registry.variables import ADDVAR_PREFIX, FIELD_ALIASES, INPUT_TEXT, SCOPE_PREFIX, canonical_field
from .items import Item

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_WHOLE = re.compile(r"^\$\{([^}]*)\}$")
_FIELD_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*\}\}")
QUERY = "query"
ITEM = "item"
MAX_TEMPLATE_DEPTH = 32


class TemplateError(ValueError):
    """A `${variable}` that cannot be filled."""

    def __init__(self, variable: str, message: str, missing_key: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable
        self.missing_key = missing_key  # a request variable the request does not carry


def is_request_key(name: str) -> bool:
    """`scope.<scope>.<field>`, `addVar.<name>`, `input.text` or a seed-004 alias of one."""
    return name in FIELD_ALIASES or name == INPUT_TEXT or name.startswith((SCOPE_PREFIX, ADDVAR_PREFIX))


@define
class Variables:
    """What `${...}` may read at one point of a pipeline."""

    lookup: Mapping[str, Any]
    query: str = ""
    outputs: Mapping[str, list[Item]] = field(factory=dict)  # alias -> that step's items
    item: Item | None = None  # per-item parameters (graph_view_expand params, annotate fields)
    used: set[str] = field(factory=set)  # request keys read, for cache keys and traces

    def resolve(self, name: str) -> Any:
        name = name.strip()
        if name == QUERY:
            return self.query
        if is_request_key(name):
            return self._request_value(name)
        head, _, rest = name.partition(".")
        if head == ITEM and self.item is not None:
            return _item_path(self.item, rest, name)
        if head in self.outputs:
            return _output_path(self.outputs[head], rest, name)
        raise TemplateError(name, f"unknown variable ${{{name}}}: not a request variable (scope.<scope>.<field>, "
                            "addVar.<name>, input.text), ${query}, or the alias of an earlier step"
                            + (f" (known aliases: {', '.join(sorted(self.outputs))})" if self.outputs else ""))

    def _request_value(self, name: str) -> Any:
        key = canonical_field(name)
        self.used.add(key)
        value = self.lookup.get(key, MISSING)
        if value is MISSING or value is None:
            raise TemplateError(name, f"the request has no value for ${{{name}}}", missing_key=key)
        return value


def _item_path(item: Item, rest: str, name: str) -> Any:
    value = item.get(rest) if rest else item.content
    if value is MISSING:
        raise TemplateError(name, f"the item has no field '{rest}' for ${{{name}}}")
    return value


def _output_path(items: list[Item], rest: str, name: str) -> Any:
    if not rest:
        return "\n".join(i.content for i in items)
    if rest == "count":
        return len(items)
    index, _, item_field = rest.partition(".")
    if not index.isdigit():
        raise TemplateError(name, f"${{{name}}}: after an alias use .count, or .<n> / .<n>.<field>")
    if int(index) >= len(items):
        raise TemplateError(name, f"${{{name}}}: the step produced {len(items)} item(s)")
    return _item_path(items[int(index)], item_field, name)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def fill(value: Any, variables: Variables, depth: int = 0) -> Any:
    """`value` with every `${...}` in its strings filled (recursively in lists and dicts)."""
    if depth > MAX_TEMPLATE_DEPTH:
        raise TemplateError("", "parameters are nested too deeply")
    if isinstance(value, str):
        return fill_string(value, variables)
    if isinstance(value, list):
        return [fill(v, variables, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, variables, depth + 1) for k, v in value.items()}
    return value


def fill_string(text: str, variables: Variables) -> Any:
    if "${" not in text:
        return text
    whole = _WHOLE.match(text)
    if whole:
        return variables.resolve(whole.group(1))
    return PLACEHOLDER.sub(lambda m: _text(variables.resolve(m.group(1))), text)


Part = tuple[str, bool]  # (text, filled): True for a value a `${...}` put there (literal text)


def fill_parts(text: str, variables: Variables) -> list[Part]:
    """`text` split at its `${...}`, each filled: the template's own text and the filled values apart."""
    parts: list[Part] = []
    end = 0
    for match in PLACEHOLDER.finditer(text):
        parts += [(text[end:match.start()], False), (_text(variables.resolve(match.group(1))), True)]
        end = match.end()
    parts.append((text[end:], False))
    return [part for part in parts if part[0]]


def placeholders(value: Any, depth: int = 0) -> list[str]:
    """Every `${...}` variable name in `value`, in order (for validation)."""
    if depth > MAX_TEMPLATE_DEPTH:
        return []
    if isinstance(value, str):
        return [m.group(1).strip() for m in PLACEHOLDER.finditer(value)]
    if isinstance(value, list):
        return [name for v in value for name in placeholders(v, depth + 1)]
    if isinstance(value, dict):
        return [name for v in value.values() for name in placeholders(v, depth + 1)]
    return []


def render_fields(template: str | Sequence[Part], item: Item) -> str:
    """The `format` step's `{{field}}` template over one item; a missing field renders as "".
    Given parts (`fill_parts`), only the template's own text is rendered: filled values stay as they are."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        value = item.get(name)
        return "" if value is MISSING else _text(value)

    parts = [(template, False)] if isinstance(template, str) else template
    return "".join(text if filled else _FIELD_PLACEHOLDER.sub(one, text) for text, filled in parts)
