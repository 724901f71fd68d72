"""The settings file end to end: an editor opening `.codebolt/context-assembly.json` gets schema
diagnostics on the offending value, completion of the ladder's strategies and hover on them."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from context_assembly.registry.ladder import STRATEGY_NAMES

from ..editor_support import capabilities, change_doc, diagnostics_for, open_doc, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities(pull=False, snippets=True)


async def test_settings_diagnostics_completion_and_hover(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "context-assembly.json"
    on_disk = path.read_text() if path.is_file() else None
    text = '{\n  "budget": {"ladder": ["truncate", "shrink"]}\n}'
    uri = open_doc(client, path, text)
    found = await diagnostics_for(client, uri, 1)
    assert [d.code for d in found] == ["schema"]
    assert found[0].range.start == position_of(text, '"shrink"')
    assert found[0].range.end == position_of(text, '"shrink"', len('"shrink"'))

    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=position_of(text, '"shrink"', 1)))
    assert isinstance(result, types.CompletionList)
    assert {i.label for i in result.items} == set(STRATEGY_NAMES)

    fixed = text.replace("shrink", "summarize")
    change_doc(client, uri, fixed, 2)
    assert await diagnostics_for(client, uri, 2) == []
    hovered = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri), position=position_of(fixed, "summarize", 2)))
    assert hovered is not None and isinstance(hovered.contents, types.MarkupContent)
    assert hovered.contents.value.startswith("**summarize** (budget ladder strategy)")
    # the editor only read the unsaved text: the file on disk is as it was
    assert (path.read_text() if path.is_file() else None) == on_disk
