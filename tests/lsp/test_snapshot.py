"""Editor requests read pygls' workspace on the event loop only: the document is snapshotted there
before any work goes to a worker thread (pygls changes its workspace as edits arrive)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from pygls.workspace import Workspace

from context_assembly.lsp.server import ContextAssemblyServer, build_server

from .test_protocol import Capture, answer, request

MEMORY = '{"id": "notes", "label": "Notes", "retrieval": {"pipeline": [{"type": "markdown_read", "note": "a"}]}}\n'


class WatchedWorkspace(Workspace):
    """pygls' workspace, noting the thread of every read of its open documents."""

    threads: set[str]

    @property
    def text_documents(self) -> Any:
        self.threads.add(threading.current_thread().name)
        return super().text_documents

    def get_text_document(self, doc_uri: str) -> Any:
        self.threads.add(threading.current_thread().name)
        return super().get_text_document(doc_uri)


@pytest.fixture
async def opened(tmp_path: Path) -> AsyncIterator[tuple[ContextAssemblyServer, Capture, str, WatchedWorkspace]]:
    folder = tmp_path / ".codebolt" / "PersistentMemory"
    folder.mkdir(parents=True)
    path = folder / "notes.json"
    path.write_text(MEMORY)
    server = build_server()
    server.attach(asyncio.get_running_loop())
    out = Capture()
    server.protocol.set_writer(out, include_headers=False)
    await answer(server, out, request(1, "initialize", {"capabilities": {}, "rootUri": tmp_path.as_uri()}), 1)
    workspace = server.protocol.workspace
    workspace.__class__ = WatchedWorkspace
    assert isinstance(workspace, WatchedWorkspace)
    workspace.threads = set()
    uri = path.as_uri()
    server.protocol.receive(_body({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "json", "version": 1, "text": MEMORY}}}))
    yield server, out, uri, workspace
    server.close()


def _body(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


async def _reply(out: Capture, msg_id: int) -> dict[str, Any]:
    for _ in range(500):
        found = [m for m in out.messages if m.get("id") == msg_id]
        if found:
            return found[-1]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no answer to {msg_id}")


async def test_no_worker_reads_pyglss_workspace(
        opened: tuple[ContextAssemblyServer, Capture, str, WatchedWorkspace]) -> None:
    server, out, uri, workspace = opened
    document = {"textDocument": {"uri": uri}}
    at = {**document, "position": {"line": 0, "character": 9}}
    requests = [
        ("textDocument/hover", at), ("textDocument/completion", at), ("textDocument/definition", at),
        ("textDocument/references", {**at, "context": {"includeDeclaration": True}}),
        ("textDocument/documentSymbol", document), ("textDocument/foldingRange", document),
        ("textDocument/codeAction", {**document, "range": {"start": {"line": 0, "character": 0},
                                                           "end": {"line": 0, "character": 1}},
                                     "context": {"diagnostics": []}}),
        ("textDocument/diagnostic", document),
    ]
    for msg_id, (method, params) in enumerate(requests, start=10):
        reply = await answer(server, out, request(msg_id, method, params), msg_id)
        assert "error" not in reply, (method, reply)
    hover = next(m for m in out.messages if m.get("id") == 10)
    assert "notes" in str(hover["result"])  # the snapshot was read: the answer is about this document
    assert workspace.threads == {threading.current_thread().name}


async def test_a_change_after_the_snapshot_does_not_reach_the_worker(
        opened: tuple[ContextAssemblyServer, Capture, str, WatchedWorkspace]) -> None:
    """The worker answers for the version the request was made against, even when an edit
    lands in pygls' workspace while it runs."""
    server, out, uri, workspace = opened
    release = threading.Event()
    busy = [threading.Event() for _ in range(server.workers._max_workers)]  # every worker held
    blockers = [server.workers.submit(lambda e=e: (e.set(), release.wait(10))) for e in busy]
    for event in busy:
        event.wait(10)
    server.protocol.receive(_body(request(20, "textDocument/documentSymbol", {"textDocument": {"uri": uri}})))
    for _ in range(10):  # the handler starts: it snapshots and queues its work behind the blockers
        await asyncio.sleep(0)
    renamed = MEMORY.replace('"notes"', '"renamed"')
    server.protocol.receive(_body({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": renamed}]}}))
    assert "renamed" in workspace.get_text_document(uri).source
    release.set()
    for blocker in blockers:
        blocker.result(10)
    reply = await _reply(out, 20)
    assert [s["name"] for s in reply["result"]] == ["notes"]
