"""Completion for a client without snippet support, end to end: a `field` group picked outside
a JSON string is plain text (the client would insert a snippet's `$0` literally)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from ..editor_support import capabilities, open_doc, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities(pull=False, snippets=False)


async def test_a_field_group_picked_outside_a_string_is_plain_text(client: LanguageClient, root: Path) -> None:
    text = '{"id": "g2", "rules": [{"id": "r", "when": [{"field": , "operator": "eq", "value": 1}], "then": {}}]}'
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "g2.json", text)
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=position_of(text, '"field": ', 9)))
    assert isinstance(result, types.CompletionList)
    group = next(i for i in result.items if i.label == "scope.")
    assert group.insert_text_format in (None, types.InsertTextFormat.PlainText)
    assert isinstance(group.text_edit, types.TextEdit) and group.text_edit.new_text == '"scope."'
    assert not any(i.insert_text_format == types.InsertTextFormat.Snippet for i in result.items)
