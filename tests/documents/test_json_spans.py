"""JSON documents: values, spans for pointers, pointers at offsets."""

from __future__ import annotations

import pytest

from context_assembly.documents import ParsedDocument, parse_document, parse_json

ENGINE = """{
  "id": "e1",
  "rules": [
    {
      "id": "r1",
      "when": [
        {"field": "scope.agent.agent_name", "operator": "eq", "value": "coder"},
        {"field": "input.text", "operator": "contains", "value": ["a", "b"]}
      ],
      "then": {"add_memories": ["m1"]}
    },
    {
      "id": "r2",
      "when": []
    }
  ]
}
"""


def text_at(document: ParsedDocument, pointer: str, part: str = "value") -> str:
    span = document.span(pointer, part)
    assert span is not None
    return document.text[span[0] : span[1]]


def test_valid_document_has_its_value_and_no_errors() -> None:
    document = parse_json(ENGINE)
    assert document.kind == "json"
    assert document.syntax_errors == []
    assert document.ok
    assert document.value["rules"][0]["when"][1]["value"] == ["a", "b"]


@pytest.mark.parametrize(
    ("pointer", "part", "expected"),
    [
        ("/id", "value", '"e1"'),
        ("/id", "key", '"id"'),
        ("/rules/0/when/0/field", "value", '"scope.agent.agent_name"'),
        ("/rules/0/when/1/value/1", "value", '"b"'),
        ("/rules/0/when/1/value", "key", '"value"'),
        ("/rules/0/then", "value", '{"add_memories": ["m1"]}'),
        ("/rules/1/when", "value", "[]"),
        ("/rules/1", "key", '{\n      "id": "r2",\n      "when": []\n    }'),  # array element: its value
    ],
)
def test_span_of_existing_nodes(pointer: str, part: str, expected: str) -> None:
    assert text_at(parse_json(ENGINE), pointer, part) == expected


def test_root_span_is_the_whole_value() -> None:
    document = parse_json(ENGINE)
    assert text_at(document, "") == ENGINE.strip()


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("/rules/1/then", "{"),  # missing property of an array element: its opening brace only
        ("/rules/0/then/exclude_memories", '"then"'),  # missing property of a member: the member's key
        ("/rules/0/when/7", '"when"'),  # missing index: the array's key
        ("/rules/0/when/0/value/x", '"value"'),  # below a scalar: the scalar's key
        ("/nope", "{"),  # missing property of the root: the root's brace, never the whole file
        ("/rules/x", '"rules"'),  # not an index
        ("/rules/-", '"rules"'),
        ("/rules/01", '"rules"'),  # leading zero is not an index
    ],
)
def test_span_of_missing_nodes_is_narrow(pointer: str, expected: str) -> None:
    document = parse_json(ENGINE)
    assert text_at(document, pointer) == expected
    assert text_at(document, pointer, "key") == expected


def test_root_brace_offset() -> None:
    document = parse_json('\n\n  {"a": 1}')
    assert document.span("/b") == (4, 5)
    assert document.line_col("/b") == (3, 3)


def test_pointer_escapes_and_token_sequences() -> None:
    document = parse_json('{"a/b": {"m~n": 1}, "": {"x": 2}}')
    assert text_at(document, "/a~1b/m~0n") == "1"
    assert text_at(document, ["a/b", "m~n"]) == "1"
    assert text_at(document, "//x") == "2"  # the empty key
    assert text_at(document, ("", "x"), "key") == '"x"'


def test_escaped_keys_are_compared_decoded() -> None:
    document = parse_json('{"caf\\u00e9": 1, "tab\\tkey": 2}')
    assert text_at(document, "/café") == "1"
    assert text_at(document, "/tab\tkey") == "2"


def test_duplicate_keys_point_at_the_last_like_the_value() -> None:
    document = parse_json('{"a": 1, "a": 2}')
    assert document.value == {"a": 2}
    assert text_at(document, "/a") == "2"


def test_spans_are_character_offsets_after_non_ascii_text() -> None:
    text = '{"emoji": "😀😀", "sep": "x\u2028y", "accent": "é", "target": [true, null]}'
    document = parse_json(text)
    assert document.ok
    assert text_at(document, "/target/1") == "null"
    assert text_at(document, "/accent", "key") == '"accent"'
    start, _ = document.span("/target")  # type: ignore[misc]
    # U+2028 inside a string is not a line break for the position either
    assert document.lines.offset_to_position(start, "utf-32") == (0, start)
    assert document.lines.offset_to_position(start, "utf-16") == (0, start + 2)
    assert document.lines.offset_to_position(start, "utf-8") == (0, len(text[:start].encode()))


def test_span_is_none_without_a_value() -> None:
    assert parse_json("").span("") is None
    assert parse_json("   ").span("/a") is None


def test_part_must_be_key_or_value() -> None:
    with pytest.raises(ValueError, match="part"):
        parse_json("{}").span("", "name")


def test_parse_document_picks_the_format_by_suffix() -> None:
    assert parse_document("a: 1\n", "rules.yaml").kind == "yaml"
    assert parse_document("a: 1\n", "/x/RULES.YML").kind == "yaml"
    assert parse_document('{"a": 1}', "engine.json").kind == "json"
    assert parse_document('{"a": 1}', "no-suffix").value == {"a": 1}


# -- pointer_at ----------------------------------------------------------------------------------


def at(text: str, marker: str = "|") -> tuple[str, str]:
    """pointer_at where `marker` stands in the text (the marker itself is removed)."""
    offset = text.index(marker)
    return parse_json(text[:offset] + text[offset + len(marker) :]).pointer_at(offset)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"ru|les": []}', ("/rules", "key")),
        ('{|"rules": []}', ("/rules", "key")),
        ('{"rules"|: []}', ("/rules", "key")),
        ('{"rules": [{"id": "r|1"}]}', ("/rules/0/id", "value")),
        ('{"rules": [{"id": "r1"|}]}', ("/rules/0/id", "value")),
        ('{"rules": [{"id": 1|0}]}', ("/rules/0/id", "value")),
        ('{"rules": [{"id": "r1", |}]}', ("/rules/0/", "key")),
        ('{"rules": [{|}]}', ("/rules/0/", "key")),
        ('{"rules": [{"id": |}]}', ("/rules/0/id", "value")),
        ('{"rules": [{"a": 1}, |]}', ("/rules/1", "value")),
        ('{"rules": [|]}', ("/rules/0", "value")),
        ('{"rules": |[]}', ("/rules", "value")),
        ('{"rules": []|}', ("/rules", "value")),
        ('|{"rules": []}', ("", "value")),
        ('{"a": {"b": [1, {"c": tr|ue}]}}', ("/a/b/1/c", "value")),
        ('{"a~b/c": |1}', ("/a~0b~1c", "value")),
        ("{\n  |\n}", ("/", "key")),
    ],
)
def test_pointer_at_on_valid_documents(text: str, expected: tuple[str, str]) -> None:
    assert at(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # unclosed document (tree-sitter collapses it into one ERROR node)
        ('{"rules": [{"when": [{"field": "sco|', ("/rules/0/when/0/field", "value")),
        ('{"rules": [{"when": [{"field": "scope"}, {"op|', ("/rules/0/when/1/op", "key")),
        ('{"rules": [{"when": [{"field": "scope"}], |', ("/rules/0/", "key")),
        ('{"rules": [{"id": "r1"}, {"then": {"add_memories": [|', ("/rules/1/then/add_memories/0", "value")),
        ('{"rules": [{"id": "r1"}, {"then": {"add_memories": ["a", |', ("/rules/1/then/add_memories/1", "value")),
        # broken in the middle
        ('{"a": 1 "b": {"c": |2}}', ("/b/c", "value")),
        ('{"a": 1,, "b": [1, 2, |]}', ("/b/2", "value")),
        ('{"a": NaN, "b": {"|"}}', ("/b/", "key")),
        ('{"a": "abc\n, "b": {"x": |1}}', ("/b/x", "value")),
        ("{'a': {'b': |1}}", ("/a/b", "value")),
        ('{"a": [1, 2}, "b": {"c": |}}', ("/b/c", "value")),
        ('{"a": 1, // note\n "b": |2}', ("/b", "value")),
    ],
)
def test_pointer_at_on_broken_documents(text: str, expected: tuple[str, str]) -> None:
    assert at(text) == expected


def test_pointer_at_clamps_offsets() -> None:
    document = parse_json('{"a": 1}')
    assert document.pointer_at(-5) == ("", "value")
    assert document.pointer_at(999) == ("", "value")


def test_pointer_at_after_non_ascii_text() -> None:
    text = '{"😀": "é\u2028", "b": [1, "中"]}'
    document = parse_json(text)
    assert document.pointer_at(text.index("中")) == ("/b/1", "value")
    assert document.pointer_at(text.index("😀")) == ("/😀", "key")
