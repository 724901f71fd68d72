"""Semantic tokens and inlay hints end to end: operators, variable keys, memory ids and section
names are tokens; a memory id shows its section and priority, a field where the request carries it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from ..editor_support import capabilities, change_doc, make_editor_client, open_doc, start
from ..editor_support import workspace_copy as copy
from ..support import SERVER

pytestmark = pytest.mark.asyncio(loop_scope="module")
REFRESH_METHODS = (types.WORKSPACE_INLAY_HINT_REFRESH, types.WORKSPACE_SEMANTIC_TOKENS_REFRESH)
REFRESHES: dict[str, asyncio.Event] = {}  # the refresh requests the server sent


def make_client() -> LanguageClient:
    client = make_editor_client()
    for method in REFRESH_METHODS:
        client.feature(method)(_recorder(method))
    return client


def _recorder(method: str) -> Callable[[Any], None]:
    def record(_params: Any) -> None:
        REFRESHES.setdefault(method, asyncio.Event()).set()

    return record


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_client)
LEGEND: list[types.SemanticTokensLegend] = []  # what the server announced
ENGINE = {
    "id": "hints",
    "rules": [{
        "id": "r",
        "when": [{"field": "addVar.phase", "operator": "eq", "value": "planning"},
                 {"field": "scope.agent.agent_name", "operator": "equals", "value": "eq"}],
        "then": {"add_memories": ["architecture-docs", "no-such-memory"], "set_priority": {"history": "low"}},
    }],
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy(tmp_path_factory.mktemp("editor-annotations") / "ws")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    caps = capabilities()
    assert caps.workspace is not None
    caps.workspace.inlay_hint = types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
    result = await start(lsp_client, root, caps)
    provider = result.capabilities.semantic_tokens_provider
    assert isinstance(provider, types.SemanticTokensOptions) and provider.full and provider.range
    assert result.capabilities.inlay_hint_provider
    LEGEND.append(provider.legend)
    yield
    await lsp_client.shutdown_session()


def decode(data: list[int], text: str, legend: types.SemanticTokensLegend) -> list[tuple[str, str, list[str]]]:
    """(token text, type, modifiers) from the relative encoding (ASCII text: UTF-16 = characters)."""
    lines = text.split("\n")
    out, line, start = [], 0, 0
    for i in range(0, len(data), 5):
        delta_line, delta_start, length, kind, modifiers = data[i:i + 5]
        line += delta_line
        start = start + delta_start if delta_line == 0 else delta_start
        names = [m for bit, m in enumerate(legend.token_modifiers) if modifiers & (1 << bit)]
        out.append((lines[line][start:start + length], legend.token_types[kind], names))
    return out


async def test_semantic_tokens_name_operators_variables_memories_and_sections(
        client: LanguageClient, root: Path) -> None:
    legend = LEGEND[-1]
    text = json.dumps(ENGINE, indent=2)
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "hints.json", text)
    result = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(
        text_document=types.TextDocumentIdentifier(uri)))
    assert result is not None
    assert decode(result.data, text, legend) == [
        ("addVar.phase", "variable", []), ("eq", "operator", []),
        ("scope.agent.agent_name", "variable", []), ("equals", "operator", []),  # the value "eq" is no operator
        ("architecture-docs", "type", []),  # an unknown memory id is left to its diagnostic
        ("history", "enumMember", []),
    ]


async def test_semantic_tokens_for_a_range_and_for_yaml(client: LanguageClient, root: Path) -> None:
    legend = LEGEND[-1]
    text = "name: yaml-rule\ncondition:\n  field: task.text\n  op: contains\n  value: x\n" \
           "action:\n  include: architecture-docs\n"
    uri = open_doc(client, root / ".codebolt" / "ContextRuleEngine" / "05_tokens.yaml", text)
    result = await client.text_document_semantic_tokens_range_async(types.SemanticTokensRangeParams(
        text_document=types.TextDocumentIdentifier(uri), range=types.Range(types.Position(3, 0), types.Position(7, 0))))
    assert result is not None
    assert decode(result.data, text, legend)[0] == ("contains", "operator", [])
    assert [t for t, _kind, _mods in decode(result.data, text, legend)] == ["contains", "architecture-docs"]


async def test_a_memory_definition_declares_its_own_id(client: LanguageClient, root: Path) -> None:
    legend = LEGEND[-1]
    path = root / ".codebolt" / "PersistentMemory" / "architecture-docs.json"
    text = path.read_text()
    result = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(
        text_document=types.TextDocumentIdentifier(open_doc(client, path, text))))
    assert result is not None
    decoded = decode(result.data, text, legend)
    assert decoded[0] == ("architecture-docs", "type", ["declaration"])
    assert ("knowledge", "enumMember", []) in decoded


async def hints_for(client: LanguageClient, uri: str, last_line: int = 200) -> list[types.InlayHint]:
    result = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri), range=types.Range(types.Position(0, 0),
                                                                           types.Position(last_line, 0))))
    assert result is not None
    return list(result)


async def test_inlay_hints_show_placement_and_origin(client: LanguageClient, root: Path) -> None:
    text = json.dumps(ENGINE, indent=2)
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "hints2.json", text)
    hints = await hints_for(client, uri)
    lines = text.split("\n")
    shown = [(lines[h.position.line][:h.position.character].strip(), h.label) for h in hints]
    assert shown == [
        ('"field": "addVar.phase"', "← additional_variables.phase"),
        ('"field": "scope.agent.agent_name"', "← scope_variables.agent.agent_name"),
        ('"architecture-docs"', "knowledge · high"),
    ]
    assert all(h.padding_left for h in hints)
    # only the requested lines
    assert [h.label for h in await hints_for(client, uri, last_line=8)] == ["← additional_variables.phase"]


async def test_inlay_hints_follow_unsaved_edits_to_the_memory(client: LanguageClient, root: Path) -> None:
    memory_path = root / ".codebolt" / "PersistentMemory" / "architecture-docs.json"
    memory_text = memory_path.read_text()
    memory_uri = open_doc(client, memory_path, memory_text)
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "hints3.json", json.dumps(ENGINE, indent=2))
    await hints_for(client, uri)  # a client that has asked for hints and tokens is told when they go stale
    await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(
        text_document=types.TextDocumentIdentifier(uri)))
    for method in REFRESH_METHODS:
        REFRESHES[method] = asyncio.Event()
    change_doc(client, memory_uri, memory_text.replace('"priority": "high"', '"priority": "critical"'), 2)
    assert "knowledge · critical" in [h.label for h in await hints_for(client, uri)]
    # the client is asked to fetch the hints and tokens of its open documents again
    for method in REFRESH_METHODS:
        await asyncio.wait_for(REFRESHES[method].wait(), timeout=60)


async def test_seed_004_names_show_the_canonical_variable(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "ContextRuleEngine" / "01_base-rules.json"
    hints = await hints_for(client, open_doc(client, path))
    assert hints[0].label == "← input.text"
    assert "seed-004 name of input.text" in str(hints[0].tooltip)


async def test_documents_that_do_not_parse_or_are_not_definitions_get_nothing(client: LanguageClient,
                                                                            root: Path) -> None:
    broken = open_doc(client, root / ".codebolt" / "context-rule-engines" / "broken.json", '{"id": "b", "rules": [')
    assert await hints_for(client, broken) == []
    result = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(
        text_document=types.TextDocumentIdentifier(broken)))
    assert result is not None and list(result.data) == []
    other = open_doc(client, root / "package.json", '{"field": "addVar.phase"}')
    assert await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(other),
        range=types.Range(types.Position(0, 0), types.Position(1, 0)))) is None
