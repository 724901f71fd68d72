"""Formatting of an open definition document as LSP text edits: the formatter's result, reduced
to the lines that change (so the caret and folds elsewhere stay where they are)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from ..documents import parse_document
from ..formatting import FormatError, format_text
from .documents import EditorDocument, Range

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # LSP line ends only (not U+2028)
TextEdit = dict[str, Any]


def formatted(document: EditorDocument) -> str | None:
    """The document's text formatted, or None when it cannot be (it does not parse)."""
    try:
        return format_text(document.text, document.path.name, document.kind)
    except FormatError:
        return None


def format_edits(document: EditorDocument, encoding: str, selection: Range | None = None) -> list[TextEdit] | None:
    """The edits that format the document (`selection`: only those touching its lines, when they
    can be applied alone without changing the document's value; else all of them)."""
    target = formatted(document)
    if target is None:
        return None
    edits = _line_edits(document.text, target)
    if selection is not None:
        first, last = selection["start"]["line"], selection["end"]["line"]
        chosen = [edit for edit in edits if edit[0] <= last and edit[1] >= first]
        if chosen != edits and _keeps_value(document, chosen):
            edits = chosen
    return [_text_edit(document, start, end, new, encoding) for _first, _last, start, end, new in edits]


def _line_edits(old: str, new: str) -> list[tuple[int, int, int, int, str]]:
    """(first line, last line, start offset, end offset, new text) for each changed block of lines."""
    old_lines, new_lines = _LINE.findall(old), _LINE.findall(new)
    offsets = [0]
    for line in old_lines:
        offsets.append(offsets[-1] + len(line))
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            edits.append((i1, max(i1, i2 - 1), offsets[i1], offsets[i2], "".join(new_lines[j1:j2])))
    return edits


def _keeps_value(document: EditorDocument, edits: list[tuple[int, int, int, int, str]]) -> bool:
    text = document.text
    for _first, _last, start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    parsed = parse_document(text, document.path.name)
    return not parsed.syntax_errors and parsed.value == document.value


def _text_edit(document: EditorDocument, start: int, end: int, new: str, encoding: str) -> TextEdit:
    return {"range": document.range(start, end, encoding), "newText": new}
