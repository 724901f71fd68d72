"""Replay, diff and rule tests assemble as `assemble` does for the same client: its settings apply
over TCP too, where several sessions share one runtime (a replay made a moment after its assembly
once drifted: the client's max_tokens was dropped)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client.connection import Connection
from context_assembly.errors import ContextAssemblyError

from .support import REQUEST, start


async def test_replay_and_diff_over_tcp_use_the_clients_settings(workspace: Path) -> None:
    settings_file = workspace / ".codebolt" / "context-assembly.json"  # on a shared server: the file's alone
    settings_file.write_text(settings_file.read_text().replace('"snapshots": false', '"snapshots": true'))
    server = await start(workspace, "tcp")
    connection = Connection()
    try:
        await connection.connect_tcp("127.0.0.1", server.port)
        settings = {"max_tokens": 200}
        await connection.request("initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
                                                "initializationOptions": {"settings": settings}})
        connection.notify("initialized", {})
        request: dict[str, Any] = {k: v for k, v in REQUEST.items() if k != "constraints"}
        assembled = await connection.request("contextAssembly/assemble", request)
        assert assembled["meta"]["max_tokens"] == 200
        replayed = await connection.request("contextAssembly/replay", {"snapshot": assembled["meta"]["assembly_id"]})
        assert replayed["drifted"] is False and replayed["after"]["meta"]["max_tokens"] == 200
        diff = await connection.request("contextAssembly/diff", {"a": assembled["meta"]["assembly_id"], "b": request})
        assert diff["identical"] is True
        await connection.close()
    finally:
        assert await server.stop() == 0


async def test_a_client_of_a_shared_server_lowers_its_limits_only_and_keeps_snapshots_off(workspace: Path) -> None:
    """A token could raise its own limits to the maximum (a 300 MB request) and switch snapshots on
    to write files into the workspace."""
    settings_file = workspace / ".codebolt" / "context-assembly.json"
    settings = json.loads(settings_file.read_text())
    settings.update(snapshots=False, limits={"request_bytes": 100_000})
    settings_file.write_text(json.dumps(settings))
    server = await start(workspace, "tcp")
    connection = Connection()
    try:
        await connection.connect_tcp("127.0.0.1", server.port)
        asked = {"limits": {"request_bytes": 10_000_000, "log_limit": 5}, "snapshots": True}
        await connection.request("initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
                                                "initializationOptions": {"settings": asked}})
        connection.notify("initialized", {})
        assembled = await connection.request("contextAssembly/assemble", REQUEST)  # (the workspace read)
        assert assembled["meta"].get("snapshot") is None
        with pytest.raises(ContextAssemblyError):  # over the file's 100 KB, whatever the client asked
            await connection.request("memory/write", {"uri": "kv://big/k", "value": "x" * 200_000})
        assert (await connection.request("memory/read", {"uri": "kv://big/k"}))["exists"] is False
        with pytest.raises(ContextAssemblyError):  # lowering works: log_limit 5
            await connection.request("memory/read", {"uri": "log://ingestion?limit=6"})
        kept = workspace / ".codebolt" / "memory" / "context" / f"{assembled['meta']['assembly_id']}.json"
        assert not kept.exists()
        await connection.close()
    finally:
        assert await server.stop() == 0
