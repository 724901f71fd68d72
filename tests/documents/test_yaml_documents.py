"""YAML documents: value, spans, syntax error positions, pointers at offsets."""

from __future__ import annotations

import pytest

from context_assembly.documents import ParsedDocument, parse_yaml

RULES = """\
id: e1
rules:
  - id: r1
    when:
      - field: scope.agent.agent_id
        operator: eq
        value: "coder"
    then:
      add_memories: [arch, style]
  # a comment

  - id: r2
    empty:
    note: |
      first
      second

last: 1
"""


def text_at(document: ParsedDocument, pointer: str, part: str = "value") -> str:
    span = document.span(pointer, part)
    assert span is not None
    return document.text[span[0] : span[1]]


def at(text: str, marker: str = "|") -> tuple[str, str]:
    offset = text.index(marker)
    return parse_yaml(text[:offset] + text[offset + len(marker) :]).pointer_at(offset)


def test_value_is_the_safe_load_result() -> None:
    document = parse_yaml(RULES)
    assert document.kind == "yaml"
    assert document.syntax_errors == []
    assert document.value["rules"][0]["then"] == {"add_memories": ["arch", "style"]}
    assert document.value["rules"][1] == {"id": "r2", "empty": None, "note": "first\nsecond\n"}


@pytest.mark.parametrize(
    ("pointer", "part", "expected"),
    [
        ("/id", "value", "e1"),
        ("/id", "key", "id"),
        ("/rules/0/when/0/field", "value", "scope.agent.agent_id"),
        ("/rules/0/when/0/value", "value", '"coder"'),
        ("/rules/0/when/0/operator", "key", "operator"),
        ("/rules/0/then/add_memories/1", "value", "style"),
        ("/rules/0/then", "value", "add_memories: [arch, style]"),  # not the comment after it
        ("/rules/1/note", "value", "|\n      first\n      second"),
        ("/rules/1/empty", "value", ""),
        ("/last", "value", "1"),
    ],
)
def test_spans(pointer: str, part: str, expected: str) -> None:
    assert text_at(parse_yaml(RULES), pointer, part) == expected


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("/rules/0/priority", "id"),  # missing in a block mapping that is an item: its first key
        ("/rules/0/then/exclude_memories", "then"),  # missing in a member: the member's key
        ("/rules/9", "rules"),
        ("/nope", "id"),  # the root mapping's first key, never the whole file
        ("/rules/0/then/add_memories/5", "add_memories"),
    ],
)
def test_missing_pointers_point_narrowly(pointer: str, expected: str) -> None:
    assert text_at(parse_yaml(RULES), pointer) == expected


def test_flow_collection_missing_property_points_at_its_bracket() -> None:
    assert text_at(parse_yaml("- {a: 1}\n"), "/0/b") == "{"


def test_line_col_of_a_span() -> None:
    document = parse_yaml(RULES)
    assert document.line_col("/rules/0/when/0/operator", "key") == (6, 9)
    assert document.line_col("/rules/0/when/0/operator") == (6, 19)


def test_syntax_error_position() -> None:
    text = "rules:\n  - id: r1\n    when: [a, b\n  - id: r2\n"
    document = parse_yaml(text)
    assert document.value is None
    [issue] = document.syntax_errors
    assert issue.message == "expected ',' or ']', but got ':' (while parsing a flow sequence)"
    assert document.lines.line_col(issue.start) == (4, 7)  # where PyYAML notices: the ':' of "id: r2"


def test_mapping_values_error_position() -> None:
    document = parse_yaml("a: 1\nb: c: d\n")
    [issue] = document.syntax_errors
    assert issue.message.startswith("mapping values are not allowed here")
    assert document.lines.line_col(issue.start) == (2, 5)


def test_characters_yaml_refuses_and_bad_structures_do_not_crash() -> None:
    assert parse_yaml("a: \x00").syntax_errors[0].message == "character U+0000 is not allowed in YAML"
    assert parse_yaml("a: \ud800").syntax_errors[0].start == 3
    recursive = parse_yaml("a: &x [1, *x]\n")
    assert recursive.value is None
    assert recursive.syntax_errors[0].message.startswith("recursive alias")
    deep = parse_yaml("[" * 3000 + "]" * 3000)
    assert deep.syntax_errors[0].message == "nested too deeply (more than 512 levels)"
    assert parse_yaml("a: *undefined\n").syntax_errors[0].message.startswith("found undefined alias")


def test_empty_document() -> None:
    document = parse_yaml("")
    assert document.syntax_errors == []
    assert document.value is None
    assert document.span("/a") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rules:\n  - id: r|1\n", ("/rules/0/id", "value")),
        ("rules:\n  - i|d: r1\n", ("/rules/0/id", "key")),
        ("rules:\n  - id: r1\n    when:\n      - field: sco|pe.agent\n", ("/rules/0/when/0/field", "value")),
        ("a: [x, y|]\n", ("/a/1", "value")),
        # blank and half-typed lines: indentation decides
        ("rules:\n  - id: r1\n    |\n", ("/rules/0/", "key")),
        ("rules:\n  - id: r1\n    wh|\n", ("/rules/0/wh", "key")),
        ("rules:\n  - id: r1\n  - id: r2\n    then:\n      |\n", ("/rules/1/then/", "key")),
        ("rules:\n  - id: r1\n  |\n", ("/rules/1", "value")),
        ("rules:\n  - id: r1\n    when: |\n", ("/rules/0/when", "value")),
        ("|\nrules: []\n", ("/", "key")),
    ],
)
def test_pointer_at(text: str, expected: tuple[str, str]) -> None:
    assert at(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rules:\n  - id: r1\n    when: [a,\n  - id: r2\n    then:\n      add_memories: |\n",
            ("/rules/1/then/add_memories", "value"),
        ),
        ('rules:\n  - id: "r1\n  - id: r2\n    pri|\n', ("/rules/1/pri", "key")),
        ("a:\n  - - x\n    - y|\n  - z: {\n", ("/a/0/1", "value")),
    ],
)
def test_pointer_at_on_broken_yaml(text: str, expected: tuple[str, str]) -> None:
    offset = text.index("|")
    document = parse_yaml(text[:offset] + text[offset + 1 :])
    assert document.syntax_errors
    assert document.pointer_at(offset) == expected


BROKEN_RULES = """\
rules:
  - id: r1
    when: [x]
    then:
      add_memories: [a]
      set_priority:
        state: high
  - id: r2
    then:
      caps: {}
  pr
"""


@pytest.mark.parametrize(("pointer", "expected"), [
    ("", {"rules"}),
    ("/rules/0", {"id", "when", "then"}),
    ("/rules/0/then", {"add_memories", "set_priority"}),
    ("/rules/0/then/set_priority", {"state"}),
    ("/rules/1", {"id", "then"}),  # `pr` (no colon yet) is not a key
    ("/rules/1/then", {"caps"}),
    ("/rules/2", None),
    ("/rules/0/id", None),
])
def test_keys_at_in_yaml_that_does_not_parse_come_from_indentation(pointer: str, expected: set[str] | None) -> None:
    document = parse_yaml(BROKEN_RULES)
    assert document.value is None and document.syntax_errors
    assert document.keys_at(pointer) == expected


def test_keys_at_in_yaml_that_parses_come_from_the_tree() -> None:
    document = parse_yaml(RULES)
    assert document.keys_at("/rules/0/then") == {"add_memories"}
    assert document.keys_at("/rules/0/id") is None


@pytest.mark.parametrize(("text", "word", "plain"), [
    ("contribution:\n  pri\n", "pri", True),
    ("pi", "pi", True),
    ("a: word\n", "word", True),
    ("a:\n  'pri'\n", "pri", False),  # quoted
    ("a: |\n  pri\n", "pri", False),  # a block scalar
    ("a: b\n", "a", False),  # a key
])
def test_plain_scalar_at(text: str, word: str, plain: bool) -> None:
    offset = text.rindex(word) + 1
    span = parse_yaml(text).plain_scalar_at(offset)
    assert (span is not None and text[span[0]:span[1]] == word) is plain
