"""`serve --tcp` and `serve --ws`: the same methods over TCP (LSP framing) and WebSocket (one message
per text frame), bound to loopback, port 0 = a free port announced on stderr. The process serves
until SIGTERM (exit status 0); a client's `exit` ends its own connection."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client.connection import Connection

from .support import SERVER


async def start(transport: str, workspace: Path) -> tuple[asyncio.subprocess.Process, str, int]:
    process = await asyncio.create_subprocess_exec(*SERVER, f"--{transport}", "127.0.0.1:0", "--workspace",
                                                   str(workspace), stdin=subprocess.DEVNULL,
                                                   stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert line, "the server exited before listening"
        match = re.search(r"listening on (tcp|ws)://127\.0\.0\.1:(\d+)", line)
        if match:
            return process, "127.0.0.1", int(match.group(2))


INITIALIZE = {"processId": None, "rootUri": None, "capabilities": {}}


async def test_tcp(workspace: Path) -> None:
    process, host, port = await start("tcp", workspace)
    connection = Connection()
    await connection.connect_tcp(host, port)
    result = await connection.request("initialize", INITIALIZE)
    assert result["serverInfo"]["name"] == "context-assembly"
    connection.notify("initialized", {})
    await connection.request("memory/write", {"uri": "kv://tcp/k", "value": {"scope.a.b": 1}})
    assert (await connection.request("memory/read", {"uri": "kv://tcp/k"}))["value"] == {"scope.a.b": 1}
    await connection.close()
    process.terminate()
    assert await asyncio.wait_for(process.wait(), 10) == 0


async def test_websocket(workspace: Path) -> None:
    from websockets.asyncio.client import connect

    process, host, port = await start("ws", workspace)

    async with connect(f"ws://{host}:{port}") as websocket:
        async def ask(msg_id: int, method: str, params: Any = None) -> Any:
            await websocket.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
            while True:
                message = json.loads(await asyncio.wait_for(websocket.recv(), 30))
                if message.get("id") == msg_id:
                    return message

        assert (await ask(1, "initialize", INITIALIZE))["result"]["serverInfo"]["name"] == "context-assembly"
        await websocket.send(json.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        reply = await ask(2, "contextRuleEngine/get", {"id": "planning"})
        assert reply["result"]["id"] == "planning"
        assert (await ask(3, "contextRuleEngine/get", {"id": "ghost"}))["error"]["code"] == -32001
        await websocket.send(b"{not json")  # a bad frame is answered, the connection stays
        assert json.loads(await websocket.recv())["error"]["code"] == -32700
        assert (await ask(4, "shutdown"))["result"] is None
        await websocket.send(json.dumps({"jsonrpc": "2.0", "method": "exit"}))
        await asyncio.wait_for(websocket.wait_closed(), 10)  # exit ends this connection
    process.terminate()
    assert await asyncio.wait_for(process.wait(), 10) == 0


def test_address_parsing() -> None:
    from context_assembly.cli.serve import address

    assert address("8080") == ("127.0.0.1", 8080)
    assert address(":0") == ("127.0.0.1", 0)
    assert address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert address("[::1]:9000") == ("::1", 9000)
    with pytest.raises(argparse.ArgumentTypeError):
        address("host:port")
