"""Where the cursor is: the JSON pointer and part (key or value) from the tolerant parser, the
string or word being typed and the range a completion replaces, and what the place means
(a condition's field, an operator, a memory reference, a section, a step type, ...)."""

from __future__ import annotations

import re
from typing import Any

import attrs

from ..documents.pointers import resolve_pointer
from .documents import EditorDocument

_WORD = re.compile(r"[A-Za-z0-9_.\-/:*@$]")  # ':' only inside a YAML word (`kv://a`), see `_in_word`
REFERENCE_LISTS = ("add_memories", "exclude_memories", "include", "exclude", "always_include")
OPERATOR_KEYS = ("operator", "op")
STEP_LISTS = ("pipeline", "then_steps", "else_steps")


@attrs.define
class Cursor:
    offset: int
    tokens: tuple[str, ...]  # pointer tokens at the cursor (for a key: ending in the partial key)
    part: str  # "key" | "value"
    start: int  # what a completion replaces: [start, end)
    end: int
    in_string: bool  # the cursor is inside a (possibly unclosed) quoted string
    typed: str  # the text from `start` to the cursor
    after_string: bool = False  # right after the quote that closed a string: nothing to complete
    in_comment: bool = False  # in a YAML comment: nothing to complete

    @property
    def container(self) -> tuple[str, ...]:
        """The object whose key is being typed (for a key) / the member's parent (for a value)."""
        return self.tokens[:-1]

    @property
    def last(self) -> str:
        return self.tokens[-1] if self.tokens else ""


def _string_start(line: str) -> int | None:
    """Index of the opening quote of the string the end of `line` is inside, else None."""
    start = None
    i = 0
    quote = None
    while i < len(line):
        ch = line[i]
        if quote is not None:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote, start = None, None
        elif ch in "\"'" and (ch == '"' or _yaml_quote_ok(line, i)):
            quote, start = ch, i
        i += 1
    return start if quote is not None else None


def _yaml_quote_ok(line: str, i: int) -> bool:
    before = line[:i].rstrip()
    return before == "" or before[-1] in ":[,{-"


def _yaml_comment_start(line: str) -> int | None:
    """Index of the '#' that starts a comment in the YAML `line` (at its start or after a space
    or tab, outside quotes), else None."""
    quote = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote is not None:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote and quote == "'" and line[i + 1:i + 2] == "'":
                i += 1  # '' inside a single-quoted string
            elif ch == quote:
                quote = None
        elif ch in "\"'" and _yaml_quote_ok(line, i):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
        i += 1
    return None


def _in_word(text: str, i: int, line_end: int, yaml: bool) -> bool:
    """Whether `text[i]` belongs to the word being typed. A ':' does in a YAML plain scalar
    (`kv://a`, `kg_entity:X`) but not as a mapping's indicator (followed by a space or the line's
    end), nor ever outside a JSON string: a completion must not replace the colon after a key."""
    if not _WORD.match(text[i]):
        return False
    return text[i] != ":" or yaml and i + 1 < line_end and not text[i + 1].isspace()


def cursor_at(document: EditorDocument, offset: int) -> Cursor:
    text = document.text
    offset = min(max(offset, 0), len(text))
    lines = document.parsed.lines
    line = lines.line_of(offset)
    line_start, line_end = lines.line_start(line), lines.line_end(line)
    prefix = text[line_start:offset]
    quote_index = _string_start(prefix) if document.kind_format == "json" or "'" in prefix or '"' in prefix \
        else None
    if quote_index is not None:
        quote = prefix[quote_index]
        start = line_start + quote_index + 1
        end = offset
        while end < line_end and text[end] != quote:
            end += 2 if text[end] == "\\" and quote == '"' else 1
        end = min(end, line_end)
        in_string = True
    else:
        yaml = document.kind_format == "yaml"
        start = offset
        while start > line_start and _in_word(text, start - 1, line_end, yaml):
            start -= 1
        end = offset
        while end < line_end and _in_word(text, end, line_end, yaml):
            end += 1
        in_string = False
    # a quote that closes a string just before the cursor: anything offered would go after it
    after_string = quote_index is None and prefix[-1:] in ("\"", "'") and _string_start(prefix[:-1]) is not None
    in_comment = document.kind_format == "yaml" and "#" in prefix and _yaml_comment_start(prefix) is not None
    # the parser's view at the start of the token being typed (a key being typed ends the pointer)
    tokens, part = document.parsed.pointer_tokens_at(offset)
    return Cursor(offset, tuple(str(t) for t in tokens), part, start, end, in_string, text[start:offset],
                  after_string, in_comment)


def key_reading(document: EditorDocument, cursor: Cursor) -> Cursor | None:
    r"""YAML reads a word alone on its line below a key (`contribution:\n  pri`), or a file that
    holds only a word, as that key's (the document's) scalar value; while it is being typed, it is
    rather the first key of the mapping that value is to be. The cursor read that way, else None."""
    if document.kind_format != "yaml" or cursor.part != "value" or cursor.in_string or cursor.start == cursor.end:
        return None
    if document.parsed.plain_scalar_at(cursor.offset) != (cursor.start, cursor.end):
        return None  # quoted, a block scalar, tagged, several words or lines, or no such node
    lines = document.parsed.lines
    if document.text[lines.line_start(lines.line_of(cursor.start)):cursor.start].strip(" \t"):
        return None  # `key: word`, `- word`: a value indeed
    return attrs.evolve(cursor, tokens=(*cursor.tokens, document.text[cursor.start:cursor.end]), part="key")


def object_at(document: EditorDocument, tokens: tuple[str, ...]) -> dict[str, Any] | None:
    value = document.parsed.value
    if value is None:
        return None
    found = resolve_pointer(value, tokens)
    return found if isinstance(found, dict) else None


# -- what the place means --------------------------------------------------------------------------


def is_field(cursor: Cursor) -> bool:
    return cursor.part == "value" and cursor.last == "field"


def is_operator(cursor: Cursor) -> bool:
    return cursor.part == "value" and cursor.last in OPERATOR_KEYS


def is_reference(cursor: Cursor) -> bool:
    if cursor.part != "value":
        return False
    tokens = cursor.tokens
    if len(tokens) >= 2 and tokens[-2] in REFERENCE_LISTS and tokens[-1].isdigit():
        return True
    if tokens and tokens[-1] in ("include", "exclude", "memory", "target", "source"):
        return True
    return len(tokens) >= 3 and tokens[-3] in REFERENCE_LISTS and tokens[-1] in ("path", "memory")


def is_section(cursor: Cursor) -> bool:
    if cursor.part == "key":
        return len(cursor.tokens) >= 2 and cursor.tokens[-2] in ("set_priority", "setPriority")
    return cursor.last == "section" or cursor.last == "target"


def is_priority(cursor: Cursor) -> bool:
    if cursor.part != "value":
        return False
    tokens = cursor.tokens
    if len(tokens) >= 2 and tokens[-2] in ("set_priority", "setPriority"):
        return True
    return cursor.last == "priority" and "contribution" in tokens


def is_step_type(cursor: Cursor) -> bool:
    tokens = cursor.tokens
    return cursor.part == "value" and len(tokens) >= 3 and tokens[-1] in ("type", "step") \
        and tokens[-3] in STEP_LISTS and tokens[-2].isdigit()


# -- ingestion pipelines ---------------------------------------------------------------------------


def is_trigger(document: EditorDocument, cursor: Cursor) -> bool:
    return document.kind == "ingestion-pipeline" and cursor.part == "value" and cursor.tokens == ("trigger",)


def is_processor_type(document: EditorDocument, cursor: Cursor) -> bool:
    tokens = cursor.tokens
    return document.kind == "ingestion-pipeline" and cursor.part == "value" and len(tokens) == 3 \
        and tokens[0] == "processors" and tokens[1].isdigit() and tokens[2] == "type"
