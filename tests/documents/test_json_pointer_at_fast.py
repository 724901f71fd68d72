"""`pointer_at` on tree-backed JSON documents skips the error-free stretch before the caret
(`TreeLocator._container_tokens`); it must answer exactly what reading every token does."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.documents import json_tree
from context_assembly.documents.json_stack import TokenStack
from context_assembly.documents.json_tokens import Token, tokenize
from context_assembly.documents.pointers import Pointer


def slow_pointer_at(document: Any, offset: int) -> tuple[Pointer, str]:
    """The reference: the same machine fed every token before the caret, nothing skipped."""
    locator = document._locator
    offset = min(max(offset, 0), len(document.text))
    if isinstance(locator, json_tree.ScanLocator):
        return TokenStack().locate(tokenize(document.text), offset)
    source = locator.source
    descend: Callable[[Any], Iterator[Token]] = lambda node: source.tokens(node.children)  # noqa: E731
    return TokenStack().locate(source.tokens(source.top_children()), offset, descend)


def assert_same_everywhere(text: str) -> None:
    document = json_tree.parse_json(text)
    for offset in range(len(text) + 1):
        assert document.pointer_tokens_at(offset) == slow_pointer_at(document, offset), (text, offset)


RULES = json.dumps(
    {"rules": [{"id": f"r{i}", "field": "a\u2028b", "when": {"all": [i, [i, {"x": "😀"}], None]}} for i in range(12)]},
    indent=2,
    ensure_ascii=False,
)

DOCUMENTS = [
    RULES,
    json.dumps({"rules": [{"id": i, "tags": ["a", "b"]} for i in range(8)]}, separators=(",", ":")),
    '[[1, 2, [3, 4]], [], {}, [{"a": [5, 6]}, 7], "😀\u2028x", 8]',
    '{"a": 1, "b": [1, 2, 3], "c": {"d": "e", "f": [ ], "g": {}}}',
    # Broken documents whose tree is still used.
    '{"rules": [{"id": 1, "field": "na',
    '{"rules": [{"id": 1}, {"id": 2, "fi}, {"id": 3}]}',
    '{"rules": [{"id": 1}, {"id": 2, "field" "x"}, {"id": 3}], "b": 2}',
    '{"a": 1, "b": [1, 2,, 3], "c": {"d": "e",, "f": 1}}',
    '{"a": 1, /* c */ "b": [1, // x\n 2, 3], "c": 4}',
    '{"a": "x\n", "b": [1, "y\n  ", 2], "c": 3}',
    '{"a": [1, 2, 3], "b": {"c": 1, "d" }, "e": [4, 5 6], "f": }',
    '[1, 2, 3, {"a": 1, "b": [true, false, nul], "c": 0x1F}, 5]',
    '{"a": 1, "b": 2,}\n',
    '{"a": [1, 2], "b": {"c": [3, 4, {"d": 5',
    '{} {"a": [1, 2, 3]}',
    "{'a': 1, \"b\": [1, 2]}",
    '{"😀": [1, "\u2028", {"k": "v😀"}], "b": "\\u00e9\\"q", "c": [1, 2, 3]}',
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_every_offset_matches_the_full_scan(text: str) -> None:
    assert_same_everywhere(text)


_scalars = st.one_of(
    st.integers(-5, 1000),
    st.booleans(),
    st.none(),
    st.text(alphabet=st.sampled_from(["a", "é", "😀", "\u2028", '"', "\\", "/", " "]), max_size=4),
)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet="ab😀\u2028", max_size=3), children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(
    value=_values,
    indent=st.sampled_from([None, 1, 2]),
    ascii_only=st.booleans(),
    cut=st.floats(0, 1),
    damage=st.sampled_from(["none", "truncate", "comma", "quote", "comment", "newline-in-string"]),
    data=st.data(),
)
def test_sampled_offsets_match_the_full_scan(
    value: Any, indent: int | None, ascii_only: bool, cut: float, damage: str, data: st.DataObject
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    at = int(cut * len(text))
    if damage == "truncate":
        text = text[:at]
    elif damage == "comma":
        text = text[:at] + "," + text[at:]
    elif damage == "quote":
        text = text[:at] + '"' + text[at:]
    elif damage == "comment":
        text = text[:at] + "/* c */" + text[at:]
    elif damage == "newline-in-string":
        text = text.replace('"', '"\n', 1) if at % 2 else text[:at] + '\n"' + text[at:]
    document = json_tree.parse_json(text)
    offsets = data.draw(st.lists(st.integers(-1, len(text) + 1), min_size=1, max_size=40))
    for offset in offsets:
        assert document.pointer_tokens_at(offset) == slow_pointer_at(document, offset), (text, offset)


def test_long_document_answers_by_index() -> None:
    text = json.dumps({"rules": [{"id": f"r{i}", "field": "😀x"} for i in range(3000)]}, indent=2, ensure_ascii=False)
    document = json_tree.parse_json(text)
    offset = text.index('"r1500"') + 3
    assert document.pointer_at(offset) == ("/rules/1500/id", "value")
    offset = text.index('"field"', text.index('"r2999"')) + 2
    assert document.pointer_at(offset) == ("/rules/2999/field", "key")
    assert_same_at = [text.index('"r1234"') - 5, text.index('"r7"') + 8, len(text) - 1]
    for offset in assert_same_at:
        assert document.pointer_tokens_at(offset) == slow_pointer_at(document, offset)
