"""Editor diagnostics end to end: push with version (debounce 0), pull, UTF-16 and UTF-8 columns,
incomplete documents, related information, codes and quick-fix data, refresh of other documents."""

from __future__ import annotations

import asyncio
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
CAPABILITIES = capabilities(pull=False)


def engines(root: Path) -> Path:
    return root / ".codebolt" / "context-rule-engines"


ENGINE = {"id": "drafts", "rules": [{"id": "r1", "priority": 1,
                                     "when": [{"field": "scope.agent.agent_type", "operator": "eqq", "value": "x"}],
                                     "then": {"add_memories": ["architecture-doc"]}}]}


async def test_unknown_operator_and_memory_with_codes_data_and_version(client: LanguageClient, root: Path) -> None:
    path = engines(root) / "drafts.json"
    text = json.dumps(ENGINE, indent=2)
    uri = open_doc(client, path, text, version=3)
    found = await diagnostics_for(client, uri, version=3)
    by_code = {d.code: d for d in found}
    operator = by_code["unknown-operator"]
    assert operator.range.start == position_of(text, '"eqq"')
    assert operator.range.end == position_of(text, '"eqq"', 5)
    assert operator.data["candidates"][0] == "eq"
    assert operator.code_description is not None and "unknown-operator" in operator.code_description.href
    assert operator.severity == types.DiagnosticSeverity.Error
    memory = by_code["unknown-memory"]
    assert memory.data["candidates"] == ["architecture-docs"]
    assert memory.range.start == position_of(text, '"architecture-doc"')


async def test_edit_republishes_with_new_version(client: LanguageClient, root: Path) -> None:
    path = engines(root) / "drafts.json"
    uri = path.as_uri()
    fixed = json.dumps({**ENGINE, "rules": [{**ENGINE["rules"][0],
                                            "when": [{"field": "scope.agent.agent_type", "operator": "eq",
                                                      "value": "x"}],
                                            "then": {"add_memories": ["architecture-docs"]}}]}, indent=2)
    change_doc(client, uri, fixed, 4)
    found = await diagnostics_for(client, uri, version=4)
    assert [d.code for d in found if d.severity == types.DiagnosticSeverity.Error] == []


@pytest.mark.parametrize(("text", "message"), [
    ('{"id": "drafts", "rules": [ {"id": "a" "when": []} ]}', "missing ','"),
    ('{"id": "drafts", "rules": [ {"id": "a, "when": []} ]}', ""),
    ('{"id": "drafts", "rules": [ {"id": "a", "when": [', "end of document"),
])
async def test_incomplete_documents_get_syntax_errors_on_one_place(client: LanguageClient, root: Path, text: str,
                                                                   message: str) -> None:
    path = engines(root) / f"broken-{len(text)}.json"
    uri = open_doc(client, path, text, version=1)
    found = await diagnostics_for(client, uri, version=1)
    syntax = [d for d in found if d.code == "syntax"]
    assert syntax and message in syntax[0].message
    for d in syntax:
        assert d.range.start.line == d.range.end.line == 0  # never the whole file


async def test_emoji_before_the_error_counts_utf16_units(client: LanguageClient, root: Path) -> None:
    text = ('{"id": "emoji", "name": "🚀🚀 rules", "rules": [{"id": "r", "when": [{"field": "input.text", '
            '"operator": "eqq", "value": "🚀"}], "then": {}}]}')
    path = engines(root) / "emoji.json"
    uri = open_doc(client, path, text)
    found = await diagnostics_for(client, uri, version=1)
    operator = next(d for d in found if d.code == "unknown-operator")
    assert operator.range.start == position_of(text, '"eqq"')  # each rocket counts 2
    assert operator.range.start.character == text.index('"eqq"') + 2


async def test_line_separator_in_a_string_does_not_break_lines(client: LanguageClient, root: Path) -> None:
    text = ('{"id": "sep", "name": "a\u2028b",\n "rules": [{"id": "r", "when": [{"field": "input.text", '
            '"operator": "eqq", "value": 1}], "then": {}}]}')
    path = engines(root) / "sep.json"
    uri = open_doc(client, path, text)
    found = await diagnostics_for(client, uri, version=1)
    operator = next(d for d in found if d.code == "unknown-operator")
    assert operator.range.start.line == 1
    assert operator.range.start == position_of(text, '"eqq"')


async def test_duplicate_engine_id_points_to_both_places(client: LanguageClient, root: Path) -> None:
    original = engines(root) / "review.json"
    path = engines(root) / "zz-copy.json"
    text = original.read_text()
    uri = open_doc(client, path, text)
    found = await diagnostics_for(client, uri, version=1)
    duplicate = next(d for d in found if d.code == "duplicate-id")
    assert duplicate.related_information
    related = duplicate.related_information[0]
    assert related.location.uri == original.resolve().as_uri()
    assert related.location.range.start == position_of(text, '"review"')
    assert duplicate.range.start == position_of(text, '"review"')


async def test_seed004_and_seed003_files_get_meaning_diagnostics(client: LanguageClient, root: Path) -> None:
    rules = root / ".codebolt" / "ContextRuleEngine"
    text = json.dumps([{"name": "x", "condition": {"field": "task.text", "op": "containz", "value": "a"},
                        "action": {"include": "kv://k"}}])
    uri = open_doc(client, rules / "09_draft.json", text)
    found = await diagnostics_for(client, uri, version=1)
    operator = next(d for d in found if d.code == "unknown-operator")
    assert operator.range.start == position_of(text, '"containz"')
    yaml_text = "name: y\nwhen:\n  task_contains: [auth\nthen: {}\n"
    uri = open_doc(client, rules / "10_draft.yaml", yaml_text)
    found = await diagnostics_for(client, uri, version=1)
    assert any(d.code == "syntax" for d in found)


async def test_other_open_documents_refresh_when_a_memory_appears(client: LanguageClient, root: Path) -> None:
    text = json.dumps({"id": "needs", "rules": [{"id": "r", "when": [], "then": {"add_memories": ["brand-new"]}}]})
    uri = open_doc(client, engines(root) / "needs.json", text)
    found = await diagnostics_for(client, uri, version=1)
    assert any(d.code == "unknown-memory" for d in found)
    protocol = client.protocol
    count = len(protocol.published)  # type: ignore[attr-defined]
    memory = root / ".codebolt" / "PersistentMemory" / "brand-new.json"
    open_doc(client, memory, json.dumps({"id": "brand-new", "label": "New", "retrieval": {"pipeline": []},
                                         "contribution": {"section": "knowledge"}}))
    for _ in range(100):
        later = [p for p in protocol.published[count:] if p.uri == uri]  # type: ignore[attr-defined]
        if later and not any(d.code == "unknown-memory" for d in later[-1].diagnostics):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the rule file was not re-checked")


def typed(client: LanguageClient, uri: str, version: int, at: types.Position, text: str) -> None:
    """An insertion as editors send it: a ranged change, which the server re-parses incrementally."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)]))


async def test_a_digit_typed_after_a_number_in_a_list_is_read(client: LanguageClient, root: Path) -> None:
    text = json.dumps({"id": "typed", "rules": [{"id": "r", "when": [
        {"field": "addVar.n", "operator": "in", "value": [1]},
        {"field": "addVar.n", "operator": "eq", "value": 15}], "then": {}}]})
    uri = open_doc(client, engines(root) / "typed.json", text)
    assert any(d.code == "unsatisfiable" for d in await diagnostics_for(client, uri, version=1))
    typed(client, uri, 2, position_of(text, "[1]", 2), "5")  # [1] -> [15]: now 15 is in it
    assert not any(d.code == "unsatisfiable" for d in await diagnostics_for(client, uri, version=2))
    typed(client, uri, 3, position_of(text, "[1]", 1), "-")  # [15] -> [-15]
    assert any(d.code == "unsatisfiable" for d in await diagnostics_for(client, uri, version=3))


async def test_a_file_known_by_its_schema_alone_loses_its_diagnostics(client: LanguageClient, root: Path) -> None:
    """Outside `.codebolt/` only `$schema` makes a definition: an edit that breaks the file or drops
    `$schema` leaves no definition, and what was published for it is cleared, also on close."""
    good = json.dumps({"$schema": "urn:context-assembly:schema:rule-engine", "id": "x8", "rules": [
        {"id": "r", "when": [{"field": "input.text", "operator": "containz", "value": "a"}], "then": {}}]})
    (root / "rules").mkdir(exist_ok=True)
    uri = open_doc(client, root / "rules" / "x8.json", good)
    assert any(d.code == "unknown-operator" for d in await diagnostics_for(client, uri, version=1))
    change_doc(client, uri, good[:-3], 2)  # being typed: it does not parse
    assert await diagnostics_for(client, uri, version=2, timeout=5) == []
    change_doc(client, uri, good, 3)
    assert any(d.code == "unknown-operator" for d in await diagnostics_for(client, uri, version=3))
    change_doc(client, uri, good.replace('"$schema"', '"schema"'), 4)
    assert await diagnostics_for(client, uri, version=4, timeout=5) == []
    change_doc(client, uri, good, 5)
    assert await diagnostics_for(client, uri, version=5)
    change_doc(client, uri, good[:-3], 6)
    await diagnostics_for(client, uri, version=6, timeout=5)
    protocol = client.protocol
    count = len(protocol.published)  # type: ignore[attr-defined]
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri)))
    for _ in range(50):
        if any(p.uri == uri for p in protocol.published[count:]):  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.1)
    assert [list(p.diagnostics) for p in protocol.published[count:] if p.uri == uri] == [[]]  # type: ignore[attr-defined]
