"""Pull diagnostics (`textDocument/diagnostic`, `workspace/diagnostic`) for a client that supports
them, with UTF-8 positions negotiated; nothing is pushed to such a client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from ..editor_support import capabilities, open_doc, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
INIT: list[types.InitializeResult] = []
CAPABILITIES = capabilities(pull=True, encodings=["utf-8"])


async def test_negotiates_utf8_and_offers_pull(client: LanguageClient) -> None:
    assert INIT[-1].capabilities.position_encoding == types.PositionEncodingKind.Utf8
    assert INIT[-1].capabilities.diagnostic_provider is not None


async def test_document_pull_in_utf8_columns(client: LanguageClient,
                                             root: Path) -> None:
    text = json.dumps({"id": "pulled", "name": "é🚀", "rules": [
        {"id": "r", "when": [{"field": "input.text", "operator": "eqq", "value": "x"}], "then": {}}]},
        ensure_ascii=False)
    path = root / ".codebolt" / "context-rule-engines" / "pulled.json"
    uri = open_doc(client, path, text)
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri)))
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
    operator = next(d for d in report.items if d.code == "unknown-operator")
    assert operator.range.start == position_of(text, '"eqq"', encoding="utf-8")
    await asyncio.sleep(0.3)
    assert not [p for p in client.protocol.published if p.uri == uri]  # type: ignore[attr-defined]


async def test_workspace_pull_covers_every_definition_file(client: LanguageClient, root: Path) -> None:
    report = await client.workspace_diagnostic_async(types.WorkspaceDiagnosticParams(previous_result_ids=[]))
    uris = {item.uri for item in report.items}
    assert (root / ".codebolt" / "context-rule-engines" / "review.json").resolve().as_uri() in uris
    assert (root / ".codebolt" / "ContextRuleEngine" / "02_security.yaml").resolve().as_uri() in uris


async def test_a_report_sent_back_unchanged_is_answered_unchanged(client: LanguageClient, root: Path) -> None:
    text = json.dumps({"id": "again", "rules": [
        {"id": "r", "when": [{"field": "input.text", "operator": "eqq", "value": "x"}], "then": {}}]})
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "again.json", text)
    document = types.TextDocumentIdentifier(uri)
    first = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    assert isinstance(first, types.RelatedFullDocumentDiagnosticReport) and first.result_id
    again = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=document, previous_result_id=first.result_id))
    assert isinstance(again, types.RelatedUnchangedDocumentDiagnosticReport)
    assert again.result_id == first.result_id
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text.replace("eqq", "eq"))]))
    fixed = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=document, previous_result_id=first.result_id))
    assert isinstance(fixed, types.RelatedFullDocumentDiagnosticReport)
    assert fixed.result_id != first.result_id and not [d for d in fixed.items if d.code == "unknown-operator"]
    workspace = await client.workspace_diagnostic_async(types.WorkspaceDiagnosticParams(
        previous_result_ids=[types.PreviousResultId(uri=uri, value=fixed.result_id)]))
    mine = [item for item in workspace.items if item.uri == uri]
    assert len(mine) == 1 and isinstance(mine[0], types.WorkspaceUnchangedDocumentDiagnosticReport)
    others = [item for item in workspace.items if item.uri != uri]
    assert others and all(isinstance(item, types.WorkspaceFullDocumentDiagnosticReport) for item in others)
