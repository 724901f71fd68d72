"""Quick fixes end to end, where the fix must keep the document well formed and touch only what
is wrong: the id added to an empty rule, and a memory reference in the seed-004 and seed-003
dialects (whose actions are not the canonical `then`, so a problem may name a whole list)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from context_assembly.documents import parse_document

from ..editor_support import capabilities, diagnostics_for, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities(pull=False)
RULE = '[{"name": "x", "condition": {"field": "task.text", "op": "contains", "value": "a"}, '


def offset(text: str, position: types.Position) -> int:
    return sum(len(line) + 1 for line in text.split("\n")[:position.line]) + position.character


def applied(text: str, edits: list[types.TextEdit]) -> str:
    for edit in sorted(edits, key=lambda e: offset(text, e.range.start), reverse=True):
        text = text[:offset(text, edit.range.start)] + edit.new_text + text[offset(text, edit.range.end):]
    return text


async def fixes(client: LanguageClient, uri: str, diagnostic: types.Diagnostic) -> dict[str, str]:
    """Title -> the document's text once that fix is applied (quick fixes only)."""
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix])))
    found = {}
    for action in actions or []:
        assert isinstance(action, types.CodeAction) and action.edit is not None and action.edit.changes
        found[action.title] = action.edit.changes[uri]
    return found  # type: ignore[return-value]


async def test_the_id_added_to_an_empty_rule_leaves_valid_json(client: LanguageClient, root: Path) -> None:
    text = '{"id": "a1", "rules": [{}]}'
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "a1.json", text)
    missing = next(d for d in await diagnostics_for(client, uri, version=1) if d.code == "schema")
    edits = (await fixes(client, uri, missing))["Add the id 'rule-1'"]
    fixed = parse_document(applied(text, edits), "a1.json")  # type: ignore[arg-type]
    assert not fixed.syntax_errors and fixed.value == {"id": "a1", "rules": [{"id": "rule-1"}]}


@pytest.mark.parametrize(("name", "text", "fixed"), [
    ("61_two.json", RULE + '"action": {"include": ["architecture-doc", "user-preferences"]}}]',
     '"action": {"include": ["architecture-docs", "user-preferences"]}'),
    ("62_one.json", RULE + '"action": {"include": ["architecture-doc"]}}]',
     '"action": {"include": ["architecture-docs"]}'),
    ("63_lone.json", RULE + '"action": {"include": "architecture-doc"}}]',
     '"action": {"include": "architecture-docs"}'),
    ("64_seed003.yaml", "name: a\nwhen:\n  task_contains: [auth]\nthen:\n  always_include: [architecture-doc]\n",
     "  always_include: [architecture-docs]"),
])
async def test_a_dialect_memory_fix_replaces_only_the_bad_reference(client: LanguageClient, root: Path, name: str,
                                                                    text: str, fixed: str) -> None:
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / name, text)
    unknown = next(d for d in await diagnostics_for(client, uri, version=1) if d.code == "unknown-memory")
    assert text[offset(text, unknown.range.start):offset(text, unknown.range.end)].strip('"') == "architecture-doc"
    edits = (await fixes(client, uri, unknown))["Change to 'architecture-docs'"]
    new = applied(text, edits)  # type: ignore[arg-type]
    assert fixed in new and new.replace("architecture-docs", "architecture-doc") == text


async def test_no_replacement_is_offered_for_a_problem_on_a_whole_list(client: LanguageClient, root: Path) -> None:
    # seed-003 drops the entries it cannot read, so the problem names the list, not an index
    text = "name: a\nwhen:\n  task_contains: [auth]\nthen:\n  always_include: [user-preferences, architecture-doc]\n"
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / "65_list.yaml", text)
    unknown = next(d for d in await diagnostics_for(client, uri, version=1) if d.code == "unknown-memory")
    assert unknown.data["candidates"] == ["architecture-docs"]
    assert text[offset(text, unknown.range.start):offset(text, unknown.range.end)] == \
        "[user-preferences, architecture-doc]"
    assert await fixes(client, uri, unknown) == {}
