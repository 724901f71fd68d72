"""What is on disk, as the editor sees it: a client that watches `.codebolt/` for the server gets
re-reads on its events and when a definition folder changes (a file created, deleted or replaced,
as the server's own writes do); a client that cannot watch gets the disk re-read on every request.
Either way a memory written on disk ends an `unknown-memory` diagnostic."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import register_lsp_features

from ..editor_support import (
    RecordingProtocol,
    capabilities,
    change_doc,
    diagnostics_for,
    open_doc,
    start,
    workspace_copy,
)
from ..support import SERVER

pytestmark = pytest.mark.asyncio
MEMORY = {"id": "written-later", "label": "Later", "retrieval": {"pipeline": []},
          "contribution": {"section": "knowledge"}}


def engine_text(marker: str) -> str:
    return json.dumps({"id": "disk", "name": marker,
                       "rules": [{"id": "r", "when": [], "then": {"add_memories": ["written-later"]}}]})


def codes(found: list[types.Diagnostic]) -> set[str]:
    return {str(d.code) for d in found}


def watching_client() -> LanguageClient:
    """The editor client, which also remembers that the server registered its file watcher."""
    client = LanguageClient(protocol_cls=RecordingProtocol, converter_factory=default_converter)
    register_lsp_features(client)
    client.registered = asyncio.Event()  # type: ignore[attr-defined]

    @client.feature("client/registerCapability")
    def register_capability(ls: LanguageClient, params: Any) -> None:
        client.registered.set()  # type: ignore[attr-defined]

    return client


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=watching_client)


async def _client(tmp_path: Path, watch: bool) -> tuple[LanguageClient, Path]:
    root = workspace_copy(tmp_path / "ws")
    client: LanguageClient = await CONFIG.start()  # type: ignore[assignment]
    caps = capabilities()
    assert caps.workspace is not None
    if not watch:
        caps.workspace.did_change_watched_files = None
    await start(client, root, caps)
    if watch:  # the server trusts the watcher once the client accepted it
        await asyncio.wait_for(client.registered.wait(), 20)  # type: ignore[attr-defined]
        await client.protocol.send_request_async("contextRuleEngine/possibleVariables", {})
    return client, root


async def _stop(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()


async def test_a_watching_client_rereads_the_disk_on_its_events(tmp_path: Path) -> None:
    client, root = await _client(tmp_path, watch=True)
    try:
        uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "disk.json", engine_text("a"))
        assert "unknown-memory" in codes(await diagnostics_for(client, uri, version=1))
        memory = root / ".codebolt" / "PersistentMemory" / "written-later.json"
        memory.write_text(json.dumps(MEMORY))
        client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
            types.FileEvent(uri=memory.as_uri(), type=types.FileChangeType.Created)]))
        change_doc(client, uri, engine_text("b"), version=2)
        # the event is handled before the edit (one connection, in order), so version 2 sees the memory
        for version in (2, 3):
            found = await diagnostics_for(client, uri, version=version)
            if "unknown-memory" not in codes(found):
                break
            change_doc(client, uri, engine_text("c"), version=3)
        else:
            raise AssertionError("the memory written on disk was not seen after the watched-files event")
    finally:
        await _stop(client)


async def test_a_client_that_cannot_watch_gets_the_disk_reread_per_request(tmp_path: Path) -> None:
    client, root = await _client(tmp_path, watch=False)
    try:
        uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "disk.json", engine_text("a"))
        assert "unknown-memory" in codes(await diagnostics_for(client, uri, version=1))
        (root / ".codebolt" / "PersistentMemory" / "written-later.json").write_text(json.dumps(MEMORY))
        change_doc(client, uri, engine_text("b"), version=2)
        assert "unknown-memory" not in codes(await diagnostics_for(client, uri, version=2))
    finally:
        await _stop(client)


async def test_a_memory_the_server_writes_is_seen_before_any_watcher_event(tmp_path: Path) -> None:
    client, root = await _client(tmp_path, watch=True)
    try:
        uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "disk.json", engine_text("a"))
        assert "unknown-memory" in codes(await diagnostics_for(client, uri, version=1))
        await client.protocol.send_request_async("persistentMemory/create", MEMORY)  # an atomic write
        assert (root / ".codebolt" / "PersistentMemory" / "written-later.json").is_file()
        change_doc(client, uri, engine_text("b"), version=2)  # no didChangeWatchedFiles sent
        assert "unknown-memory" not in codes(await diagnostics_for(client, uri, version=2))
        # completion answers from what is built when nothing changed, and sees a new file when one did
        text = engine_text("b")
        at = types.Position(0, text.index('"written-later"') + 1)
        params = types.CompletionParams(text_document=types.TextDocumentIdentifier(uri), position=at)
        for _ in range(2):
            result = await client.text_document_completion_async(params)
            assert isinstance(result, types.CompletionList)
            assert "written-later" in {item.label for item in result.items}
        await client.protocol.send_request_async("persistentMemory/create", {**MEMORY, "id": "another-one"})
        result = await client.text_document_completion_async(params)
        assert isinstance(result, types.CompletionList) and "another-one" in {item.label for item in result.items}
    finally:
        await _stop(client)
