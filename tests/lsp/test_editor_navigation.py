"""Navigation end to end: symbols, definition, references and rename of a memory id, folding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from ..editor.lsp_support import capabilities, make_editor_client, open_doc, position_of, start, workspace_copy
from .support import SERVER

pytestmark = pytest.mark.asyncio(loop_scope="module")
CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_editor_client)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return workspace_copy(tmp_path_factory.mktemp("editor-nav") / "ws")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    await start(lsp_client, root, capabilities())
    yield
    await lsp_client.shutdown_session()


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
