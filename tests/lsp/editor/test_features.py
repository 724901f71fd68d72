"""Completion, hover and code actions end to end, on complete and incomplete documents and in
each dialect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from ..editor_support import (
    capabilities,
    change_doc,
    diagnostics_for,
    open_doc,
    position_of,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities(pull=False, snippets=True)


async def complete(client: LanguageClient, uri: str, text: str, needle: str, delta: int) -> list[types.CompletionItem]:
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=position_of(text, needle, delta)))
    assert isinstance(result, types.CompletionList)
    return list(result.items)


def edit_of(item: types.CompletionItem) -> types.TextEdit:
    assert isinstance(item.text_edit, types.TextEdit)
    return item.text_edit


async def test_field_completion_in_an_unclosed_string_of_a_broken_document(client: LanguageClient,
                                                                          root: Path) -> None:
    text = '{"id": "c1", "rules": [{"id": "r", "when": [{"field": "scope.ag'
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "c1.json", text)
    items = await complete(client, uri, text, "scope.ag", len("scope.ag"))
    labels = [i.label for i in items]
    assert "scope.agent." in labels and "scope.task." in labels
    edit = edit_of(next(i for i in items if i.label == "scope.agent."))
    assert edit.range.start == position_of(text, "scope.ag")
    assert edit.range.end == position_of(text, "scope.ag", 8)
    assert edit.new_text == "scope.agent."


async def test_field_completion_levels_and_additional_variables(client: LanguageClient, root: Path) -> None:
    text = '{"id": "c2", "rules": [{"id": "r", "when": [{"field": "addVar.", "operator": "eq"}], "then": {}}]}'
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "c2.json", text)
    items = await complete(client, uri, text, "addVar.", len("addVar."))
    labels = {i.label for i in items}
    assert {"addVar.phase", "addVar.files_changed"} <= labels
    phase = next(i for i in items if i.label == "addVar.files_changed")
    assert isinstance(phase.documentation, types.MarkupContent) and "architecture-docs" in phase.documentation.value
    edit = edit_of(phase)
    assert edit.range.end == position_of(text, "addVar.", 7)  # up to the closing quote
    top = await complete(client, uri, text, '"addVar.', 1)
    assert {"scope.", "addVar.", "input.text"} <= {i.label for i in top}


async def test_operator_completion_with_docs_outside_a_string(client: LanguageClient, root: Path) -> None:
    text = '{"id": "c3", "rules": [{"id": "r", "when": [{"field": "input.text", "operator": '
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "c3.json", text)
    items = await complete(client, uri, text, '"operator": ', 12)
    contains = next(i for i in items if i.label == "contains")
    assert edit_of(contains).new_text == '"contains"'
    assert isinstance(contains.documentation, types.MarkupContent)
    assert "case-insensitive" in contains.documentation.value


async def test_memory_ids_sections_priorities_and_keys(client: LanguageClient, root: Path) -> None:
    text = ('{"id": "c4", "rules": [{"id": "r", "when": [], "then": {"add_memories": ["arch"], '
            '"set_priority": {"history": ""}}}]}')
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "c4.json", text)
    memories = await complete(client, uri, text, '"arch"', 5)
    arch = next(i for i in memories if i.label == "architecture-docs")
    assert arch.detail == "Architecture docs"
    assert edit_of(arch).range.start == position_of(text, '"arch"', 1)
    priorities = await complete(client, uri, text, '"history": ""', 12)
    assert [i.label for i in priorities] == ["critical", "high", "medium", "low"]
    keys = await complete(client, uri, text, '"then": {', 9)
    labels = {i.label for i in keys}
    assert "caps" in labels and "add_memories" not in labels  # already present


async def test_key_completion_in_a_broken_document_skips_present_keys(client: LanguageClient, root: Path) -> None:
    # a new key being typed: its string is not closed, so the document does not parse
    text = '{"id": "c5", "rules": [{"id": "r", "when": [], "pr\n  }]}'
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "c5.json", text)
    labels = {i.label for i in await complete(client, uri, text, '"pr', 3)}
    assert {"priority", "then"} <= labels and not labels & {"id", "when"}
    unclosed = '{"id": "c5", "rules": [{"id": "r", "when": [], "'  # tree-sitter gives up: the fallback scan
    change_doc(client, uri, unclosed, 2)
    labels = {i.label for i in await complete(client, uri, unclosed, '[], "', 5)}
    assert {"priority", "then"} <= labels and not labels & {"id", "when"}


async def test_snippets_for_a_new_rule_and_condition(client: LanguageClient, root: Path) -> None:
    text = '{"id": "c5", "rules": [  ]}'
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "c5.json", text)
    items = await complete(client, uri, text, "[ ", 1)
    snippet = next(i for i in items if i.label == "new rule")
    assert snippet.insert_text_format == types.InsertTextFormat.Snippet


async def test_step_types_sections_in_a_memory_and_seed004_completion(client: LanguageClient, root: Path) -> None:
    text = json.dumps({"id": "m", "retrieval": {"pipeline": [{"type": "vec"}]}, "contribution": {"section": "kn"}})
    uri = open_doc(client, root / ".codebolt" / "PersistentMemory" / "m.json", text)
    steps = await complete(client, uri, text, '"vec"', 4)
    assert "vector_search" in {i.label for i in steps}
    sections = await complete(client, uri, text, '"kn"', 3)
    assert "knowledge" in {i.label for i in sections}
    seed = '[{"name": "x", "condition": {"field": "task.t", "op": "equ'
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / "05_x.json", seed)
    fields = await complete(client, uri, seed, '"task.t', 7)
    assert "task.text" in {i.label for i in fields}
    ops = await complete(client, uri, seed, '"equ', 4)
    assert {"equals", "eq"} <= {i.label for i in ops}  # seed-004 files accept its own spellings


async def test_seed003_yaml_memory_completion(client: LanguageClient, root: Path) -> None:
    text = "name: y\nwhen:\n  task_contains: [auth]\nthen:\n  boost:\n    - memory: arch\n"
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / "06_y.yaml", text)
    items = await complete(client, uri, text, "arch", 4)
    arch = next(i for i in items if i.label == "architecture-docs")
    assert edit_of(arch).new_text == "architecture-docs"
    assert edit_of(arch).range.start == position_of(text, "arch")


async def test_hover_on_operator_variable_memory_step(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "context-rule-engines" / "review.json"
    text = path.read_text()
    uri = open_doc(client, path)

    async def hover_at(needle: str, delta: int = 2) -> str:
        result = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri), position=position_of(text, needle, delta)))
        assert result is not None and isinstance(result.contents, types.MarkupContent)
        return result.contents.value

    assert "greater-than" in await hover_at('"gte"')
    assert "architecture-docs" in await hover_at('"addVar.files_changed"')
    assert "Pipeline" in await hover_at('"architecture-docs"]')
    memory = root / ".codebolt" / "PersistentMemory" / "architecture-docs.json"
    mtext = memory.read_text()
    muri = open_doc(client, memory)
    result = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(muri), position=position_of(mtext, '"vector_search"', 3)))
    assert result is not None and "retrieval step" in str(result.contents)


async def test_code_actions_did_you_mean_alias_and_rewrite(client: LanguageClient, root: Path) -> None:
    text = json.dumps({"id": "c6", "rules": [{"id": "r", "when": [
        {"field": "input.text", "operator": "containz", "value": "a"},
        {"field": "input.text", "operator": "equals", "value": "b"}], "then": {}}]})
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "c6.json", text)
    found = await diagnostics_for(client, uri, version=1)
    fixable = [d for d in found if d.code in ("unknown-operator", "operator-alias")]
    assert len(fixable) == 2
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri), range=fixable[0].range,
        context=types.CodeActionContext(diagnostics=fixable)))
    assert actions is not None
    titles = [a.title for a in actions if isinstance(a, types.CodeAction)]
    assert "Change to 'contains'" in titles and "Use the canonical spelling 'eq'" in titles
    fix = next(a for a in actions if isinstance(a, types.CodeAction) and a.title == "Change to 'contains'")
    assert fix.edit is not None and fix.edit.changes is not None
    assert fix.edit.changes[uri][0].new_text == '"contains"'
    # the seed-004 example file: rewrite as a canonical engine
    seed = root / ".codebolt" / "ContextRuleEngine" / "01_base-rules.json"
    suri = open_doc(client, seed)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(suri), range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[])))
    assert actions is not None
    rewrite = next(a for a in actions
                   if isinstance(a, types.CodeAction) and a.kind == types.CodeActionKind.RefactorRewrite)
    assert rewrite.edit is not None and rewrite.edit.document_changes is not None
    created = rewrite.edit.document_changes[1]
    assert isinstance(created, types.TextDocumentEdit)
    engine = json.loads(created.edits[0].new_text)
    assert engine["rules"][0]["when"][0]["field"] == "input.text"


async def test_ingestion_pipeline_completion_and_hover(client: LanguageClient, root: Path) -> None:
    text = json.dumps({"id": "ingest", "trigger": "onTask", "status": "", "trigger_config": {"where": [{}]},
                       "processors": [{"id": "c1", "type": "chunk"}, {"id": "c2", "type": "chunker", "input": ""}],
                       "routing": [{"from": "c2", "write_to": ""}]})
    uri = open_doc(client, root / ".codebolt" / "MemoryIngestion" / "ingest.json", text)
    triggers = {i.label for i in await complete(client, uri, text, '"onTask"', 7)}
    assert {"onTaskStart", "onTaskCompleted", "manual"} <= triggers
    processors = await complete(client, uri, text, '"chunk"', 6)
    chunker = next(i for i in processors if i.label == "chunker")
    assert chunker.documentation is not None and "chunk_size" in str(chunker.documentation)
    assert {"normalizer", "vector_embed", "llm_extract_kb", "custom"} <= {i.label for i in processors}
    assert [i.label for i in await complete(client, uri, text, '"status": ""', 11)] == ["active", "disabled"]
    destinations = {i.label for i in await complete(client, uri, text, '"write_to": ""', 13)}
    assert {"vector://", "kv://", "graph://"} <= destinations and "file://" not in destinations
    params = {i.label for i in await complete(client, uri, text, '{"id": "c2"', 1)}  # keys of a chunker
    assert {"chunk_size", "overlap", "output"} <= params and not params & {"id", "type", "input"}
    where = {i.label for i in await complete(client, uri, text, '"where": [{', 11)}
    assert {"field", "operator", "value"} <= where
    route = {i.label for i in await complete(client, uri, text, '{"from": "c2"', 1)}
    assert {"foreach", "condition", "id"} <= route and not route & {"from", "write_to"}
    top = {i.label for i in await complete(client, uri, text, '{"id": "ingest"', 1)}
    assert {"label", "description"} <= top and not top & {"id", "trigger", "processors"}

    valid = text.replace('"onTask"', '"onTaskCompleted"')
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=valid)]))
    for needle, word in (('"onTaskCompleted"', "onTaskCompleted"), ('"chunker"', "chunker")):
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri), position=position_of(valid, needle, 3)))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert word in hover.contents.value
