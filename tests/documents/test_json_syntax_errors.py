"""JSON syntax errors: strict JSON, readable messages, well-placed spans, no crashes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.documents import SyntaxIssue, parse_json


def issues(text: str) -> list[tuple[str, str]]:
    """(message, the text the issue covers) for every syntax error."""
    document = parse_json(text)
    assert document.value is None
    assert document.syntax_errors, "expected at least one syntax error"
    return [(issue.message, text[issue.start : issue.end]) for issue in document.syntax_errors]


def first(text: str) -> SyntaxIssue:
    return parse_json(text).syntax_errors[0]


def test_missing_comma_between_members() -> None:
    assert issues('{\n  "a": 1\n  "b": 2\n}') == [("missing ',' between members", '"b"')]


def test_missing_comma_between_array_elements() -> None:
    assert issues("[1 2]") == [("missing ',' between array elements", "2")]


def test_missing_comma_in_a_big_array_names_the_place() -> None:
    rules = ",\n".join(f'    {{"id": "r{i}", "priority": {i}}}' for i in range(200))
    text = '{"rules": [\n' + rules.replace('"r100", ', '"r100" ', 1) + "\n]}"
    issue = first(text)
    assert issue.message == "missing ',' between members"
    assert text[issue.start : issue.end] == '"priority"'
    assert parse_json(text).lines.line_col(issue.start)[0] == 102


def test_unclosed_string_at_end_of_line() -> None:
    assert issues('{\n  "a": "abc\n}') == [("unclosed string", '"abc')]


def test_unclosed_string_does_not_cascade_into_the_next_lines() -> None:
    text = '{\n  "a": "abc,\n  "b": 1,\n  "c": [1, 2]\n}'
    assert issues(text) == [("unclosed string", '"abc,')]


def test_unclosed_string_at_end_of_document() -> None:
    assert issues('{"a": "abc') == [("unclosed string", '"abc')]


def test_unclosed_document() -> None:
    text = '{\n  "rules": [\n    {"id": "r1"}\n  ]\n'
    document = parse_json(text)
    assert [issue.message for issue in document.syntax_errors] == ["unexpected end of document, expected '}'"]
    issue = document.syntax_errors[0]
    assert issue.start == issue.end == text.rindex("]") + 1  # right after the last token
    assert document.lines.line_col(issue.start) == (4, 4)


def test_unclosed_nested_document_reports_the_innermost() -> None:
    assert issues('{"a": {"b": [1, 2') == [("unexpected end of document, expected ']'", "")]
    assert issues('{"rules": [{"when": [{"field": "x"') == [("unexpected end of document, expected '}'", "")]
    assert issues('{"a": {"b": 1}, "f": [') == [("unexpected end of document, expected a value or ']'", "")]


def test_missing_closer_in_the_middle() -> None:
    text = '{"a": {"b": 1, "c": [1, 2}, "d": 3}'
    assert issues(text)[0][0] in ("missing ']'", "expected ']' but found '}'")


@pytest.mark.parametrize(
    ("text", "comma"),
    [('{"a": 1,}', 7), ("[1, 2,]", 5), ('{"a": [1,\n  2,\n]}', 13), ('{"a": {"b": 1,  }}', 13)],
)
def test_trailing_comma(text: str, comma: int) -> None:
    issue = first(text)
    assert issue.message == "trailing comma"
    assert (issue.start, issue.end) == (comma, comma + 1)
    assert len(parse_json(text).syntax_errors) == 1


@pytest.mark.parametrize(
    ("text", "comment"),
    [
        ('{"a": 1, // why\n "b": 2}', "// why"),
        ('/* header */ {"a": 1}', "/* header */"),
        ('{"a": /* inline */ 1}', "/* inline */"),
        ('{"a": 1}\n// trailing', "// trailing"),
    ],
)
def test_comments_are_errors(text: str, comment: str) -> None:
    assert issues(text) == [("comments are not allowed in JSON", comment)]


def test_slashes_inside_strings_are_not_comments() -> None:
    text = '{"url": "http://x/*y*/", "path": "//srv"}'
    assert parse_json(text).ok
    broken = text[:-1]  # broken elsewhere: the slashes still are not comments
    assert [message for message, _ in issues(broken)] == ["unexpected end of document, expected '}'"]


@pytest.mark.parametrize(
    ("text", "message", "covered"),
    [
        ("{'a': 1}", "property keys must be double-quoted strings", "'a'"),
        ("{\"a\": 'x'}", "strings must use double quotes", "'x'"),
        ("{a: 1}", "property keys must be double-quoted strings", "a"),
        ('{"a": NaN}', "NaN is not allowed in JSON", "NaN"),
        ('{"a": -Infinity}', "-Infinity is not allowed in JSON", "-Infinity"),
        ('{"a": True}', "'True' is not valid JSON, write 'true'", "True"),
        ('{"a": undefined}', "'undefined' is not valid JSON", "undefined"),
        ('{"a": 0x1F}', "invalid number '0x1F'", "0x1F"),
        ('{"a": 01}', "invalid number '01'", "01"),
        ('{"a": 1.}', "invalid number '1.'", "1."),
        ('{"a": +1}', "invalid number '+1'", "+1"),
        ('{"a": }', "missing value", "}"),
        ('{"a" 1}', "missing ':' after property key", "1"),
        ('{"a"}', "missing ':' and value after property key", "}"),
        ('{"a": 1}}', "unexpected '}' after the end of the JSON value", "}"),
        ('{"a": 1} x', "unexpected 'x' after the end of the JSON value", "x"),
        ('{"a": "x\ty"}', "control character U+0009 in string (escape it, e.g. \\n or \\t)", "\t"),
        ('{"a": "\\q"}', "invalid escape sequence '\\q'", "\\q"),
        ('{"a": "\\u12"}', "invalid escape sequence '\\u12'", "\\u12"),
        ("", "empty document, expected a JSON value", ""),
        ("  \n ", "empty document, expected a JSON value", ""),
    ],
)
def test_readable_messages(text: str, message: str, covered: str) -> None:
    assert issues(text)[0] == (message, covered)


def test_valid_json_is_accepted_even_where_tree_sitter_is_lenient_or_strict() -> None:
    # tree-sitter-json rejects an upper-case exponent with a sign; JSON allows it
    document = parse_json('{"a": -0.5E+3, "b": 1e-2, "c": -0}')
    assert document.ok
    assert document.value == {"a": -500.0, "b": 0.01, "c": 0}


def test_big_integers_keep_their_precision() -> None:
    document = parse_json('{"big": 123456789012345678901234567890, "small": 12}')
    assert document.value == {"big": 123456789012345678901234567890, "small": 12}


def test_lone_surrogates_and_nul_do_not_crash() -> None:
    document = parse_json('{"a": "x\ud800y", "b": 1}')
    assert document.ok
    assert document.value["a"] == "x\ud800y"
    assert document.span("/b") == (18, 19)
    assert parse_json('{"a": "\ud800", "b": }').syntax_errors[0].message == "missing value"
    nul = parse_json('{"a": "x\x00"}')
    assert [issue.message for issue in nul.syntax_errors] == [
        "control character U+0000 in string (escape it, e.g. \\n or \\t)"
    ]
    assert parse_json("\x00").syntax_errors
    assert parse_json('{"a\x00": 1').syntax_errors


def test_nesting_limit() -> None:
    assert parse_json("[" * 512 + "]" * 512).ok
    document = parse_json("[" * 513 + "]" * 513)
    assert [(issue.message, issue.start) for issue in document.syntax_errors] == [
        ("nested too deeply (more than 512 levels)", 512)
    ]
    assert document.value is None
    assert parse_json('{"a":' * 600 + "1" + "}" * 600).syntax_errors[0].start == 5 * 512


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000, '{"a": [' * 30_000 + "1" + "]}" * 30_000],
)
def test_huge_nesting_does_not_crash(text: str) -> None:
    document = parse_json(text)
    assert document.value is None
    assert document.syntax_errors[0].message == "nested too deeply (more than 512 levels)"
    document.pointer_at(len(text) // 2)
    document.span("/a/0/a/0")


def test_several_problems_on_several_lines_are_all_reported() -> None:
    text = '{\n  "a": 1,\n  "b": 2\n  "c": NaN,\n  "d": [1,],\n  "e": \'x\'\n}'
    assert issues(text) == [
        ("missing ',' between members", '"c"'),
        ("NaN is not allowed in JSON", "NaN"),
        ("trailing comma", ","),
        ("strings must use double quotes", "'x'"),
    ]


# -- robustness ----------------------------------------------------------------------------------

json_ish = st.text(
    alphabet=st.sampled_from(list("{}[]:,\"' \n\\/*-+.0123456789eEtruefalsnNaI") + ["é", "😀", "\u2028", "\x00"]),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(json_ish)
def test_any_text_parses_without_crashing(text: str) -> None:
    document = parse_json(text)
    assert (document.value is None) == bool(document.syntax_errors) or document.value is None
    for issue in document.syntax_errors:
        assert 0 <= issue.start <= issue.end <= len(text)
        assert issue.message
    for offset in range(0, len(text) + 1, 3):
        pointer, part = document.pointer_at(offset)
        assert part in ("key", "value")
        assert pointer == "" or pointer.startswith("/")
        span = document.span(pointer, part)
        assert span is None or 0 <= span[0] <= span[1] <= len(text)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3),
        max_leaves=12,
    )
)
def test_every_pointer_of_a_valid_document_has_its_own_span(value: object) -> None:
    import json

    text = json.dumps(value, indent=1, ensure_ascii=False)
    document = parse_json(text)
    assert document.ok and document.value == value
    stack: list[tuple[tuple[str, ...], object]] = [((), value)]
    while stack:
        pointer, node = stack.pop()
        span = document.span(list(pointer))
        assert span is not None
        assert json.loads(text[span[0] : span[1]]) == node
        if isinstance(node, dict):
            stack.extend((pointer + (key,), child) for key, child in node.items())
        elif isinstance(node, list):
            stack.extend((pointer + (str(i),), child) for i, child in enumerate(node))
