"""Peers that cost the server without being served: a client that sends and never reads its
answers (the server stops reading it while too much is unsent: its memory stays bounded, the
others are served), one that also never presents a token (dropped at --auth-timeout however full
its buffer), and a flood of bad tokens (refusals logged at a bounded rate, the rest counted)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client.connection import Connection, RpcError
from context_assembly.errors import ForbiddenError
from context_assembly.lsp import refusals
from context_assembly.lsp.framing import frame
from context_assembly.lsp.refusals import BURST, PER_S, Bucket
from context_assembly.lsp.server import ContextAssemblyServer
from context_assembly.lsp.workers import SharedWorkers
from context_assembly.runtime import Runtime

from .support import Served, admitted, clone, start

TOKEN = "s3cret-token"
INITIALIZE: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {}}
READ = {"uri": "kv://users/u-ada"}
# One batch of 3,000 tiny requests (~80 KB) is 3,000 error answers (~460 KB): every frame a client
# sends and does not read costs the server ~6 times its size, before or after a token.
BATCH = ("[" + ",".join(f'{{"method":"x","id":{i}}}' for i in range(10000, 13000)) + "]").encode()
FLOOD_FRAMES = 300  # ~24 MB sent: ~140 MB of answers held if the server never stopped reading
GROWTH_BOUND = 32 << 20  # the server's resident memory grows less than this under the flood (~5 MiB)
TCP_ESTABLISHED = 1


@pytest.fixture
def workspace(seeded_template: Path, tmp_path: Path) -> Path:
    return clone(seeded_template, tmp_path / "ws")


async def client(port: int, warm: bool = True) -> Connection:
    """A token holder; `warm`: it sends `initialized`, whose warm-up loads the embedder (tens of
    MiB) on a worker."""
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", port)
    await connection.request("initialize", {**INITIALIZE, "initializationOptions": {"token": TOKEN}})
    if warm:
        connection.notify("initialized", {})
    return connection


def resident(pid: int) -> int:
    """The process's resident memory, in bytes (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) * 1024


async def peak_resident(pid: int, seconds: float) -> int:
    """The most resident memory seen over `seconds` (the server may still be reading what was sent)."""
    peak, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, resident(pid))
        await asyncio.sleep(0.1)
    return peak


async def flood(send: Callable[[], Awaitable[None]]) -> None:
    """Send frames until the server stops taking them (a send held for a second), it drops the
    connection, or FLOOD_FRAMES went."""
    for _ in range(FLOOD_FRAMES):
        try:
            await asyncio.wait_for(send(), 1)
        except Exception:  # TimeoutError: held; the connection dropped (reset, closed)
            return


async def raw_flood(port: int) -> socket.socket:
    """A TCP client that sends batches and never reads."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    message = frame(BATCH)
    await flood(lambda: loop.sock_sendall(sock, message))
    return sock


def established(sock: Any) -> bool:
    """Whether the TCP connection is still up, read from the kernel (Linux), without reading it:
    reading would take the buffered answers and let a plain close go through."""
    if sock.fileno() < 0:  # closed by its client library, the server having reset it
        return False
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
    return bool(struct.unpack("B", info[:1])[0] == TCP_ESTABLISHED)


async def dropped(sock: Any, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while established(sock):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


# -- a client that never reads ---------------------------------------------------------------------


async def test_a_tcp_client_that_never_reads_costs_bounded_memory(workspace: Path, served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp", token=TOKEN))
    other = await client(server.port, warm=False)  # (no warm-up growing the server as the flood runs)
    assert (await other.request("memory/read", READ))["exists"] is True
    before = resident(server.process.pid)
    sock = await raw_flood(server.port)  # unauthenticated: every request is answered an error
    assert (await asyncio.wait_for(other.request("memory/read", READ), 30))["exists"] is True
    growth = await peak_resident(server.process.pid, 1.5) - before
    assert growth < GROWTH_BOUND, f"the server grew {growth >> 20} MiB"
    assert (await asyncio.wait_for(other.request("memory/read", READ), 30))["exists"] is True
    sock.close()
    await other.close()


async def test_a_websocket_client_that_never_reads_costs_bounded_memory(workspace: Path,
                                                                        served: list[Served]) -> None:
    from websockets.asyncio.client import connect

    served.append(server := await start(workspace, "ws", token=TOKEN))
    other = await connect(f"ws://127.0.0.1:{server.port}")
    await other.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {**INITIALIZE, "initializationOptions": {"token": TOKEN}}}))
    assert b'"result"' in (await asyncio.wait_for(other.recv(), 30)).encode()
    before = resident(server.process.pid)
    # the client library reads 16 frames for a recv() that never comes, then stops reading;
    # uncompressed, so what the kernel holds in between is bounded as over TCP
    hostile = await connect(f"ws://127.0.0.1:{server.port}", max_queue=16, compression=None)
    await flood(lambda: hostile.send(BATCH.decode()))
    await other.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "memory/read", "params": READ}))
    assert b'"exists":true' in (await asyncio.wait_for(other.recv(), 30)).encode()
    growth = await peak_resident(server.process.pid, 1.5) - before
    assert growth < GROWTH_BOUND, f"the server grew {growth >> 20} MiB"
    hostile.transport.abort()
    await other.close()


# -- and never presents a token --------------------------------------------------------------------


async def test_a_tcp_client_without_a_token_is_dropped_at_the_timeout_however_full_its_buffer(
        workspace: Path, served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp", "--auth-timeout", "2", "--max-connections", "1",
                                        token=TOKEN))
    sock = await raw_flood(server.port)
    assert await dropped(sock), "the socket outlived --auth-timeout"
    sock.close()
    holder = await asyncio.wait_for(admitted(lambda: client(server.port)), 20)  # its place of --max-connections is free
    assert (await holder.request("memory/read", READ))["exists"] is True
    await holder.close()


async def test_a_websocket_client_without_a_token_is_dropped_at_the_timeout_however_full_its_buffer(
        workspace: Path, served: list[Served]) -> None:
    from websockets.asyncio.client import connect

    served.append(server := await start(workspace, "ws", "--auth-timeout", "2", "--max-connections", "1",
                                        token=TOKEN))
    hostile = await connect(f"ws://127.0.0.1:{server.port}", max_queue=16, compression=None)
    await flood(lambda: hostile.send(BATCH.decode()))
    sock = hostile.transport.get_extra_info("socket")
    assert await dropped(sock), "the socket outlived --auth-timeout"
    hostile.transport.abort()
    async with connect(f"ws://127.0.0.1:{server.port}") as holder:  # its place of --max-connections is free
        await holder.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {**INITIALIZE, "initializationOptions": {"token": TOKEN}}}))
        assert b'"result"' in (await asyncio.wait_for(holder.recv(), 30)).encode()


# -- a flood of bad tokens -------------------------------------------------------------------------


async def refused(port: int) -> None:
    """A client with a wrong token: refused, then closed by the server (once its refusal is logged)."""
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", port)
    with pytest.raises(RpcError) as caught:
        await connection.request("initialize", {**INITIALIZE, "initializationOptions": {"token": "wrong"}})
    assert caught.value.code == -32004
    while connection.lost is None:
        await asyncio.sleep(0.05)


async def test_a_flood_of_bad_tokens_is_logged_at_a_bounded_rate(workspace: Path, served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp", "--max-connections", "100", token=TOKEN))
    good = await client(server.port)
    started = time.monotonic()
    flooding = asyncio.gather(*(refused(server.port) for _ in range(60)))
    assert (await asyncio.wait_for(good.request("memory/read", READ), 60))["exists"] is True  # served meanwhile
    await asyncio.wait_for(flooding, 60)
    elapsed = time.monotonic() - started
    await asyncio.sleep(2 / PER_S)  # the bucket has room again: the flood's last refusal is logged
    await good.close()
    runtime = Runtime(workspace)
    try:
        events = [e["payload"] for e in runtime.memory.read("log://access?limit=1000")["value"]
                  if e["event_type"] == "access.refused"]
    finally:
        runtime.close()
    assert len(events) <= BURST + elapsed * PER_S + 1  # the burst, what refilled meanwhile, the last one
    assert any(e.get("suppressed") for e in events)
    # every refusal is an event or counted in a later one: the flood's last was logged once there
    # was room, carrying the rest (it waited for the next refusal, however late)
    assert len(events) + sum(e.get("suppressed", 0) for e in events) == 60
    assert all(e["method"] == "initialize" and e["token"] is None for e in events)
    warnings = [line for line in server.stderr if b"access refused" in line]
    assert len(warnings) <= len(events)


def test_the_refusal_bucket_gives_a_burst_then_a_steady_rate_and_counts_the_rest() -> None:
    now = [0.0]
    bucket = Bucket(burst=3, per_s=1.0, clock=lambda: now[0])
    assert [bucket.admit() for _ in range(5)] == [0, 0, 0, None, None]
    now[0] += 0.5
    assert bucket.admit() is None
    now[0] += 0.5
    assert bucket.admit() == 3  # the three left out since the previous one logged
    assert bucket.admit() is None
    now[0] += 100
    assert [bucket.admit() for _ in range(4)] == [1, 0, 0, None]  # refilled to the burst, no more


def test_the_last_of_a_flood_is_logged_once_there_is_room_unless_another_was() -> None:
    now, scheduled, logged = [0.0], [], []
    bucket = Bucket(burst=2, per_s=1.0, clock=lambda: now[0], schedule=lambda delay, then: scheduled.append(
        (delay, then)))
    assert [bucket.admit(logged.append) for _ in range(2)] == [0, 0]
    assert [bucket.admit(lambda n, i=i: logged.append((i, n))) for i in range(4)] == [None] * 4
    assert len(scheduled) == 1 and scheduled[0][0] == 1.0  # one timer, when a token is back
    now[0] += 0.5
    scheduled.pop()[1]()  # early (a busy host): no room yet, so it waits again
    assert logged == [] and len(scheduled) == 1 and scheduled[0][0] == 0.5
    now[0] += 0.5
    scheduled.pop()[1]()
    assert logged == [(3, 3)]  # the last one, carrying the three before it
    now[0] += 10
    assert bucket.admit() == 0  # nothing left to carry
    now[0] += 10
    assert [bucket.admit(), bucket.admit(), bucket.admit(lambda n: logged.append(("late", n)))] == [0, 0, None]
    assert bucket.admit() is None
    now[0] += 1
    assert bucket.admit() == 2  # logged before the timer: it carries the count, the tail is dropped
    scheduled.pop()[1]()
    assert logged == [(3, 3)]


class RecordingRuntimes:
    """A stand-in for SharedRuntimes: records the threads that acquire a runtime and write its log."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.events: list[Any] = []
        self.memory = self

    def acquire(self, root: Any) -> Any:
        self.threads.append(threading.get_ident())  # (building a runtime takes a while: not on the loop)
        return self

    def release(self, runtime: Any) -> None:
        pass

    def write(self, uri: str, value: Any) -> None:
        self.threads.append(threading.get_ident())
        self.events.append(value)


async def test_the_event_loops_refusals_are_written_by_a_worker(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refusals, "LIMIT", Bucket(burst=1, per_s=0.001))
    runtimes, shared = RecordingRuntimes(), SharedWorkers(1)
    server = ContextAssemblyServer(tmp_path, runtimes=runtimes, tokens={"default": TOKEN},
                                   shared_workers=shared)
    server.attach(asyncio.get_running_loop())
    try:
        written = server.logging_refusal(ForbiddenError("no", {"method": "initialize", "token": None}))
        assert written is not None
        await asyncio.wrap_future(written)
        assert runtimes.threads and threading.get_ident() not in runtimes.threads
        assert server.logging_refusal(ForbiddenError("again", {"method": "initialize", "token": None})) is None
        assert [e["event_type"] for e in runtimes.events] == ["access.refused"]  # the second only counted
    finally:
        server.close()
        shared.shutdown()


async def test_a_tokenless_peers_malformed_messages_are_logged_at_a_bounded_rate(workspace: Path,
                                                                                   served: list[Served]) -> None:
    """A notification without `jsonrpc`, or one holding a number no store keeps exactly, is
    ignored with a warning: without a token, a peer wrote one line each, as many as it liked."""
    served.append(server := await start(workspace, "tcp", token=TOKEN))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    inexact = b'{"jsonrpc": "2.0", "method": "x", "params": [123456789012345678901234567890]}'
    for _ in range(100):
        writer.write(frame(b'{"method": "x"}') + frame(inexact))
    await writer.drain()
    good = await client(server.port, warm=False)
    assert (await asyncio.wait_for(good.request("memory/read", READ), 60))["exists"] is True  # served meanwhile
    await good.close()
    writer.close()
    assert await server.stop() == 0
    said = [line for line in server.stderr if b"ignored" in line]
    assert 1 <= len(said) <= BURST + 2


# -- leaves with work running ----------------------------------------------------------------------


async def test_a_client_that_leaves_mid_work_leaves_no_failures_and_the_next_is_served(
        workspace: Path, served: list[Served]) -> None:
    """The last connection's close shut the stores under its requests still running (each failed
    with a traceback), and what they answered went to the lost socket (an asyncio warning a write)."""
    from .support import REQUEST

    served.append(server := await start(workspace, "tcp", token=TOKEN))
    left: list[asyncio.Future[Any]] = []
    for n, wait in enumerate((0.0, 0.02, 0.05, 0.1, 0.2)):
        leaving = await client(server.port)
        left += [asyncio.ensure_future(leaving.request(  # every pipeline runs: a new task text each
            "contextAssembly/assemble", {**REQUEST, "input": {**REQUEST["input"], "text": f"t{n}-{i}"}}))
            for i in range(20)]
        await asyncio.sleep(wait)
        leaving._transport_writer.transport.abort()  # gone at once, no shutdown
        await asyncio.sleep(0.5)
    late = await client(server.port)
    assert (await asyncio.wait_for(late.request("memory/read", READ), 60))["exists"] is True
    await late.close()
    await asyncio.gather(*left, return_exceptions=True)  # (lost with their connections)
    await asyncio.sleep(3)  # the runs left behind finish
    assert await server.stop() == 0
    assert not [line for line in server.stderr if b"socket.send" in line or b"ERROR" in line], server.stderr


async def test_a_client_that_half_closes_gets_the_answers_it_is_owed(workspace: Path, served: list[Served]) -> None:
    """A client that sends everything, closes its sending side and reads on (a script, `nc -N`)
    got the answers ready by then, and no others."""


    from .support import REQUEST

    served.append(server := await start(workspace, "tcp", token=TOKEN))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    messages: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {**INITIALIZE, "initializationOptions": {"token": TOKEN}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}}]
    messages += [{"jsonrpc": "2.0", "id": n, "method": "contextAssembly/assemble",
                  "params": {**REQUEST, "input": {**REQUEST["input"], "text": f"half {n}"}}} for n in range(1, 9)]
    writer.write(b"".join(frame(json.dumps(m).encode()) for m in messages))
    await writer.drain()
    writer.write_eof()
    received = await asyncio.wait_for(reader.read(), 120)  # to the server's end of the connection
    bodies = re.split(rb"Content-Length: \d+\r\n\r\n", received)[1:]
    answers = {m["id"]: m for m in map(json.loads, bodies) if "id" in m}  # (notifications too)
    assert sorted(answers) == list(range(9)) and all("result" in a for a in answers.values())
    writer.close()


async def test_a_client_gone_before_answering_the_server_leaves_nothing_waiting(workspace: Path,
                                                                                 served: list[Served]) -> None:
    """A client offering `workspace/configuration` that left without answering it: the server's
    request waited on, for good, and each such connection logged a pending task destroyed, or a
    traceback when the server stopped."""
    served.append(server := await start(workspace, "tcp", "--max-connections", "64", token=TOKEN))
    for _ in range(30):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {**INITIALIZE, "capabilities": {"workspace": {"configuration": True}},
                                    "initializationOptions": {"token": TOKEN}}},
                        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                        {"jsonrpc": "2.0", "id": 2, "method": "memory/read", "params": READ}):
            writer.write(frame(json.dumps(message).encode()))
        received = b""
        while b'"id":2' not in received or b"workspace/configuration" not in received:
            received += await asyncio.wait_for(reader.read(65536), 30)
        writer.close()  # the configuration request unanswered
    await asyncio.sleep(1)


    good = await client(server.port)
    assert (await asyncio.wait_for(good.request("memory/read", READ), 60))["exists"] is True
    await good.close()

    assert await server.stop() == 0
    assert not [line for line in server.stderr if b"destroyed" in line or b"Traceback" in line
                or b"CancelledError" in line], server.stderr


async def test_a_client_that_half_closes_while_its_model_is_asked_gets_its_answer_at_once(
        workspace: Path, served: list[Served]) -> None:
    """Its `llm/complete` answer can no longer come: the request waiting on it fails now and is
    answered. It waited for the answers owed (30 s), holding its place of --max-connections, and
    got none."""
    (workspace / ".codebolt" / "MemoryIngestion" / "asks.json").write_text(json.dumps({
        "id": "asks", "label": "asks", "status": "active", "trigger": "manual",
        "processors": [{"id": "x", "type": "llm_extract", "input": "payload.text", "output": "facts"}],
        "routing": [{"from": "facts", "foreach": True, "write_to": "log://facts"}]}))
    served.append(server := await start(workspace, "tcp", "--max-connections", "1", token=TOKEN))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    for message in ({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {**INITIALIZE, "initializationOptions": {"token": TOKEN, "llm": True}}},
                    {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                    {"jsonrpc": "2.0", "id": 1, "method": "memoryIngestion/execute",
                     "params": {"id": "asks", "payload": {"text": "hello"}}}):
        writer.write(frame(json.dumps(message).encode()))
    received = b""
    while b"llm/complete" not in received:
        received += await asyncio.wait_for(reader.read(65536), 60)
    writer.write_eof()  # asked, and it will never answer
    received += await asyncio.wait_for(reader.read(), 20)  # (30 s and nothing, before)
    answer = next(m for m in (json.loads(b) for b in re.split(rb"Content-Length: \d+\r\n\r\n", received)[1:])
                  if m.get("id") == 1)
    assert answer["result"]["status"] in ("failed", "partial") and "left" in json.dumps(answer)
    writer.close()
    good = await admitted(lambda: client(server.port))  # its place is free
    assert (await asyncio.wait_for(good.request("memory/read", READ), 60))["exists"] is True
    await good.close()
