"""`contextRuleEngine/validate` answers with exactly the diagnostics the editor publishes (push) and
answers (pull) for the same text: same JSON pointers, codes, messages, severities and ranges (UTF-16
columns, an emoji before the errors), for a draft with several problems and for a syntax error."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .editor_support import (
    capabilities,
    change_doc,
    diagnostics_for,
    make_editor_client,
    open_doc,
    position_of,
    start,
    workspace_copy,
)
from .support import SERVER, call

pytestmark = pytest.mark.asyncio(loop_scope="module")
CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_editor_client)
VALIDATE = "contextRuleEngine/validate"
SEVERITY_NAMES = {1: "error", 2: "warning", 3: "info", 4: "hint"}

# an emoji (two UTF-16 code units) before every problem: a UTF-32 column would be off by one
DRAFT: dict[str, Any] = {
    "id": "parity", "name": "Parity 🚀 draft", "enabled": True,
    "rules": [
        {"id": "r1", "name": "🚀 unknown operator", "priority": 1,
         "when": [{"field": "addVar.phase", "operator": "equalz", "value": "🚀planning"}],
         "then": {"add_memories": ["architecture-docs"]}},
        {"id": "r2", "name": "🚀 wrong value type", "priority": 2,
         "when": [{"field": "addVar.token_budget", "operator": "gt", "value": "lots 🚀"}],
         "then": {"add_memories": ["architecture-docs"]}},
        {"id": "r3", "name": "🚀 unsafe regex", "priority": 3,
         "when": [{"field": "input.text", "operator": "regex", "value": "(a)\\1🚀"}],
         "then": {"add_memories": ["architecture-docs"]}},
        {"id": "r1", "name": "🚀 duplicate id", "priority": 4,
         "when": [{"field": "input.text", "operator": "contains", "value": "🚀"}],
         "then": {"add_memories": ["architecture-doc"]}},
    ],
}
# one rule per line: the emoji in each rule's name comes before its problems on the same line
TEXT = "{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n" for k, v in DRAFT.items()
                       if k != "rules") \
    + '  "rules": [\n' + ",\n".join("    " + json.dumps(r, ensure_ascii=False) for r in DRAFT["rules"]) \
    + "\n  ]\n}\n"
# the same draft with the comma after the first rule's priority missing
BROKEN = TEXT.replace('"priority": 1, ', '"priority": 1 ', 1)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return workspace_copy(tmp_path_factory.mktemp("validate-parity") / "ws")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    await start(lsp_client, root, capabilities(pull=False))  # push client, UTF-16 positions
    yield
    await lsp_client.shutdown_session()


def as_entries(diagnostics: list[types.Diagnostic]) -> list[dict[str, Any]]:
    """What the editor shows, in the validate result's terms (errors and warnings in one list)."""
    out = []
    for d in diagnostics:
        assert d.severity is not None and isinstance(d.data, dict)
        out.append({"path": d.data["pointer"], "code": d.code, "message": d.message,
                    "severity": SEVERITY_NAMES[int(d.severity)],
                    "range": {"start": {"line": d.range.start.line, "character": d.range.start.character},
                              "end": {"line": d.range.end.line, "character": d.range.end.character}}})
    return out


def from_validate(result: dict[str, Any], with_range: bool = True) -> list[dict[str, Any]]:
    out = []
    for severity, entries in (("error", result["errors"]), (None, result["warnings"])):
        for e in entries:
            assert set(e) <= {"path", "message", "code", "range", "severity", "data"}
            entry = {"path": e["path"], "code": e["code"], "message": e["message"],
                     "severity": severity or e["severity"]}
            if with_range:
                entry["range"] = e["range"]
            out.append(entry)
    return out


def ordered(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: json.dumps(e, sort_keys=True))


async def pulled(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri)))
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
    return list(report.items)


async def test_a_draft_with_several_problems(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "context-rule-engines" / "parity.json"
    uri = open_doc(client, path, TEXT, version=1)
    published = as_entries(await diagnostics_for(client, uri, version=1))
    codes = {e["code"] for e in published}
    assert {"unknown-operator", "value-type", "unsafe-regex", "duplicate-id", "unknown-memory"} <= codes
    operator = next(e for e in published if e["code"] == "unknown-operator")
    start = position_of(TEXT, '"equalz"')  # UTF-16 columns
    assert start.character == position_of(TEXT, '"equalz"', encoding="utf-32").character + 1
    assert operator["range"]["start"] == {"line": start.line, "character": start.character}
    assert operator["path"] == "/rules/0/when/0/operator"

    assert ordered(as_entries(await pulled(client, uri))) == ordered(published)
    by_uri = await call(client, VALIDATE, {"uri": uri})  # the open document
    by_text = await call(client, VALIDATE, {"uri": uri, "text": TEXT})
    by_text_alone = await call(client, VALIDATE, {"text": TEXT})  # no uri: read as its engine file
    for result in (by_uri, by_text, by_text_alone):
        assert result["valid"] is False
        assert ordered(from_validate(result)) == ordered(published)
    assert by_uri == by_text == by_text_alone
    # a uri outside the workspace only places the draft: it is still checked against this workspace
    elsewhere = (root.parent / "elsewhere" / ".codebolt" / "context-rule-engines" / "parity.json").as_uri()
    outside = await call(client, VALIDATE, {"uri": elsewhere, "text": TEXT})
    assert {"unknown-operator", "value-type", "unsafe-regex", "unknown-memory"} <= {
        e["code"] for e in outside["errors"] + outside["warnings"]}

    # the draft as JSON: the same problems, without ranges (there is no text to point into)
    by_value = await call(client, VALIDATE, DRAFT)
    assert ordered(from_validate(by_value, with_range=False)) == ordered(
        [{k: v for k, v in e.items() if k != "range"} for e in published])
    assert all("range" not in e for e in by_value["errors"])


async def test_a_missing_comma(client: LanguageClient, root: Path) -> None:
    uri = (root / ".codebolt" / "context-rule-engines" / "parity.json").as_uri()
    change_doc(client, uri, BROKEN, 2)
    published = as_entries(await diagnostics_for(client, uri, version=2))
    assert [e["code"] for e in published] == ["syntax"]
    assert ordered(as_entries(await pulled(client, uri))) == ordered(published)
    for params in ({"uri": uri}, {"text": BROKEN}):
        result = await call(client, VALIDATE, params)
        assert result["valid"] is False
        assert ordered(from_validate(result)) == ordered(published)


async def test_a_clean_draft_and_a_file_on_disk(client: LanguageClient, root: Path) -> None:
    clean = json.dumps({"id": "clean", "name": "Clean 🚀", "rules": [
        {"id": "r", "when": [{"field": "input.text", "operator": "contains", "value": "🚀"}],
         "then": {"add_memories": ["architecture-docs"]}}]}, indent=2, ensure_ascii=False)
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "clean.json", clean)
    published = as_entries(await diagnostics_for(client, uri, version=1))
    result = await call(client, VALIDATE, {"uri": uri})
    assert result["valid"] is True and ordered(from_validate(result)) == ordered(published)
    review = root / ".codebolt" / "context-rule-engines" / "review.json"  # not open: as on disk
    on_disk = await call(client, VALIDATE, {"uri": review.as_uri()})
    assert on_disk == await call(client, VALIDATE, {"uri": review.as_uri(), "text": review.read_text()})


async def test_a_draft_sees_other_unsaved_documents(client: LanguageClient, root: Path) -> None:
    """A memory defined only in an open, unsaved file is known to the draft, as to the editor."""
    memory = root / ".codebolt" / "PersistentMemory" / "unsaved-notes.json"
    open_doc(client, memory, json.dumps({"id": "unsaved-notes", "label": "Unsaved", "retrieval": {"pipeline": []},
                                         "contribution": {"section": "knowledge"}}))
    draft = {"id": "uses-unsaved", "rules": [{"id": "r", "when": [], "then": {"add_memories": ["unsaved-notes"]}}]}
    text = json.dumps(draft, indent=2)
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "uses-unsaved.json", text)
    published = as_entries(await diagnostics_for(client, uri, version=1))
    assert "unknown-memory" not in {e["code"] for e in published}
    for params in ({"uri": uri}, {"text": text}, draft):
        result = await call(client, VALIDATE, params)
        assert "unknown-memory" not in {e["code"] for e in (*result["errors"], *result["warnings"])}, params
    assert not memory.exists()
