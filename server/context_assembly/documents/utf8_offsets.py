"""UTF-8 byte offsets (what tree-sitter reports) <-> Python `str` character offsets.

The text handed to tree-sitter has lone surrogates replaced by U+FFFD: both are one `str`
character and three UTF-8 bytes, so offsets stay aligned while tree-sitter gets valid UTF-8.
Non-ASCII texts keep the byte offset of every 4096th character, so one conversion costs a
bisect plus an encode/decode of at most one block, and building the table costs one pass.
"""

from __future__ import annotations

import re
from bisect import bisect_right

_BLOCK = 4096
_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_for_parser(text: str) -> bytes:
    """UTF-8 bytes of `text`, with lone surrogates (not encodable) replaced by U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


class Utf8Offsets:
    __slots__ = ("_block_bytes", "_data", "_identity", "_text")

    def __init__(self, text: str, data: bytes) -> None:
        self._text = text
        self._data = data
        self._identity = len(data) == len(text)  # all ASCII: byte offset == character offset
        self._block_bytes: list[int] = []
        if not self._identity:
            position = 0
            for block_start in range(0, len(text), _BLOCK):
                self._block_bytes.append(position)
                position += _utf8_length(text[block_start : block_start + _BLOCK])

    def char_of(self, byte: int) -> int:
        if self._identity:
            return byte
        byte = min(max(byte, 0), len(self._data))
        block = max(bisect_right(self._block_bytes, byte) - 1, 0)
        base = self._block_bytes[block]
        # "ignore" drops a trailing partial sequence: a byte inside a character maps to its start.
        return block * _BLOCK + len(self._data[base:byte].decode("utf-8", "ignore"))

    def byte_of(self, char: int) -> int:
        if self._identity:
            return char
        char = min(max(char, 0), len(self._text))
        block = char // _BLOCK
        if block >= len(self._block_bytes):
            return len(self._data)
        return self._block_bytes[block] + _utf8_length(self._text[block * _BLOCK : char])


def _utf8_length(segment: str) -> int:
    return len(segment.encode("utf-8", "surrogatepass"))
