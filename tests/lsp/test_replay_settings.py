"""Replay, diff and rule tests assemble as `assemble` does for the same client: its settings apply
over TCP too, where several sessions share one runtime (a replay made a moment after its assembly
once drifted: the client's max_tokens was dropped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from context_assembly.client.connection import Connection

from .support import REQUEST, start


async def test_replay_and_diff_over_tcp_use_the_clients_settings(workspace: Path) -> None:
    server = await start(workspace, "tcp")
    connection = Connection()
    try:
        await connection.connect_tcp("127.0.0.1", server.port)
        settings = {"max_tokens": 200, "snapshots": True}
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
