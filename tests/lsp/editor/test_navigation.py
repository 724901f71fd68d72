"""Navigation end to end: symbols, definition, references and rename of a memory id, folding."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from ..editor_support import capabilities, open_doc, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities()


async def test_symbols_and_folding(client: LanguageClient, root: Path) -> None:
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "review.json")
    found = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri)))
    assert found is not None
    engine = found[0]
    assert isinstance(engine, types.DocumentSymbol) and engine.name == "review"
    assert [c.name for c in engine.children or []] == ["reviewer-conventions", "large-change"]
    folds = await client.text_document_folding_range_async(types.FoldingRangeParams(
        text_document=types.TextDocumentIdentifier(uri)))
    assert folds and folds[0].start_line == 0


async def test_definition_references_rename(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "context-rule-engines" / "review.json"
    text = path.read_text()
    uri = open_doc(client, path)
    where = position_of(text, '"architecture-docs"]', 3)
    definition = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri), position=where))
    assert isinstance(definition, types.Location)
    assert definition.uri.endswith("PersistentMemory/architecture-docs.json")
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri), position=where,
        context=types.ReferenceContext(include_declaration=True)))
    assert refs is not None
    uris = {r.uri.rsplit("/", 1)[1] for r in refs}
    assert {"architecture-docs.json", "review.json", "planning.json"} <= uris
    edit = await client.text_document_rename_async(types.RenameParams(
        text_document=types.TextDocumentIdentifier(uri), position=where, new_name="arch"))
    # the editor renames files in a workspace edit: the text edits, then the definition's file
    assert edit is not None and edit.document_changes is not None
    *texts, moved = edit.document_changes
    assert isinstance(moved, types.RenameFile) and moved.new_uri.endswith("PersistentMemory/arch.json")
    assert all(isinstance(t, types.TextDocumentEdit) for t in texts)
    assert sum(len(t.edits) for t in texts) == len(refs)  # type: ignore[union-attr]
    review = next(t for t in texts if t.text_document.uri == uri)  # type: ignore[union-attr]
    assert review.text_document.version == 1  # type: ignore[union-attr]  # open: its version
    assert all(e.new_text == "arch" for e in review.edits)  # type: ignore[union-attr]
    assert review.edits[0].range.start == position_of(text, '"architecture-docs"]', 1)  # type: ignore[union-attr]
    with pytest.raises(Exception, match="is not a memory id"):
        await client.text_document_rename_async(types.RenameParams(
            text_document=types.TextDocumentIdentifier(uri), position=where, new_name='arch"x'))


async def test_references_and_rename_reach_rule_test_files(client: LanguageClient, root: Path) -> None:
    tests = root / ".codebolt" / "tests" / "planning.json"
    text = tests.read_text()  # names architecture-docs in memories_included and memories_excluded
    uri = open_doc(client, tests)
    where = position_of(text, '"architecture-docs"', 3)  # references asked from the test file itself
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri), position=where,
        context=types.ReferenceContext(include_declaration=False)))
    mine = sorted((r.range.start.line, r.range.start.character) for r in refs or [] if r.uri == uri)
    lines = text.split("\n")
    expected = sorted((n, line.index('"architecture-docs"')) for n, line in enumerate(lines)
                      if '"architecture-docs"' in line)
    assert len(expected) == 2 and mine == expected
    assert any(r.uri.endswith("context-rule-engines/review.json") for r in refs or [])
    edit = await client.text_document_rename_async(types.RenameParams(
        text_document=types.TextDocumentIdentifier(uri), position=where, new_name="arch-docs"))
    assert edit is not None and edit.document_changes is not None
    in_tests = next(c for c in edit.document_changes
                    if isinstance(c, types.TextDocumentEdit) and c.text_document.uri == uri)
    assert [e.new_text for e in in_tests.edits] == ["arch-docs", "arch-docs"]
