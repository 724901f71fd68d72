"""The formatter: canonical key order from the schemas, stable layout, idempotent, values and YAML
comments kept, and files it cannot format refused rather than changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.documents import parse_document
from context_assembly.formatting import FormatError, format_text, format_value, schema_of_path

ENGINE = """{"rules": [{"then": {"add_memories": ["b", "a"]}, "when": [{"value": "planning", "operator": "eq",
  "field": "addVar.phase"}], "priority": 5, "id": "r1", "x-extra": 1}], "name": "Main", "id": "main",
  "$schema": "urn:context-assembly:schema:rule-engine"}"""


def test_keys_take_the_schema_order_and_unknown_keys_follow_in_their_own_order() -> None:
    out = format_text(ENGINE, "main.json", "rule-engine")
    assert out == """{
  "$schema": "urn:context-assembly:schema:rule-engine",
  "id": "main",
  "name": "Main",
  "rules": [
    {
      "id": "r1",
      "priority": 5,
      "when": [
        { "field": "addVar.phase", "operator": "eq", "value": "planning" }
      ],
      "then": {
        "add_memories": ["b", "a"]
      },
      "x-extra": 1
    }
  ]
}
"""


def test_steps_follow_the_schema_of_their_own_type() -> None:
    text = json.dumps({"retrieval": {"pipeline": [{"topK": 3, "collection": "docs", "type": "vector_search",
                                                   "query": "q", "minScore": 0.5}]}, "id": "m"})
    value = json.loads(format_text(text, "m.json", "persistent-memory"))
    assert list(value["retrieval"]["pipeline"][0]) == ["type", "collection", "query", "topK", "minScore"]


def test_numbers_keep_their_spelling_and_non_ascii_stays_readable() -> None:
    out = format_text('{"id": "m", "description": "caf\\u00e9 \\ud83d\\ude00", "x": 1.50, "y": 1e3, "z": -0}',
                      "m.json", "persistent-memory")
    assert '"x": 1.50' in out and '"y": 1e3' in out and '"z": -0' in out
    assert "café 😀" in out


def test_long_scalar_objects_are_broken_over_lines() -> None:
    text = json.dumps({"id": "m", "contribution": {"section": "knowledge", "priority": "high", "format": "markdown",
                                                   "max_items": 4, "max_tokens": 1500, "x": "y" * 40}})
    out = format_text(text, "m.json", "persistent-memory")
    assert '  "contribution": {\n    "section": "knowledge",\n' in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_yaml_comments_quotes_and_flow_lists_are_kept() -> None:
    text = """# the security rules
then:   # what to add
  always_include:
    - path: "docs/security.md"   # quoted stays quoted
when:
  task_contains: ["auth", 'login']
# the rule's name
name: auth-work
"""
    out = format_text(text, "02.yaml", "context-rules")
    assert out.index("name: auth-work") < out.index("when:") < out.index("then:")
    for kept in ("# the security rules", "# what to add", "# quoted stays quoted", "# the rule's name",
                 '"docs/security.md"', "[\"auth\", 'login']"):
        assert kept in out, kept
    assert yaml.safe_load(out) == yaml.safe_load(text)
    assert format_text(out, "02.yaml", "context-rules") == out


def test_yaml_sequences_are_indented_under_their_key() -> None:
    out = format_text("name: x\npipeline:\n- step: kv_get\n  keys:\n  - k\n", "m.yaml", "persistent-memory")
    assert out == "name: x\npipeline:\n  - step: kv_get\n    keys:\n      - k\n"


def test_a_top_level_yaml_list_starts_at_column_zero() -> None:
    text = "- name: a\n  when: {task_contains: [x]}\n  then:\n    always_include:\n    - path: a\n# next\n" \
           "- name: b\n  k: |\n    multi\n    line\n"
    out = format_text(text, "01.yaml", "context-rules")
    assert out.startswith("- name: a\n  when:") and "\n      - path: a\n# next\n- name: b\n" in out
    assert yaml.safe_load(out) == yaml.safe_load(text)
    assert format_text(out, "01.yaml", "context-rules") == out


def test_several_yaml_documents_in_one_file_are_refused() -> None:
    with pytest.raises(FormatError):
        format_text("name: a\n---\nname: b\n", "m.yaml", "persistent-memory")


@pytest.mark.parametrize(("text", "message"), [
    ('{"id": "a", "id": "b"}', "appears twice"),
    ('{"id": "a",', "line 1"),
    ('{"x": NaN}', "NaN"),
])
def test_files_that_cannot_be_formatted_are_refused(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        format_text(text, "m.json", "persistent-memory")


def test_invalid_yaml_is_refused() -> None:
    with pytest.raises(FormatError):
        format_text("name: [unclosed\n", "m.yaml", "persistent-memory")


@pytest.mark.parametrize(("text", "message"), [
    ("- &x [*x]\n", "recursive alias"),
    ("&x {a: *x}\n", "recursive alias"),
    ("a: &x\n  b: [1, *x]\n", "recursive alias"),
    ("a: " + "[" * 300 + "]" * 300 + "\n", "nested too deeply"),
])
def test_yaml_the_round_trip_cannot_lay_out_is_refused(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):  # not a RecursionError
        format_text(text, "r.yaml", "context-rules")


def test_yaml_aliases_shared_by_several_keys_are_formatted() -> None:
    text = "a: &x [1, {q: 2}]\nb: *x\nc: [*x, *x]\n"
    assert yaml.safe_load(format_text(text, "r.yaml", None)) == yaml.safe_load(text)


def test_values_built_in_code_come_out_formatted_and_unchanged() -> None:
    value = {"rules": [{"when": [{"field": "addVar.on", "operator": "eq", "value": "yes"}], "id": "r"}], "id": "e"}
    for as_yaml, name in ((False, "e.json"), (True, "e.yaml")):
        text = format_value(value, "rule-engine", yaml=as_yaml)
        assert format_text(text, name, "rule-engine") == text
        assert parse_document(text, name).value == value  # `yes` stays a string for YAML 1.1 readers


def test_schema_of_path_recognises_definitions_and_settings(tmp_path: Any) -> None:
    codebolt = tmp_path / "ws" / ".codebolt"
    assert schema_of_path(codebolt / "context-rule-engines" / "a.json") == "rule-engine"
    assert schema_of_path(codebolt / "ContextRuleEngine" / "a.yaml") == "context-rules"
    assert schema_of_path(codebolt / "PersistentMemory" / "a.yml") == "persistent-memory"
    assert schema_of_path(codebolt / "MemoryIngestion" / "a.json") == "ingestion-pipeline"
    assert schema_of_path(codebolt / "knowledgegraph" / "views" / "a.json") == "graph-view"
    assert schema_of_path(codebolt / "context-assembly.json") == "settings"
    assert schema_of_path(codebolt / "vectordb" / "docs" / "collection.json") is None
    assert schema_of_path(tmp_path / "package.json") is None


# -- properties: format(format(x)) == format(x), and the parsed value never changes

KEYS = st.sampled_from(["id", "name", "rules", "when", "then", "field", "operator", "value", "priority",
                        "add_memories", "zeta", "alpha", "$schema", "type", "pipeline", "step", "x y", "é"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
VALUES = st.recursive(SCALARS, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=5)), max_leaves=25)
SCHEMAS = st.sampled_from(["rule-engine", "context-rules", "persistent-memory", "ingestion-pipeline",
                           "graph-view", "settings", None])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.dictionaries(KEYS, VALUES, max_size=6), schema=SCHEMAS, indent=st.sampled_from([None, 1, 4]))
def test_json_formatting_is_idempotent_and_keeps_the_value(value: dict[str, Any], schema: str | None,
                                                           indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=indent is None)
    once = format_text(text, "f.json", schema)
    assert format_text(once, "f.json", schema) == once
    assert json.loads(once) == json.loads(text)


YAML_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                         st.text(st.characters(min_codepoint=32, max_codepoint=0x2fff,
                                               blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=10),
                         st.sampled_from(["yes", "no", "on", "off", "010", "1e3", "~", "null", "-", "a: b", "#x"]))
YAML_VALUES = st.recursive(YAML_SCALARS, lambda children: st.one_of(
    st.lists(children, min_size=1, max_size=3), st.dictionaries(KEYS, children, min_size=1, max_size=4)),
    max_leaves=15)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.dictionaries(KEYS, YAML_VALUES, min_size=1, max_size=5), schema=SCHEMAS,
       flow=st.booleans(), comment=st.booleans())
def test_yaml_formatting_is_idempotent_and_keeps_the_value_and_comments(
        value: dict[str, Any], schema: str | None, flow: bool, comment: bool) -> None:
    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=flow or None, width=4096)
    if comment:
        text = "# heading comment\n" + text
    once = format_text(text, "f.yaml", schema)
    assert format_text(once, "f.yaml", schema) == once
    assert yaml.safe_load(once) == yaml.safe_load(text)
    if comment:
        assert "# heading comment" in once


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.lists(st.dictionaries(KEYS, YAML_VALUES, min_size=1, max_size=4), min_size=1, max_size=4),
       flow=st.booleans())
def test_yaml_lists_of_rules_format_idempotently(value: list[dict[str, Any]], flow: bool) -> None:
    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=flow or None, width=4096)
    once = format_text(text, "rules.yaml", "context-rules")
    assert format_text(once, "rules.yaml", "context-rules") == once
    assert yaml.safe_load(once) == yaml.safe_load(text)


def test_a_crlf_file_keeps_its_line_endings() -> None:
    """YAML comments kept their "\\r" while every other line lost it (mixed endings), and a CRLF JSON
    file was rewritten to LF whole by the editor while `format --check` called it formatted."""
    yaml_text = "# head comment\r\nid: m  # trailing\r\n# between\r\nlabel: b\r\n"
    formatted = format_text(yaml_text, "m.yaml", "persistent-memory")
    assert formatted.count("\r\n") == formatted.count("\n") and formatted == format_text(formatted, "m.yaml",
                                                                                         "persistent-memory")
    json_text = '{\r\n  "id": "e",\r\n  "rules": []\r\n}\r\n'
    assert format_text(json_text, "e.json", "rule-engine") == json_text
    messy = '{"rules": [], "id": "e"}\r\n'
    assert format_text(messy, "e.json", "rule-engine") == json_text


def test_a_json_file_with_a_byte_order_mark_is_reported_like_check_reports_it() -> None:
    """`check` calls a BOM before JSON a syntax error (the loader skips the file); format called the
    same file "already formatted" when nothing else in it would change."""
    formatted = format_text('{"rules": [], "id": "e"}', "e.json", "rule-engine")
    with pytest.raises(FormatError, match="unexpected"):
        format_text("\ufeff" + formatted, "e.json", "rule-engine")
