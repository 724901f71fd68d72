"""Completion while a definition is being typed, end to end: the first key under a YAML mapping
(which YAML reads as the parent's scalar value), YAML comments, keys already present in a YAML
file that does not parse, and drilling into a `field` group picked outside a JSON string."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from ..editor_support import capabilities, change_doc, open_doc, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities(pull=False, snippets=True)


async def complete(client: LanguageClient, uri: str, text: str, needle: str,
                   delta: int) -> list[types.CompletionItem]:
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=position_of(text, needle, delta)))
    return list(result.items) if isinstance(result, types.CompletionList) else list(result or [])


def offset_of(text: str, position: types.Position) -> int:
    """A position (UTF-16; these texts are ASCII) as an offset into `text`."""
    return sum(len(line) + 1 for line in text.split("\n")[:position.line]) + position.character


def chosen(text: str, items: list[types.CompletionItem], label: str) -> tuple[str, int]:
    """The text once the client applied the item `label`, and where the cursor is then: a
    snippet's `$0` is where it stays (the snippets here have no other placeholder)."""
    item = next(i for i in items if i.label == label)
    edit = item.text_edit
    assert isinstance(edit, types.TextEdit)
    new_text = edit.new_text
    cursor = len(new_text)
    if item.insert_text_format == types.InsertTextFormat.Snippet:
        cursor = new_text.index("$0")
        new_text = new_text.replace("$0", "", 1)
    start, end = offset_of(text, edit.range.start), offset_of(text, edit.range.end)
    return text[:start] + new_text + text[end:], start + cursor


@pytest.mark.parametrize(("name", "text", "needle", "label", "expected"), [
    ("PersistentMemory/first1.yaml", "name: P\npipeline:\n  - step: markdown_read\ncontribution:\n  pri\n",
     "  pri", "priority", {"section", "priority", "max_tokens"}),
    ("ContextRuleEngine/41_first.yaml", "name: a\nwhen:\n  task_contains: [auth]\nthen:\n  bo\n",
     "  bo", "boost", {"boost", "always_include", "exclude"}),
    ("PersistentMemory/first2.yaml", "co", "co", "contribution", {"id", "contribution", "description"}),
])
async def test_the_first_key_typed_under_a_yaml_mapping_gets_that_mappings_keys(
        client: LanguageClient, root: Path, name: str, text: str, needle: str, label: str,
        expected: set[str]) -> None:
    # YAML reads `contribution:\n  pri` as contribution: "pri" and a file holding `pi` as a scalar
    uri = open_doc(client, root / ".codebolt" / name, text)
    word = needle.strip()
    items = await complete(client, uri, text, needle, len(needle))
    assert expected <= {i.label for i in items}
    edit = next(i for i in items if i.label == label).text_edit
    assert isinstance(edit, types.TextEdit)
    assert (edit.range.start, edit.range.end) == (position_of(text, word), position_of(text, word, len(word)))
    new, _ = chosen(text, items, label)
    assert new == text.replace(needle, needle.replace(word, label), 1)


@pytest.mark.parametrize(("name", "text", "needle", "label"), [
    # a word that YAML reads as a value where a value is completed keeps getting values
    ("ContextRuleEngine/42_below.yaml", "- name: x\n  condition:\n    field:\n      inp\n", "inp", "input.text"),
    ("ContextRuleEngine/43_below.yaml", "- name: x\n  condition:\n    field: task.text\n    op: eq\n    value: y\n"
     "  action:\n    include:\n      arch\n", "arch", "architecture-docs"),
])
async def test_a_yaml_value_on_the_line_below_its_key_still_gets_values(client: LanguageClient, root: Path,
                                                                       name: str, text: str, needle: str,
                                                                       label: str) -> None:
    uri = open_doc(client, root / ".codebolt" / name, text)
    items = await complete(client, uri, text, needle, len(needle))
    assert label in {i.label for i in items}


@pytest.mark.parametrize("text", [
    "name: P\ndescription: |\n  pri\n",  # a block scalar
    "name: P\ncontribution:\n  'pri'\n",  # quoted: a string indeed
])
async def test_a_block_or_quoted_scalar_is_not_read_as_a_key(client: LanguageClient, root: Path, text: str) -> None:
    uri = open_doc(client, root / ".codebolt" / "PersistentMemory" / f"scalar{len(text)}.yaml", text)
    assert await complete(client, uri, text, "pri", 3) == []


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("PersistentMemory/comment1.yaml",
     "name: P\npipeline:\n  - step: markdown_read\ncontribution:\n  section: knowledge # or stat\n", "# or stat"),
    ("ContextRuleEngine/44_comment.yaml", "- name: x\n  condition: {field: task.text, op: eq, value: y}\n"
     "  action:\n    include: architecture-docs # also arch\n", "# also arch"),
    ("ContextRuleEngine/45_comment.yaml", "# op: eq\n- name: x\n  condition: {field: task.text, op: eq, value: y}\n"
     "  action: {include: x}\n", "# op: "),
])
async def test_nothing_is_offered_in_a_yaml_comment(client: LanguageClient, root: Path, name: str, text: str,
                                                   needle: str) -> None:
    uri = open_doc(client, root / ".codebolt" / name, text)
    assert await complete(client, uri, text, needle, len(needle)) == []


@pytest.mark.parametrize("value", ["'it''s # quoted'", '"say \\"hi\\" # quoted"', "a#b"])
async def test_a_hash_that_starts_no_comment_leaves_completion_on(client: LanguageClient, root: Path,
                                                                  value: str) -> None:
    text = f"- name: x\n  condition: {{value: {value}, field: task.text, op: eq}}\n  action: {{include: x}}\n"
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / f"46_hash{len(value)}.yaml", text)
    assert "contains" in {i.label for i in await complete(client, uri, text, "op: eq", 6)}


async def test_keys_present_in_a_yaml_file_that_does_not_parse_are_not_offered_again(client: LanguageClient,
                                                                                     root: Path) -> None:
    text = ("name: a\nwhen:\n  task_contains: [auth]\nthen:\n  boost:\n    - memory: architecture-docs\n"
            "  always_include: [x]\n  e\n")
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / "47_present.yaml", text)
    labels = {i.label for i in await complete(client, uri, text, "  e\n", 3)}
    assert "exclude" in labels and not labels & {"boost", "always_include"}
    # the key being edited is still offered: it replaces itself
    labels = {i.label for i in await complete(client, uri, text, "always_include", 3)}
    assert "always_include" in labels and "boost" not in labels


async def test_a_field_group_picked_outside_a_string_leaves_the_cursor_inside_it(client: LanguageClient,
                                                                                 root: Path) -> None:
    text = '{"id": "g1", "rules": [{"id": "r", "when": [{"field": , "operator": "eq", "value": 1}], "then": {}}]}'
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "g1.json", text)
    items = await complete(client, uri, text, '"field": ', 9)
    group = next(i for i in items if i.label == "scope.")
    assert group.insert_text_format == types.InsertTextFormat.Snippet
    assert isinstance(group.text_edit, types.TextEdit) and group.text_edit.new_text == '"scope.$0"'
    assert group.command is not None and group.command.command == "editor.action.triggerSuggest"
    new, cursor = chosen(text, items, "scope.")
    assert new == text.replace('"field": ,', '"field": "scope.",')
    change_doc(client, uri, new, 2)
    # the re-triggered suggestion, where the snippet left the cursor: inside the string
    labels = {i.label for i in await complete(client, uri, new, "", cursor)}
    assert {"scope.agent.", "scope.task."} <= labels
    plain = next(i for i in items if i.label == "input.text")  # a whole field is no snippet
    assert plain.insert_text_format != types.InsertTextFormat.Snippet
