"""LineIndex: LSP line breaks, position encodings, clamping, round trips."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.documents import LineIndex

ENCODINGS = ("utf-8", "utf-16", "utf-32")


@pytest.mark.parametrize(
    ("text", "starts"),
    [
        ("", [0]),
        ("a", [0]),
        ("a\nb", [0, 2]),
        ("a\n", [0, 2]),
        ("a\r\nb\r\n", [0, 3, 6]),
        ("a\rb\r", [0, 2, 4]),
        ("a\r\n\rb\n\nc", [0, 3, 4, 6, 7]),
        ("\n\n", [0, 1, 2]),
    ],
)
def test_only_lf_crlf_and_cr_end_lines(text: str, starts: list[int]) -> None:
    index = LineIndex(text)
    assert index.starts == starts
    assert index.line_count() == len(starts)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e"])
def test_characters_splitlines_breaks_on_are_not_line_breaks(separator: str) -> None:
    text = '{"a": "x' + separator + 'y",\n"b": 1}'
    index = LineIndex(text)
    assert index.line_count() == 2  # str.splitlines would say 3
    offset = text.index('"b"')
    assert index.offset_to_position(offset) == (1, 0)
    assert index.line_col(offset) == (2, 1)


def test_line_end_excludes_the_break() -> None:
    index = LineIndex("ab\r\ncd\re\n")
    assert [index.line_text(line) for line in range(index.line_count())] == ["ab", "cd", "e", ""]
    assert index.line_end(0) == 2


def test_emoji_columns_differ_per_encoding() -> None:
    text = 'x = "😀é" + y'
    index = LineIndex(text)
    offset = text.index("y")  # 11 code points in
    assert index.offset_to_position(offset, "utf-32") == (0, 11)
    assert index.offset_to_position(offset, "utf-16") == (0, 12)  # the emoji is a surrogate pair
    assert index.offset_to_position(offset, "utf-8") == (0, 15)  # 4 bytes + 2 bytes
    for encoding, character in (("utf-32", 11), ("utf-16", 12), ("utf-8", 15)):
        assert index.position_to_offset(0, character, encoding) == offset
    assert index.line_col(offset) == (1, 12)


def test_a_character_inside_a_multi_unit_char_snaps_to_its_start() -> None:
    text = "a😀b"
    index = LineIndex(text)
    assert index.position_to_offset(0, 2, "utf-16") == 1  # between the two surrogates
    assert index.position_to_offset(0, 3, "utf-16") == 2
    for byte in (2, 3, 4):  # inside the 4-byte emoji
        assert index.position_to_offset(0, byte, "utf-8") == 1
    assert index.position_to_offset(0, 5, "utf-8") == 2


def test_clamping_follows_lsp() -> None:
    text = "ab\r\ncd"
    index = LineIndex(text)
    assert index.position_to_offset(0, 99) == 2  # past the end of the line: end of the line
    assert index.position_to_offset(1, 99) == 6
    assert index.position_to_offset(7, 0) == len(text)  # past the last line: end of the text
    assert index.position_to_offset(-1, 0) == 0
    assert index.position_to_offset(0, -5) == 0
    assert index.offset_to_position(3) == (0, 2)  # between \r and \n: end of line 0
    assert index.offset_to_position(99) == (1, 2)
    assert index.offset_to_position(-3) == (0, 0)


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="utf-7"):
        LineIndex("a").offset_to_position(0, "utf-7")


def test_lone_surrogates_do_not_crash() -> None:
    text = "a\ud800b\n\udfffc"
    index = LineIndex(text)
    assert index.offset_to_position(2, "utf-16") == (0, 2)
    assert index.offset_to_position(2, "utf-8") == (0, 4)
    assert index.position_to_offset(0, 4, "utf-8") == 2
    assert index.position_to_offset(1, 1, "utf-16") == 5


# -- properties ----------------------------------------------------------------------------------

texts = st.text(
    alphabet=st.sampled_from(["a", "é", "中", "😀", "\n", "\r", "\u2028", "\x85", "\x0c", " ", "\ud83d", "\t"]),
    max_size=40,
)


def _units(segment: str, encoding: str) -> int:
    if encoding == "utf-32":
        return len(segment)
    if encoding == "utf-16":
        return len(segment.encode("utf-16-le", "surrogatepass")) // 2
    return len(segment.encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_matches_a_reference_model(text: str) -> None:
    index = LineIndex(text)
    reference_lines = re.split(r"\r\n|\r|\n", text)
    assert index.line_count() == len(reference_lines)
    assert [index.line_text(line) for line in range(index.line_count())] == reference_lines
    for offset in range(len(text) + 1):
        line, _ = index.offset_to_position(offset, "utf-32")
        start = index.line_start(line)
        inside_break = offset > index.line_end(line)  # between \r and \n
        prefix = text[start : index.line_end(line) if inside_break else offset]
        for encoding in ENCODINGS:
            assert index.offset_to_position(offset, encoding) == (line, _units(prefix, encoding))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_offset_position_round_trip(text: str) -> None:
    index = LineIndex(text)
    for offset in range(len(text) + 1):
        expected = offset - 1 if text[offset - 1 : offset + 1] == "\r\n" else offset
        for encoding in ENCODINGS:
            line, character = index.offset_to_position(offset, encoding)
            assert index.position_to_offset(line, character, encoding) == expected


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(-2, 12), st.integers(-2, 60), st.sampled_from(ENCODINGS))
def test_any_position_maps_to_a_character_boundary_at_or_before_it(
    text: str, line: int, character: int, encoding: str
) -> None:
    index = LineIndex(text)
    offset = index.position_to_offset(line, character, encoding)
    assert 0 <= offset <= len(text)
    if 0 <= line < index.line_count():
        assert index.line_start(line) <= offset <= index.line_end(line)
        back_line, back_character = index.offset_to_position(offset, encoding)
        assert back_line == line
        assert back_character <= max(character, 0)
        # snapping goes back at most one character
        assert _units(text[offset : offset + 1], encoding) > max(character, 0) - back_character or (
            offset == index.line_end(line)
        )
