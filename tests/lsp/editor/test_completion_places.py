"""Completion where the replace range is easy to get wrong, end to end: after a YAML key's colon,
on a YAML key before its colon, right after a closed JSON string, and in a seed-003 YAML file
that does not parse (yet)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from context_assembly.documents import parse_document

from ..editor_support import capabilities, open_doc, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities(pull=False, snippets=True)


async def complete(client: LanguageClient, uri: str, position: types.Position,
                   trigger: str | None = None) -> list[types.CompletionItem]:
    context = types.CompletionContext(trigger_kind=types.CompletionTriggerKind.TriggerCharacter,
                                      trigger_character=trigger) if trigger else None
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=position, context=context))
    return list(result.items) if isinstance(result, types.CompletionList) else list(result or [])


def chosen(text: str, items: list[types.CompletionItem], label: str) -> str:
    """The text once the client applied the item `label` (one-line edits)."""
    edit = next(i for i in items if i.label == label).text_edit
    assert isinstance(edit, types.TextEdit) and edit.range.start.line == edit.range.end.line
    lines = text.split("\n")
    line = lines[edit.range.start.line]
    lines[edit.range.start.line] = line[:edit.range.start.character] + edit.new_text + line[edit.range.end.character:]
    return "\n".join(lines)


@pytest.mark.parametrize(("folder", "text", "needle", "label", "line"), [
    ("PersistentMemory", "name: P\npipeline:\n  - step: markdown_read\ncontribution:\n  section:",
     "section:", "state", "  section: state"),
    ("ContextRuleEngine", "- name: x\n  condition:\n    field: task.text\n    op:\n  action:\n    include: a\n",
     "op:", "contains", "    op: contains"),
])
async def test_a_yaml_value_typed_after_the_colon_keeps_the_key(client: LanguageClient, root: Path, folder: str,
                                                                text: str, needle: str, label: str,
                                                                line: str) -> None:
    uri = open_doc(client, root / ".codebolt" / folder / f"colon-{len(text)}.yaml", text)
    at = position_of(text, needle, len(needle))
    new = chosen(text, await complete(client, uri, at), label)
    assert new.split("\n")[at.line] == line


async def test_a_yaml_key_completed_before_its_colon_keeps_the_colon(client: LanguageClient, root: Path) -> None:
    text = "name: a\nwhen:\n  task_contains: [auth]\nthen:\n  bo: []\n"
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / "71_keys.yaml", text)
    new = chosen(text, await complete(client, uri, position_of(text, "  bo", 4)), "boost")
    assert new.split("\n")[4] == "  boost: []"


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("closed1.json", '{"id": "closed1", "rules": [{"id": "r", "when": [], '
                     '"then": {"add_memories": ["architecture-docs"]}}]}', '"architecture-docs"'),
    ("closed2.json", '{"id": "closed2", "rules": [{"id": "r", "when": [{"field": "input.text", '
                     '"operator": "eq", "value": 1}], "then": {}}]}', '"eq"'),
])
async def test_nothing_is_offered_right_after_a_closed_string(client: LanguageClient, root: Path, name: str,
                                                              text: str, needle: str) -> None:
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / name, text)
    at = position_of(text, needle, len(needle))
    items = await complete(client, uri, at, trigger='"')
    # anything inserted there would be a second string: `"eq""eq"`
    assert [i.label for i in items] == []
    inside = await complete(client, uri, position_of(text, needle, len(needle) - 1))
    assert items != inside and inside  # one character earlier, inside the string, is still offered
    assert not parse_document(chosen(text, inside, inside[0].label), name).syntax_errors


async def test_a_seed003_yaml_file_that_does_not_parse_gets_seed003_keys(client: LanguageClient,
                                                                        root: Path) -> None:
    text = "name: a\nwhen:\n  task_contains: [auth]\nthen:\n  boost:\n    - memory: architecture-docs\n  al\n"
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / "30_broken.yaml", text)
    labels = {i.label for i in await complete(client, uri, position_of(text, "  al", 4))}
    assert "always_include" in labels  # seed-003 `then` keys
    assert not labels & {"include", "setPriority", "cap"}  # not seed-004 `action` keys
