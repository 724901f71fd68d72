"""Many connections, one bounded worker pool: `serve --tcp` / `--ws` run every connection's
requests on the threads of one pool (`--workers`), so N clients never mean N pools; a closed
connection's queued work is dropped and the pool goes on serving the others."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client.connection import Connection
from context_assembly.lsp.workers import SharedWorkers

from .support import SERVER, clone

INITIALIZE: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {}}
WORKERS = 2


@pytest.fixture
def workspace(seeded_template: Path, tmp_path: Path) -> Path:
    return clone(seeded_template, tmp_path / "ws")


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


async def start(workspace: Path, *args: str) -> tuple[asyncio.subprocess.Process, int]:
    env = {k: v for k, v in os.environ.items() if k != "CONTEXT_ASSEMBLY_TOKEN"}
    process = await asyncio.create_subprocess_exec(*SERVER, "--tcp", "127.0.0.1:0", "--workspace", str(workspace),
                                                   *args, stdin=subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                                                   env=env)
    assert process.stderr is not None
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert line, "the server exited before listening"
        if match := re.search(r"listening on tcp://[^:]+:(\d+)", line):
            return process, int(match.group(1))


async def client(port: int) -> Connection:
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", port)
    await connection.request("initialize", INITIALIZE)
    connection.notify("initialized", {})
    return connection


async def busy(connection: Connection, name: str, rounds: int = 3, in_flight: int = 6) -> None:
    """Key-value writes and reads, `in_flight` at a time: store work with no threads of its own."""
    for n in range(rounds):
        await asyncio.gather(*(connection.request("memory/write", {"uri": f"kv://pool/{name}-{i}", "value": n})
                               for i in range(in_flight)))
        values = await asyncio.gather(*(connection.request("memory/read", {"uri": f"kv://pool/{name}-{i}"})
                                        for i in range(in_flight)))
        assert [v["value"] for v in values] == [n] * in_flight


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
async def test_sixteen_connections_use_the_threads_of_one_pool(workspace: Path) -> None:
    process, port = await start(workspace, "--workers", str(WORKERS), "--max-connections", "16")
    try:
        first = await client(port)
        await busy(first, "warm")  # the pool and the stores are up
        before = threads(process.pid)
        clients = [first, *await asyncio.gather(*(client(port) for _ in range(15)))]
        await asyncio.gather(*(busy(c, f"c{i}") for i, c in enumerate(clients)))
        during = threads(process.pid)
        # a pool per connection would add a thread per connection at least (16 here)
        assert during <= before + WORKERS
        await asyncio.gather(*(c.close() for c in clients[1:]))
        await busy(first, "after")  # closing the others did not shut the shared pool down
        late = await client(port)
        await busy(late, "late")
        assert threads(process.pid) <= before + WORKERS
        await asyncio.gather(first.close(), late.close())
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 20) == 0


async def test_serve_refuses_a_worker_count_below_one(workspace: Path) -> None:
    process = await asyncio.create_subprocess_exec(*SERVER, "--tcp", "127.0.0.1:0", "--workspace", str(workspace),
                                                   "--workers", "0", stdin=subprocess.DEVNULL,
                                                   stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert b"--workers must be at least 1" in stderr


def test_closing_a_connection_drops_its_queued_work_only() -> None:
    shared = SharedWorkers(1)
    try:
        mine, theirs = shared.connection(), shared.connection()
        release, started = threading.Event(), threading.Event()
        running = mine.submit(lambda: (started.set(), release.wait(10)))  # holds the only thread
        assert started.wait(10)
        queued_mine = mine.submit(lambda: "mine")
        queued_theirs = theirs.submit(lambda: "theirs")
        assert len(mine) == 2
        mine.shutdown(wait=False, cancel_futures=True)
        with pytest.raises(RuntimeError, match="closed"):
            mine.submit(lambda: None)
        release.set()
        assert running.result(10)[1] is True  # what had started finishes
        assert queued_mine.cancelled()
        assert queued_theirs.result(10) == "theirs"  # the other connection's work still runs
        assert theirs.submit(lambda: 42).result(10) == 42
        assert len(theirs) == 0
    finally:
        shared.shutdown(wait=True)


async def test_a_request_arriving_as_its_connection_closes_is_cancelled_not_logged(
        workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A WebSocket client that drops with a request just sent: the work cannot be queued any more.
    That is no failure of the server (it was logged as one, with a traceback)."""
    from pygls.exceptions import JsonRpcException

    from context_assembly.lsp.calls import run_method
    from context_assembly.lsp.server import build_server
    from context_assembly.lsp.workers import ConnectionClosed

    shared = SharedWorkers(1)
    server = build_server(workspace, shared_workers=shared)
    try:
        server.attach(asyncio.get_running_loop())
        server.open(workspace, {}, llm_offered=False)
        await server.open_session()
        server.workers.shutdown(wait=False, cancel_futures=True)  # the connection closed
        with pytest.raises(ConnectionClosed):
            server.workers.submit(lambda: None)
        with pytest.raises(JsonRpcException) as refused:
            await run_method(server, "memory/read", {"uri": "kv://users/u-ada"})
        assert refused.value.code == -32800
        assert not [r for r in caplog.records if r.levelname == "ERROR"]
    finally:
        server.close()
        shared.shutdown(wait=True)


def test_connections_share_one_lsp_converter_and_answer_alike(workspace: Path) -> None:
    """Each connection's server used to build lsprotocol's converter anew (~3 ms of the event loop a
    connection, a valid token or not); one converter serves them all, structuring as before."""
    from lsprotocol import types

    from context_assembly.lsp.server import build_server

    shared = SharedWorkers(1)
    first, second = (build_server(workspace, shared_workers=shared) for _ in range(2))
    try:
        assert first.protocol.fm.converter is second.protocol.fm.converter
        params = {"textDocument": {"uri": "file:///x.json"}, "position": {"line": 1, "character": 2}}
        structured = second.protocol.fm.converter.structure(params, types.HoverParams)
        assert structured.position == types.Position(line=1, character=2)
    finally:
        first.close()
        second.close()
        shared.shutdown()
