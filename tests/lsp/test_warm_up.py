"""The warm-up that `initialized` starts: an agent's sidecar gets the vector searches its memories
make prepared (the embedding model, each collection's matrix, a hybrid search's keyword postings),
so its first assembly does not load them; an editor's server does not load them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from context_assembly.lsp.server import ContextAssemblyServer, _warm_up, build_server
from context_assembly.runtime import Runtime
from context_assembly.stores.embedding import HASHING

from ..stores.test_prepare_searches import workspace
from .test_protocol import Capture, answer, request

SIDECAR: dict[str, Any] = {"experimental": {"contextAssembly": {"llm": False}}}
EDITOR: dict[str, Any] = {"textDocument": {"hover": {"contentFormat": ["markdown"]}}}


def stored(root: Path) -> Path:
    """The workspace of test_prepare_searches with its collections written (as an earlier sidecar did)."""
    writer = Runtime(workspace(root))
    try:
        for collection in ("docs", "notes"):
            writer.memory.vectors.settings(collection, HASHING)  # type: ignore[union-attr]
            writer.memory.vectors.upsert_many(collection, [  # type: ignore[union-attr]
                (f"d{i}", f"{collection} text number {i}", {}) for i in range(10)])
    finally:
        writer.close()
    return root


async def initialized(root: Path, capabilities: dict[str, Any]) -> ContextAssemblyServer:
    """A server after `initialize` from a client with these capabilities, its warm-up run to the end."""
    server = build_server()
    server.attach(asyncio.get_running_loop())
    out = Capture()
    server.protocol.set_writer(out, include_headers=False)
    params = {"capabilities": capabilities, "rootUri": root.as_uri()}
    assert "result" in await answer(server, out, request("init", "initialize", params), "init")
    await asyncio.to_thread(_warm_up, server)
    return server


@pytest.mark.parametrize(("capabilities", "prepared"), [(SIDECAR, ["docs", "notes"]), (EDITOR, [])])
async def test_a_sidecar_warms_up_its_searches_and_an_editor_does_not(tmp_path: Path, capabilities: dict[str, Any],
                                                                      prepared: list[str]) -> None:
    server = await initialized(stored(tmp_path), capabilities)
    try:
        session = server.session
        assert session is not None
        assert sorted(session.runtime.memory.vectors.index._indexes) == prepared  # type: ignore[union-attr]
    finally:
        server.close()
