"""Editor work proportional to the change: with many rule files open, opening one or typing in one
re-checks that one only; changing what others read (a memory id) re-checks just the documents that
name it, once per debounce window, and for a push client only the `limits.eager_documents` most
recently touched ones."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .editor_support import (
    RecordingProtocol,
    capabilities,
    change_doc,
    diagnostics_for,
    make_editor_client,
    open_doc,
    workspace_copy,
)
from .support import SERVER

pytestmark = pytest.mark.asyncio(loop_scope="module")
CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_editor_client)
FILES = 30
EAGER = 8
MEMORY = "architecture-docs"


def rule_file(index: int, memory: str) -> str:
    """About 22 KB: 60 rules adding `memory`."""
    rules = [{"id": f"r{i}", "priority": i % 5, "when": [
        {"field": "addVar.phase", "operator": "eq", "value": f"phase-{index}-{i}"},
        {"any": [{"field": "input.text", "operator": "contains", "value": f"word {i}"},
                 {"field": "scope.task.task_type", "operator": "in", "value": ["bugfix", "refactor"]}]}],
        "then": {"add_memories": [memory]}} for i in range(60)]
    return json.dumps({"id": f"load-{index}", "name": f"Load {index}", "enabled": True, "rules": rules}, indent=2)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = workspace_copy(tmp_path_factory.mktemp("editor-load") / "ws")
    engines = root / ".codebolt" / "context-rule-engines"
    for index in range(FILES):  # the last five name another memory
        memory = MEMORY if index < FILES - 5 else "user-preferences"
        (engines / f"load-{index}.json").write_text(rule_file(index, memory))
    return root


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    settings: dict[str, Any] = {"diagnostics_debounce_ms": 1000, "limits": {"eager_documents": EAGER}}
    lsp_client.set_configuration(settings, section="contextAssembly")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities(pull=False), root_uri=root.as_uri(), initialization_options={"settings": settings},
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")]))
    yield
    await lsp_client.shutdown_session()


def published(client: LanguageClient) -> Counter[str]:
    protocol: RecordingProtocol = client.protocol  # type: ignore[assignment]
    return Counter(params.uri for params in protocol.published)


async def next_publish(client: LanguageClient, uri: str, seen: int) -> list[types.Diagnostic]:
    """The diagnostics of the first publish for `uri` after the `seen` ones so far."""
    protocol: RecordingProtocol = client.protocol  # type: ignore[assignment]
    while True:
        mine = [params for params in protocol.published if params.uri == uri]
        if len(mine) > seen:
            return list(mine[seen].diagnostics)
        protocol.published_event.clear()
        await asyncio.wait_for(protocol.published_event.wait(), 30)


def engine_uri(root: Path, index: int) -> str:
    return (root / ".codebolt" / "context-rule-engines" / f"load-{index}.json").as_uri()


async def test_opening_and_typing_recheck_only_that_document(client: LanguageClient, root: Path) -> None:
    assert len(rule_file(0, MEMORY)) > 20_000
    uris = [open_doc(client, root / ".codebolt" / "context-rule-engines" / f"load-{i}.json") for i in range(FILES)]
    for uri in uris:
        await diagnostics_for(client, uri, version=1)
    text = rule_file(3, MEMORY)
    typed = text.replace('"word 7"', '"word 7x"')  # a keystroke inside a value: nothing others read
    change_doc(client, uris[3], typed, 2)
    await diagnostics_for(client, uris[3], version=2)
    change_doc(client, uris[4], rule_file(4, MEMORY).replace('"eq"', '"eqq"', 1), 2)
    assert any(d.code == "unknown-operator" for d in await diagnostics_for(client, uris[4], version=2))
    counts = published(client)
    assert counts[uris[3]] == 2 and counts[uris[4]] == 2
    assert all(counts[uri] == 1 for index, uri in enumerate(uris) if index not in (3, 4)), counts


async def test_a_changed_memory_id_rechecks_the_recent_documents_that_name_it_once(
        client: LanguageClient, root: Path) -> None:
    memory_path = root / ".codebolt" / "PersistentMemory" / f"{MEMORY}.json"
    memory_uri = open_doc(client, memory_path)
    await diagnostics_for(client, memory_uri, version=1)
    naming = [engine_uri(root, i) for i in range(FILES - 5)]
    recent = naming[-(EAGER - 1):]  # with the memory document itself, the EAGER most recently touched
    for index, uri in enumerate(recent):
        change_doc(client, uri, rule_file(FILES - 5 - len(recent) + index, MEMORY) + " ", 3)
        await diagnostics_for(client, uri, version=3)
    before = published(client)
    original = memory_path.read_text()
    renamed = original.replace(f'"id": "{MEMORY}"', '"id": "renamed-memory"')
    assert renamed != original
    change_doc(client, memory_uri, renamed.replace("renamed-memory", "renamed-memor"), 2)  # two edits in one window
    change_doc(client, memory_uri, renamed, 3)
    await diagnostics_for(client, memory_uri, version=3)
    for uri in recent:  # the recent documents that name the memory see it gone
        found = await next_publish(client, uri, before[uri])
        assert any(d.code == "unknown-memory" for d in found), uri
    # a barrier: one more edit after the window has flushed
    change_doc(client, engine_uri(root, FILES - 1), rule_file(FILES - 1, "user-preferences") + "  ", 2)
    await diagnostics_for(client, engine_uri(root, FILES - 1), version=2)
    after = published(client)
    grew = {uri for uri in after if after[uri] > before[uri]}
    assert grew == {memory_uri, *recent, engine_uri(root, FILES - 1)}  # older ones wait until touched
    assert all(after[uri] - before[uri] == 1 for uri in recent)  # once for both edits
