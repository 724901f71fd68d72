"""Line index: character offsets <-> LSP positions and CLI `line:col`.

Only "\\n", "\\r\\n" and "\\r" end a line, as LSP says. `str.splitlines` is not used because it
also breaks on U+2028, U+0085, form feed and others, which would shift every later line number.

Columns are counted in the negotiated LSP position encoding: "utf-16" (the LSP default; code
units, so an emoji counts 2), "utf-8" (bytes) or "utf-32" (code points = Python `str` indexes).
Lone surrogates (possible in a Python `str`) count as one UTF-16 unit and three UTF-8 bytes, the
same as `surrogatepass` encoding, so nothing here raises on them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

ENCODINGS = ("utf-8", "utf-16", "utf-32")

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_HIGH_SURROGATE = re.compile("[\ud800-\udbff]")


def _check_encoding(encoding: str) -> str:
    normalized = encoding.lower().replace("_", "-")
    if normalized not in ENCODINGS:
        raise ValueError(f"unknown position encoding {encoding!r}; expected one of {ENCODINGS}")
    return normalized


def _units(segment: str, encoding: str) -> int:
    """Length of `segment` in the units of `encoding`."""
    if encoding == "utf-32" or segment.isascii():
        return len(segment)
    if encoding == "utf-16":
        return len(segment.encode("utf-16-le", "surrogatepass")) // 2
    return len(segment.encode("utf-8", "surrogatepass"))


def _chars_within(segment: str, units: int, encoding: str) -> int:
    """How many leading characters of `segment` fit in `units`; a unit count that ends inside a
    character (half a surrogate pair, part of a multi-byte sequence) snaps back to its start."""
    if units <= 0:
        return 0
    if encoding == "utf-32" or segment.isascii():
        return min(units, len(segment))
    if encoding == "utf-16":
        raw = segment.encode("utf-16-le", "surrogatepass")[: 2 * units]
        decoded = raw.decode("utf-16-le", "surrogatepass")
        count = len(decoded)
        # A cut between the two halves of a pair decodes to a lone high surrogate that the
        # original text does not have at that index: step back to the start of the pair.
        if count and _HIGH_SURROGATE.match(decoded[-1]) and segment[count - 1] != decoded[-1]:
            count -= 1
        return count
    if not _has_surrogate(segment):
        # "ignore" drops an incomplete trailing sequence, which is exactly the snap-back.
        return len(segment.encode("utf-8")[:units].decode("utf-8", "ignore"))
    count = used = 0
    for char in segment:  # lone surrogates: rare, and only on this line
        used += _units(char, "utf-8")
        if used > units:
            break
        count += 1
    return count


def _has_surrogate(segment: str) -> bool:
    return re.search("[\ud800-\udfff]", segment) is not None


class LineIndex:
    """Line starts of one text, computed on first use (parsing a file often needs no positions)."""

    __slots__ = ("_ascii", "_starts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._ascii = text.isascii()
        self._starts: np.ndarray | None = None  # int64: an edit shifts the starts after it in C

    # -- lines ---------------------------------------------------------------------------------

    @property
    def starts(self) -> list[int]:
        """Character offset where each line starts (the first is always 0)."""
        starts: list[int] = self._array().tolist()
        return starts

    def _array(self) -> np.ndarray:
        if self._starts is None:
            self._starts = self._compute_starts()
        return self._starts

    def _compute_starts(self) -> np.ndarray:
        import numpy as np  # late: loading a workspace reads documents without positions (numpy ~0.15 s to import)

        text = self.text
        if "\r" not in text and self._ascii:  # characters are bytes: find the breaks in C
            breaks = np.flatnonzero(np.frombuffer(text.encode("ascii"), dtype=np.uint8) == 10) + 1
            return np.concatenate(([0], breaks)).astype(np.int64)
        return np.array([0, *(match.end() for match in _LINE_BREAK.finditer(text))], dtype=np.int64)

    def edited(self, text: str, start: int, old_end: int, new_end: int) -> LineIndex:
        """The index of `text`, this index's text with `[start:old_end]` replaced by
        `text[start:new_end]`: line starts before the edit are kept, those after it shifted, and
        only the edited stretch is scanned. Lazy when this index was never computed either."""
        index = LineIndex(text)
        if self._starts is None:
            return index
        import numpy as np  # loaded: this index's starts were computed
        starts = self._starts
        # A start s is fixed by text[s-1] (a break) and text[s] (no "\n" after a "\r"): starts
        # below `start` and above `old_end` (old text) read only unchanged characters.
        before = max(int(np.searchsorted(starts, start - 1, side="right")), 1)  # line 0 starts at 0
        after = int(np.searchsorted(starts, old_end, side="right"))
        middle = [match.end() for match in _LINE_BREAK.finditer(text, max(start - 1, 0), new_end + 1)
                  if start <= match.end() <= new_end]
        index._starts = np.concatenate((starts[:before], np.array(middle, dtype=np.int64),
                                        starts[after:] + (new_end - old_end)))
        return index

    def line_count(self) -> int:
        return len(self._array())

    def line_start(self, line: int) -> int:
        return int(self._array()[line])

    def line_end(self, line: int) -> int:
        """Offset of the end of the line's content (before its line break)."""
        starts = self._array()
        if line + 1 >= len(starts):
            return len(self.text)
        end = int(starts[line + 1]) - 1
        if self.text[end] == "\n" and end > starts[line] and self.text[end - 1] == "\r":
            end -= 1
        return end

    def line_text(self, line: int) -> str:
        return self.text[self.line_start(line) : self.line_end(line)]

    def line_of(self, offset: int) -> int:
        """0-based line containing `offset` (clamped to the text)."""
        offset = min(max(offset, 0), len(self.text))
        starts = self._array()  # numpy is loaded once this is computed
        import numpy as np

        return int(np.searchsorted(starts, offset, side="right")) - 1

    # -- conversions ---------------------------------------------------------------------------

    def offset_to_position(self, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
        """0-based (line, character). An offset inside a line break maps to the end of that line."""
        encoding = _check_encoding(encoding)
        offset = min(max(offset, 0), len(self.text))
        line = self.line_of(offset)
        start = self.line_start(line)
        offset = min(offset, self.line_end(line))
        if self._ascii:
            return line, offset - start
        return line, _units(self.text[start:offset], encoding)

    def position_to_offset(self, line: int, character: int, encoding: str = "utf-16") -> int:
        """Character offset of an LSP position, clamped as LSP says: a character past the end of
        the line means the end of the line; a line past the last one means the end of the text."""
        encoding = _check_encoding(encoding)
        if line < 0:
            return 0
        if line >= self.line_count():
            return len(self.text)
        start, end = self.line_start(line), self.line_end(line)
        if self._ascii:
            return start + min(max(character, 0), end - start)
        return start + _chars_within(self.text[start:end], character, encoding)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and 1-based column in code points, for `path:line:col` output."""
        line, character = self.offset_to_position(offset, "utf-32")
        return line + 1, character + 1

    def range_to_positions(
        self, start: int, end: int, encoding: str = "utf-16"
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        """Both ends of a character span as LSP positions (what a diagnostic's range needs)."""
        return self.offset_to_position(start, encoding), self.offset_to_position(end, encoding)
