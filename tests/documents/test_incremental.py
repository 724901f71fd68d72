"""Incremental re-parsing: the edit between two texts, the shifted line index, and a JSON document
re-parsed from its previous version, which must answer exactly as a fresh parse of the new text
(value, validity, spans, pointers) while keeping every untouched value the same object."""

from __future__ import annotations

import json

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from context_assembly.documents import LineIndex, parse_document, parse_json
from context_assembly.documents.edits import text_edit
from context_assembly.documents.json_reparse import reparse_json

ALPHABET = "a\n\ré😀x "  # "\r" then "\n" makes "\r\n"
PIECES = ['"', "{", "}", "[", "]", ",", ":", " ", "\n", "x", "1", "true", '"k": 2', '{"a": 1}', "/", '"a"',
          "é", "😀", "\\", "-", "e5"]


def engine_text(rules: int = 6, **extra: object) -> str:
    return json.dumps({"id": "e", "name": "x", **extra, "rules": [
        {"id": f"r{i}", "when": [{"field": "scope.a", "operator": "eq", "value": i}],
         "then": {"add_memories": ["m"]}} for i in range(rules)]}, indent=1, ensure_ascii=False)


def warmed(text: str):  # noqa: ANN201
    document = parse_json(text)
    document.warm()
    return document


# -- the edit ------------------------------------------------------------------------------------


@given(st.text(alphabet=ALPHABET, max_size=20), st.text(alphabet=ALPHABET, max_size=20))
def test_the_edit_rebuilds_the_new_text_and_is_shortest(old: str, new: str) -> None:
    edit = text_edit(old, new)
    if edit is None:
        assert old == new
        return
    assert old[: edit.start] + new[edit.start : edit.new_end] + old[edit.old_end :] == new
    assert edit.start <= edit.old_end and edit.start <= edit.new_end
    # shortest: the first and last characters of the changed stretches differ (or one is empty)
    assert edit.old_end == edit.start or edit.new_end == edit.start \
        or (old[edit.start] != new[edit.start] and old[edit.old_end - 1] != new[edit.new_end - 1])


def test_the_edit_in_texts_longer_than_a_chunk() -> None:
    old = "a" * 300_000
    new = old[:123_457] + "bc" + old[123_459:]
    edit = text_edit(old, new)
    assert edit is not None and (edit.start, edit.old_end, edit.new_end) == (123_457, 123_459, 123_459)
    assert text_edit(old, old + "z") == type(edit)(300_000, 300_000, 300_001)
    assert text_edit(old, "z" + old) == type(edit)(0, 0, 1)


# -- the line index --------------------------------------------------------------------------------


@given(st.text(alphabet=ALPHABET, max_size=20), st.data())
def test_an_edited_line_index_equals_a_fresh_one(old: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(old)))
    end = data.draw(st.integers(start, len(old)))
    inserted = data.draw(st.text(alphabet=ALPHABET, max_size=4))
    new = old[:start] + inserted + old[end:]
    index = LineIndex(old)
    index.line_count()
    edited = index.edited(new, start, end, start + len(inserted))
    assert edited.starts == LineIndex(new).starts
    assert LineIndex(old).edited(new, start, end, start + len(inserted)).starts == LineIndex(new).starts  # lazy


# -- the JSON document ---------------------------------------------------------------------------


def assert_same_as_fresh(document, text: str) -> None:  # noqa: ANN001
    fresh = parse_json(text)
    assert document.text == text
    assert document.value == fresh.value
    assert repr(document.value) == repr(fresh.value)  # `==` takes 1 for true and 1.0
    assert bool(document.syntax_errors) == bool(fresh.syntax_errors)
    assert document.lines.starts == fresh.lines.starts
    if fresh.ok:  # a broken text may recover differently from an older tree; a valid one may not
        assert [(i.message, i.start, i.end) for i in document.syntax_errors] == []
        for pointer in ("", "/rules", "/rules/1/when/0/value", "/name", "/rules/3/then", "/missing"):
            for part in ("key", "value"):
                assert document.span(pointer, part) == fresh.span(pointer, part)
        for offset in range(0, len(text) + 1, max(1, len(text) // 40)):
            assert document.pointer_at(offset) == fresh.pointer_at(offset)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(0, 1), st.sampled_from([0, 0, 0, 1, 2, 5]), st.sampled_from(PIECES + [""])),
                min_size=1, max_size=8),
       st.booleans())
def test_a_reparse_answers_as_a_fresh_parse(edits: list[tuple[float, int, str]], ascii_only: bool) -> None:
    text = engine_text() if ascii_only else engine_text(note="naïve 😀")
    document = warmed(text)
    for where, length, piece in edits:
        start = int(where * len(text))
        new = text[:start] + piece + text[start + length :]
        previous_value = document.value
        document = reparse_json(document, new)
        assert_same_as_fresh(document, new)
        assert previous_value == (parse_json(text).value if previous_value is not None else None)  # untouched
        text = new


SCALARS = st.one_of(st.integers(-50, 50), st.sampled_from([True, False, None, 0.5, -2e3]),
                   st.text(alphabet="ab", max_size=2))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from("abc"), inner, max_size=3), max_leaves=10)
# what may be typed or deleted where a scalar starts or ends, so the scalar itself changes
AT_VALUES = ["5", "0", "-", ".5", "e3", "E", "x", "a", '"', ",", " ", "true", "1, 2", ""]
SCALAR_END, SCALAR_START = set('0123456789el"'), set('-0123456789tfn"')


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES.filter(lambda v: isinstance(v, dict | list)), st.booleans(),
       st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from([0, 0, 1, 2]), st.sampled_from(AT_VALUES)),
                min_size=1, max_size=6))
def test_an_edit_touching_a_value_reparses_as_fresh(value: object, compact: bool,
                                                    edits: list[tuple[int, int, str]]) -> None:
    """Edits next to numbers, literals and strings (a digit typed after `[1`, a `-` before it)."""
    text = json.dumps(value, separators=(",", ":") if compact else None)
    document = warmed(text)
    for choice, length, piece in edits:
        edges = [i for i in range(len(text) + 1) if (i and text[i - 1] in SCALAR_END)
                 or (i < len(text) and text[i] in SCALAR_START)]
        if not edges:
            return
        start = edges[choice % len(edges)]
        new = text[:start] + piece + text[start + length:]
        document = reparse_json(document, new)
        assert_same_as_fresh(document, new)
        text = new


def test_a_digit_typed_after_a_number_in_an_array_is_read() -> None:
    text = '{"value": [1, 2], "other": [3]}'
    document = warmed(text)
    edited = reparse_json(document, text.replace("[1", "[15"))
    assert edited.value == {"value": [15, 2], "other": [3]}
    edited = reparse_json(edited, edited.text.replace(" 2]", " -2]"))
    assert edited.value["value"] == [15, -2]
    edited = reparse_json(edited, edited.text.replace("[3]", "[-3]"))
    assert edited.value["other"] == [-3]


def test_an_edit_inside_a_rule_keeps_every_other_rule_the_same_object() -> None:
    text = engine_text(50)
    document = warmed(text)
    at = text.index('"scope.a"', text.index('"r20"')) + 3
    edited = reparse_json(document, text[:at] + "x" + text[at:])
    assert edited.value["rules"][20]["when"][0]["field"] == "scxope.a"
    assert all(edited.value["rules"][i] is document.value["rules"][i] for i in range(50) if i != 20)
    assert edited.value["rules"][20]["then"] is document.value["rules"][20]["then"]
    assert document.value["rules"][20]["when"][0]["field"] == "scope.a"  # the previous version is intact
    assert document.span("/rules/20/when/0/field") == (at - 3, at + 6)
    assert edited.span("/rules/20/when/0/field") == (at - 3, at + 7)


def test_a_rule_inserted_or_deleted_keeps_the_others() -> None:
    text = engine_text(50)
    document = warmed(text)
    at = text.rindex("{", 0, text.index('"r20"'))
    inserted = reparse_json(document, text[:at] + '{"id": "new"}, ' + text[at:])
    assert_same_as_fresh(inserted, inserted.text)
    rules, old = inserted.value["rules"], document.value["rules"]
    assert rules[20] == {"id": "new"}
    # the diff reads the insertion as typed just inside rule 20, so that one is read again
    assert all(rules[i] is old[i] for i in range(20)) and all(rules[i + 1] is old[i] for i in range(21, 50))
    assert rules[21] == old[20]
    deleted = reparse_json(inserted, text)
    assert deleted.value == document.value
    assert sum(any(rule is other for other in rules) for rule in deleted.value["rules"]) >= 49


def test_whitespace_between_tokens_changes_nothing() -> None:
    text = engine_text()
    document = warmed(text)
    at = text.index('"rules"')
    spaced = reparse_json(document, text[:at] + "\n   \t" + text[at:])
    assert spaced.value is document.value
    assert spaced.span("/rules/2") == (document.span("/rules/2")[0] + 5, document.span("/rules/2")[1] + 5)


def test_whitespace_inside_a_key_is_a_new_key() -> None:
    text = engine_text()
    document = warmed(text)
    at = text.index('"then"') + 5
    edited = reparse_json(document, text[:at] + " " + text[at:])
    assert "then " in edited.value["rules"][0] and "then" not in edited.value["rules"][0]


def test_an_edit_under_a_shadowed_duplicate_key_reads_the_winner() -> None:
    text = '{"a": {"x": 1}, "b": 2, "a": {"x": 3}}'
    document = warmed(text)
    edited = reparse_json(document, text.replace('{"x": 1}', '{"x": 10}'))
    assert edited.value == {"a": {"x": 3}, "b": 2}
    edited = reparse_json(edited, edited.text.replace('{"x": 3}', '{"x": 30}'))
    assert edited.value == {"a": {"x": 30}, "b": 2}


def test_breaking_and_mending_the_document() -> None:
    text = engine_text()
    document = warmed(text)
    at = text.index('"scope.a"') + 1
    broken = reparse_json(document, text[:at] + '"' + text[at:])
    assert broken.value is None and broken.syntax_errors
    mended = reparse_json(broken, text)
    assert_same_as_fresh(mended, text)


def test_without_a_tree_the_new_one_is_built_on_first_use() -> None:
    text = engine_text()
    document = parse_json(text)  # valid: no tree yet
    edited = reparse_json(document, text.replace('"x"', '"y"'))
    assert edited.value["name"] == "y"
    assert_same_as_fresh(edited, edited.text)


def test_parse_document_takes_the_previous_version() -> None:
    text = engine_text()
    document = warmed(text)
    assert parse_document(text, "e.json", document) is document  # nothing changed
    edited = parse_document(text.replace('"x"', '"y"'), "e.json", document)
    assert edited.value["rules"] is document.value["rules"]
    yaml = parse_document("a: 1\n", "e.yaml", document)
    assert yaml.value == {"a": 1}
