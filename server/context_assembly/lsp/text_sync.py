"""Applying `textDocument/didChange` changes to an open document's text.

pygls applies an incremental change by splitting the whole text with `str.splitlines`, which
also breaks lines at U+2028, U+0085, form feeds and other characters LSP does not count: after
such a character in a string, every later change lands in the wrong place. It also walks every
line in Python, which costs ~20 ms per keystroke on a 100k-line file. Here positions go through
the LSP line index (only `\\n`, `\\r\\n`, `\\r` end a line, columns in the negotiated encoding),
kept per document and shifted by each change rather than recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from ..documents import LineIndex


class TextSync:
    """The line index of each open document's current text (a cache: rebuilt when it is stale)."""

    def __init__(self) -> None:
        self._indexes: dict[str, LineIndex] = {}

    def apply(self, uri: str, text: str, changes: Sequence[types.TextDocumentContentChangeEvent],
              encoding: str) -> str:
        """`text` after `changes`, applied in order as LSP says."""
        from ..documents import LineIndex  # late: the documents package is not needed to answer `initialize`

        index = self._indexes.get(uri)
        if index is None or index.text is not text:
            index = LineIndex(text)
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                start = index.position_to_offset(change.range.start.line, change.range.start.character, encoding)
                end = index.position_to_offset(change.range.end.line, change.range.end.character, encoding)
                end = max(start, end)  # a reversed range: LSP does not allow one; read it as empty
                text = text[:start] + change.text + text[end:]
                index = index.edited(text, start, end, start + len(change.text))
            else:
                text = change.text
                index = LineIndex(text)
        self._indexes[uri] = index
        return text

    def forget(self, uri: str) -> None:
        self._indexes.pop(uri, None)
