"""Pointer at a cursor in block YAML from indentation alone.

Used where the node tree cannot answer: the cursor is on a blank line or on text being typed,
or the document does not parse at all. Each line is read as its entries (`- ` item markers,
then a `key:` or a plain scalar); the parents of the cursor are the nearest entries above it at
a smaller column. Flow collections (`[...]`, `{...}`) are not looked into: best effort.
"""

from __future__ import annotations

import re

import attrs

from .lines import LineIndex
from .pointers import Pointer

_ITEM = re.compile(r"-(?=\s|$)[ \t]*")
_KEY = re.compile(r"""(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#:'"\[\]{},][^#:]*?)[ \t]*:(?=\s|$)""")


@attrs.define(frozen=True)
class Entry:
    column: int
    kind: str  # "item" | "key" | "scalar"
    text: str = ""
    end: int = 0  # end column of the key (or scalar)


def line_entries(line: str) -> list[Entry]:
    entries: list[Entry] = []
    column = len(line) - len(line.lstrip(" "))
    while column < len(line) and line[column] != "#":
        item = _ITEM.match(line, column)
        if item is not None:
            entries.append(Entry(column, "item", end=column + 1))
            column = item.end()
            continue
        key = _KEY.match(line, column)
        if key is not None:
            entries.append(Entry(column, "key", _unquote(key.group("key").rstrip()), key.end("key")))
        else:
            scalar = line[column:].split(" #", 1)[0].rstrip()
            entries.append(Entry(column, "scalar", scalar, column + len(scalar)))
        break
    return entries


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] == "'":
        return key[1:-1].replace("''", "'")
    if len(key) >= 2 and key[0] == key[-1] == '"':
        return key[1:-1]
    return key


def indentation_pointer(lines: LineIndex, offset: int) -> tuple[Pointer, str]:
    line = lines.line_of(offset)
    column = offset - lines.line_start(line)
    own = line_entries(lines.line_text(line))
    anchor = own[0].column if own and own[0].column < column else column
    pointer = _parents_pointer(lines, line, anchor)
    in_item = False
    for entry in own:
        if entry.kind == "item":
            if column <= entry.column:
                break
            pointer += (str(_item_index(lines, line, entry.column)),)
            in_item = True
            continue
        if column < entry.column:
            break
        if entry.kind == "key":
            return pointer + (entry.text,), ("key" if column <= entry.end else "value")
        # a word without ':' is a key being typed, unless it is an item's scalar value
        return (pointer, "value") if in_item else (pointer + (entry.text,), "key")
    if in_item:
        return pointer, "value"
    if _siblings_are_items(lines, line, anchor):
        return pointer + (str(_item_index(lines, line, anchor)),), "value"
    return pointer + ("",), "key"


def _parents(lines: LineIndex, line: int, anchor: int) -> list[tuple[int, Entry]]:
    """(line, entry) of every parent of a position at column `anchor`, innermost first."""
    parents: list[tuple[int, Entry]] = []
    for above in range(line - 1, -1, -1):
        if anchor == 0:
            break
        for entry in reversed(line_entries(lines.line_text(above))):
            if entry.column < anchor:
                parents.append((above, entry))
                anchor = entry.column
    return parents


def _parents_pointer(lines: LineIndex, line: int, anchor: int) -> Pointer:
    pointer: Pointer = ()
    for at, entry in reversed(_parents(lines, line, anchor)):
        if entry.kind == "item":
            pointer += (str(_item_index(lines, at, entry.column)),)
        elif entry.kind == "key":
            pointer += (entry.text,)
    return pointer


def _item_index(lines: LineIndex, line: int, column: int) -> int:
    """Index of the item marked at `column` on `line`: the items at that column above it, up
    to the first line that starts left of it (the sequence's parent)."""
    index = 0
    for above in range(line - 1, -1, -1):
        entries = line_entries(lines.line_text(above))
        if not entries:
            continue
        if any(entry.kind == "item" and entry.column == column for entry in entries):
            index += 1
        if entries[0].column < column:
            break
    return index


def _siblings_are_items(lines: LineIndex, line: int, column: int) -> bool:
    """Whether the nearest non-blank line above at the same column is a `- ` item."""
    for above in range(line - 1, -1, -1):
        entries = line_entries(lines.line_text(above))
        if not entries:
            continue
        if entries[0].column < column:
            return False
        if entries[0].column == column:
            return entries[0].kind == "item"
    return False


def indentation_keys(lines: LineIndex, pointer: Pointer) -> set[str] | None:
    """The keys that indentation places directly in the mapping at `pointer` (None: none), read
    the way `indentation_pointer` reads a line's parents, in one pass over the lines: the open
    entries form a stack of growing columns, and an entry closes those at its column or right of it."""
    found: set[str] = set()
    stack: list[tuple[Entry, str | None]] = []  # (entry, the token it adds to the pointer)
    for line in range(lines.line_count()):
        for entry in line_entries(lines.line_text(line)):
            index = 0
            while stack and stack[-1][0].column >= entry.column:
                closed, token = stack.pop()
                if entry.kind == closed.kind == "item" and closed.column == entry.column:
                    index = int(token or 0) + 1  # the next item of the same sequence
            token = str(index) if entry.kind == "item" else entry.text if entry.kind == "key" else None
            if entry.kind == "key" and tuple(t for _, t in stack if t is not None) == pointer:
                found.add(entry.text)
            stack.append((entry, token))
    return found or None
