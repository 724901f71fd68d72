"""UTF-8 byte offsets (tree-sitter's) <-> str offsets, across the 4096-character blocks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.documents.utf8_offsets import Utf8Offsets, encode_for_parser


def offsets_for(text: str) -> Utf8Offsets:
    return Utf8Offsets(text, encode_for_parser(text))


def test_ascii_is_the_identity() -> None:
    offsets = offsets_for("abc")
    assert [offsets.char_of(i) for i in range(4)] == [0, 1, 2, 3]
    assert [offsets.byte_of(i) for i in range(4)] == [0, 1, 2, 3]


def test_lone_surrogates_become_replacement_characters_of_the_same_width() -> None:
    text = "a\ud800b"
    data = encode_for_parser(text)
    assert data == "a\ufffdb".encode()
    offsets = Utf8Offsets(text, data)
    assert offsets.byte_of(2) == 4
    assert offsets.char_of(4) == 2


def test_a_byte_inside_a_character_maps_to_its_start() -> None:
    offsets = offsets_for("a😀b")
    assert [offsets.char_of(byte) for byte in range(7)] == [0, 1, 1, 1, 1, 2, 3]


def test_long_texts_cross_blocks() -> None:
    text = ("é" * 3000 + "😀" * 3000 + "x") * 3
    data = encode_for_parser(text)
    offsets = Utf8Offsets(text, data)
    for char in range(0, len(text) + 1, 97):
        byte = len(text[:char].encode())
        assert offsets.byte_of(char) == byte
        assert offsets.char_of(byte) == char
    assert offsets.char_of(len(data) + 10) == len(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "é", "中", "😀", "\ud800", "\n"]), max_size=50))
def test_round_trip(text: str) -> None:
    offsets = offsets_for(text)
    for char in range(len(text) + 1):
        assert offsets.char_of(offsets.byte_of(char)) == char
