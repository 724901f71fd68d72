"""What the editor paints over a definition document, from the registries and the workspace:
semantic tokens (operators, variable keys, memory ids, section names) and inlay hints (a memory
id's section and priority, where a condition's field is read from in the request)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from ..registry.operators import lookup_operator
from ..registry.sections import SECTIONS
from ..registry.variables import canonical_field, variable_origin
from ..workspace.loader import Workspace
from . import context as ctx
from .docs import memory_placement
from .documents import EditorDocument, Range

# Indexes into the legend the server advertises (capabilities.TOKEN_TYPES) are the wire values.
OPERATOR, VARIABLE, MEMORY, SECTION = range(4)
DECLARATION = 1  # bit of "declaration"
_SECTION_NAMES = frozenset(s.name for s in SECTIONS)
_PRIORITY_MAPS = ("set_priority", "setPriority")


@attrs.frozen
class Place:
    """A string of the document that means something: its token type and its text's span."""

    kind: int
    start: int
    end: int
    text: str
    modifiers: int = 0


def places(document: EditorDocument, workspace: Workspace) -> list[Place]:
    """Every operator, field, known memory id and section name, in document order."""
    if document.value is None:
        return []
    found = []
    own_id = document.value.get("id") if document.kind == "persistent-memory" and isinstance(document.value, dict) \
        else None
    for tokens, value, part in _strings(document.value):
        kind, modifiers = _meaning(tokens, value, part, workspace)
        if kind is None and tokens == ("id",) and value == own_id and value in workspace.memories:
            kind, modifiers = MEMORY, DECLARATION
        if kind is None:
            continue
        span = document.parsed.span(list(tokens), part)
        if span is not None and (inner := _inner(document.text, span, value)) is not None:
            found.append(Place(kind, inner[0], inner[1], value, modifiers))
    return sorted(found, key=lambda place: place.start)


def semantic_tokens(document: EditorDocument, workspace: Workspace, encoding: str,
                    selection: Range | None = None) -> list[int]:
    """The LSP relative encoding: (line delta, start delta, length, type, modifiers) per token."""
    data: list[int] = []
    previous_line = previous_start = 0
    for place in places(document, workspace):
        start, end = document.position(place.start, encoding), document.position(place.end, encoding)
        if start["line"] != end["line"] or not _within(start["line"], selection):
            continue  # a token never spans lines
        line, character = start["line"], start["character"]
        delta_start = character - previous_start if line == previous_line else character
        data += [line - previous_line, delta_start, end["character"] - character, place.kind, place.modifiers]
        previous_line, previous_start = line, character
    return data


def inlay_hints(document: EditorDocument, workspace: Workspace, encoding: str,
                selection: Range | None = None) -> list[dict[str, Any]]:
    hints = []
    for place in places(document, workspace):
        label, tooltip = _hint(place, workspace)
        position = document.position(place.end + _closing_quote(document.text, place.end), encoding)
        if label is None or not _within(position["line"], selection):
            continue
        hints.append({"position": position, "label": label, "kind": 1, "paddingLeft": True,
                      "tooltip": tooltip})
    return hints


def _hint(place: Place, workspace: Workspace) -> tuple[str | None, str]:
    if place.kind == MEMORY and not place.modifiers & DECLARATION:
        section, priority = memory_placement(workspace.memories[place.text])
        return f"{section} · {priority}", f"`{place.text}` contributes to the {section} section at {priority} priority"
    if place.kind == VARIABLE:
        origin = variable_origin(place.text)
        if origin is None or origin == place.text:
            return None, ""
        canonical = canonical_field(place.text)
        alias = f" (seed-004 name of {canonical})" if canonical != place.text else ""
        return f"← {origin}", f"read from the request's {origin}{alias}"
    return None, ""


def _meaning(tokens: tuple[str, ...], value: str, part: str, workspace: Workspace) -> tuple[int | None, int]:
    if part == "key":
        return (SECTION if len(tokens) >= 2 and tokens[-2] in _PRIORITY_MAPS and value in _SECTION_NAMES
                else None), 0
    probe = ctx.Cursor(0, tokens, "value", 0, 0, False, value)
    if ctx.is_operator(probe):
        return (OPERATOR if lookup_operator(value) is not None else None), 0
    if ctx.is_field(probe):
        return VARIABLE, 0
    if ctx.is_reference(probe) and value in workspace.memories:
        return MEMORY, 0
    if (ctx.is_section(probe) or ctx.is_reference(probe)) and value in _SECTION_NAMES:
        return SECTION, 0  # `contribution.section`, a cap's or boost's `target` naming a section
    return None, 0


def _strings(value: Any, tokens: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str, str]]:
    """(pointer tokens, text, "key" | "value") for every string value and every key."""
    if isinstance(value, str):
        yield tokens, value, "value"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield (*tokens, str(key)), str(key), "key"
            yield from _strings(item, (*tokens, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*tokens, str(index)))


def _inner(text: str, span: tuple[int, int], value: str) -> tuple[int, int] | None:
    """The span of the string's characters (without quotes), when the source spells it plainly
    (an escaped string's source length differs from its value's, so it gets no token)."""
    start, end = span
    if end - start >= 2 and text[start] in "\"'" and text[end - 1] == text[start]:
        start, end = start + 1, end - 1
    return (start, end) if text[start:end] == value else None


def _closing_quote(text: str, end: int) -> int:
    return 1 if end < len(text) and text[end] in "\"'" else 0


def _within(line: int, selection: Range | None) -> bool:
    return selection is None or selection["start"]["line"] <= line <= selection["end"]["line"]
