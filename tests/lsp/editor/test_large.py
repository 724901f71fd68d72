"""A 5,000-rule file over LSP: diagnostics with exact positions, incremental edits in the middle that
break, fix and re-break the file (each version's diagnostics equal a fresh check of its text),
completion, hover, symbols and go-to-definition, all on the same open document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import build_document, overlay
from context_assembly.workspace.loader import load_workspace

from ..editor_support import (
    capabilities,
    diagnostics_for,
    open_doc,
    position_of,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = capabilities()
RULES = 5000


def big_engine() -> str:
    rules = [{"id": f"r{i}", "priority": i % 7,
              "when": [{"field": "addVar.phase", "operator": "eq", "value": f"p{i}"}],
              "then": {"add_memories": ["architecture-docs"]}} for i in range(RULES)]
    rules[-1]["when"][0]["operator"] = "eqq"
    return json.dumps({"id": "big", "rules": rules}, indent=2)


def change(client: LanguageClient, uri: str, version: int, text: str, at: int, removed: int, inserted: str) \
        -> str:
    """An incremental change at character offset `at` (the texts here are ASCII: UTF-16 == offsets)."""
    line, column = text.count("\n", 0, at), at - (text.rfind("\n", 0, at) + 1)
    end_line, end_column = text.count("\n", 0, at + removed), at + removed - (text.rfind("\n", 0, at + removed) + 1)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, column), types.Position(end_line, end_column)), text=inserted)]))
    return text[:at] + inserted + text[at + removed :]


def fresh(root: Path, uri: str, text: str) -> list[tuple[str, int, int, str]]:
    """What a check of `text` from scratch finds: (code, line, character, pointer)."""
    document = build_document(uri, text, None, root.resolve())
    assert document is not None
    found = document_diagnostics(document, overlay(load_workspace(root), [document]))
    return sorted((d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"], d["data"]["pointer"])
                  for d in found)


def seen(found: list[types.Diagnostic]) -> list[tuple[str, int, int, str]]:
    return sorted((str(d.code), d.range.start.line, d.range.start.character, d.data["pointer"]) for d in found)


async def test_edits_in_a_five_thousand_rule_file(client: LanguageClient, root: Path) -> None:
    text = big_engine()
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "big.json", text)
    first = await diagnostics_for(client, uri, version=1, timeout=60)
    assert [(d.code, d.data["pointer"]) for d in first] == [("unknown-operator", f"/rules/{RULES - 1}/when/0/operator")]
    assert first[0].range.start == position_of(text, '"eqq"')

    versions = [  # (where, how many characters go, what comes), each from the text as it is then
        (lambda t: t.index('"p2500"') + 2, 0, "x"),  # a value changes: still valid
        (lambda t: t.index('"eq"', t.index('"r2500"')) + 1, 2, "equalz"),  # an unknown operator mid-file
        (lambda t: t.index('"px2500"') + 1, 0, '"'),  # a stray quote: the document no longer parses
        (lambda t: t.index('""px2500"') + 1, 1, ""),  # and parses again
        (lambda t: t.rindex('{\n      "id"', 0, t.index('"r2500"')), 0,  # a new rule before that one
         '{"id": "inserted", "when": [], "then": {}},\n    '),
    ]
    for version, (where, removed, inserted) in enumerate(versions, start=2):
        text = change(client, uri, version, text, where(text), removed, inserted)
        found = await diagnostics_for(client, uri, version=version, timeout=60)
        assert seen(found) == fresh(root, uri, text), f"version {version}"
    final = await diagnostics_for(client, uri, version=6)
    assert sorted(d.data["pointer"] for d in final) == ["/rules/2501/when/0/operator",  # shifted by the insert
                                                       f"/rules/{RULES}/when/0/operator"]

    caret = 4  # in the first `field` value: "add|Var.phase"
    completion = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=position_of(text, '"addVar.phase"', caret)))
    assert isinstance(completion, types.CompletionList)
    assert "addVar." in {item.label for item in completion.items}
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri), position=position_of(text, '"eq"', 2)))
    assert hover is not None and "eq" in str(hover.contents)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri)))
    assert symbols is not None and isinstance(symbols[0], types.DocumentSymbol)
    assert len(symbols[0].children or []) == RULES + 1
    target = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri),
        position=position_of(text, '"architecture-docs"', 3)))
    assert target, "go to definition of a memory id"
