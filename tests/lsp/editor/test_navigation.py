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
    assert edit is not None and edit.changes is not None
    assert sum(len(v) for v in edit.changes.values()) == len(refs)
    review = edit.changes[uri]
    assert all(e.new_text == "arch" for e in review)
    assert review[0].range.start == position_of(text, '"architecture-docs"]', 1)
