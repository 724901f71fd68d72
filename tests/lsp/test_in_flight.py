"""A network connection's requests in progress are capped (`serve --max-in-flight`), and the worker
threads are shared between connections in turn: a client that pipelines thousands of requests
neither grows the server by what it sent nor makes another client wait behind its backlog, and a
client whose request waits on its own `llm/complete` answer is still read (never a deadlock)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client.connection import Connection, RpcError
from context_assembly.lsp.in_flight import InFlight
from context_assembly.lsp.workers import SharedWorkers

from .support import REQUEST, Served, clone, start
from .test_hostile_peers import GROWTH_BOUND, INITIALIZE, READ, TOKEN, client, peak_resident, resident

PIPELINED = 20_000  # reads sent at once: ~145 MiB held by the server when it read them all
REPHRASED = {"id": "rephrased", "label": "Rephrased query", "status": "active",
             "retrieval": {"pipeline": [
                 {"type": "derive_query", "from": ["input.text"], "method": "llm_rephrase"},
                 {"type": "kv_get", "namespace": "users", "keys": ["u-ada"]}]},
             "contribution": {"section": "knowledge", "priority": "high"}}


@pytest.fixture
def workspace(seeded_template: Path, tmp_path: Path) -> Path:
    return clone(seeded_template, tmp_path / "ws")


# -- end to end ------------------------------------------------------------------------------------


async def model_client(workspace: Path, served: list[Served]) -> Connection:
    """A client that offers its model (`llm/complete`) to a server capped at one request in
    progress, with a memory whose pipeline asks that model."""
    served.append(server := await start(workspace, "tcp", "--max-in-flight", "1", token=TOKEN))
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", server.port)
    await connection.request("initialize", {**INITIALIZE, "initializationOptions": {"token": TOKEN, "llm": True}})
    connection.notify("initialized", {})
    await connection.request("persistentMemory/create", REPHRASED)
    return connection


async def test_a_pipelining_client_neither_grows_the_server_nor_delays_another(workspace: Path,
                                                                             served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp", token=TOKEN))
    other = await client(server.port, warm=False)
    assert (await other.request("memory/read", READ))["exists"] is True  # the stores are open
    before = resident(server.process.pid)
    greedy = await client(server.port, warm=False)
    reads = [asyncio.ensure_future(greedy.request("memory/read", READ)) for _ in range(PIPELINED)]
    peak = asyncio.ensure_future(peak_resident(server.process.pid, 3))
    await asyncio.sleep(0.5)  # the greedy client's backlog is at the server
    assert (await asyncio.wait_for(other.request("memory/read", READ), 60))["exists"] is True
    # answered in its turn: most of the backlog sent before it is still waiting
    assert sum(not read.done() for read in reads) > PIPELINED // 2
    assert await peak - before < GROWTH_BOUND
    assert all(answer["exists"] for answer in await asyncio.wait_for(asyncio.gather(*reads), 120))
    await asyncio.gather(other.close(), greedy.close())


async def test_a_pipelining_websocket_client_is_read_no_further_than_its_cap(workspace: Path,
                                                                            served: list[Served]) -> None:
    from websockets.asyncio.client import ClientConnection, connect

    served.append(server := await start(workspace, "ws", token=TOKEN))

    async def ws_client() -> ClientConnection:
        connection = await connect(f"ws://127.0.0.1:{server.port}", compression=None)
        await connection.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                          "params": {**INITIALIZE, "initializationOptions": {"token": TOKEN}}}))
        assert b'"result"' in (await asyncio.wait_for(connection.recv(), 30)).encode()
        return connection

    def read(msg_id: int) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "memory/read", "params": READ})

    other = await ws_client()
    await other.send(read(2))
    assert b'"exists":true' in (await asyncio.wait_for(other.recv(), 60)).encode()
    before = resident(server.process.pid)
    greedy, answered = await ws_client(), 0

    async def send_all() -> None:
        for msg_id in range(10, 10 + PIPELINED):
            await greedy.send(read(msg_id))

    async def read_all() -> None:
        nonlocal answered
        while answered < PIPELINED:
            assert b'"exists":true' in (await greedy.recv()).encode()
            answered += 1

    sending, reading = asyncio.ensure_future(send_all()), asyncio.ensure_future(read_all())
    peak = asyncio.ensure_future(peak_resident(server.process.pid, 3))
    await asyncio.sleep(0.5)
    await other.send(read(3))
    assert b'"exists":true' in (await asyncio.wait_for(other.recv(), 60)).encode()
    assert answered < PIPELINED // 2
    assert await peak - before < GROWTH_BOUND
    await asyncio.wait_for(asyncio.gather(sending, reading), 120)
    await asyncio.gather(other.close(), greedy.close())


async def test_a_client_awaited_for_its_model_is_read_on_and_over_the_cap_refused(workspace: Path,
                                                                               served: list[Served]) -> None:
    connection = await model_client(workspace, served)
    asked, answer = asyncio.Event(), asyncio.Event()

    async def model(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await answer.wait()
        return {"text": "session timeout"}

    connection.handle("llm/complete", model)
    execute = asyncio.ensure_future(connection.request("persistentMemory/execute",
                                                       {"id": "rephrased", "request": REQUEST}))
    await asyncio.wait_for(asked.wait(), 60)  # the one request allowed is waiting on the model
    with pytest.raises(RpcError) as refused:
        await asyncio.wait_for(connection.request("memory/read", READ), 60)
    assert refused.value.code == -32000 and "--max-in-flight" in refused.value.message
    assert refused.value.data == {"in_flight": 1, "most": 1}
    answer.set()  # read although the cap is reached: the request it frees finishes
    result = await asyncio.wait_for(execute, 60)
    assert result["status"] == "ok" and result["query"] == "session timeout"
    assert (await asyncio.wait_for(connection.request("memory/read", READ), 60))["exists"] is True
    await connection.close()


async def test_a_request_right_after_the_models_answer_is_held_not_refused(workspace: Path,
                                                                           served: list[Served]) -> None:
    """Once the client's `llm/complete` answer is read, the server no longer waits on the client: a
    request over the cap that follows it is held until there is room, as any other."""
    connection = await model_client(workspace, served)
    loop = asyncio.get_running_loop()
    for delay in (0.0, 0.001, 0.002, 0.005):
        follows: list[asyncio.Future[Any]] = []

        async def model(params: dict[str, Any], delay: float = delay,
                        follows: list[asyncio.Future[Any]] = follows) -> dict[str, Any]:
            # sent once this answer is on its way (the answer is written when this returns)
            loop.call_later(delay + 0.0005, lambda: follows.append(
                asyncio.ensure_future(connection.request("memory/read", READ))))
            return {"text": "session timeout"}

        connection.handle("llm/complete", model)
        result = await asyncio.wait_for(connection.request("persistentMemory/execute",
                                                           {"id": "rephrased", "request": REQUEST}), 60)
        assert result["query"] == "session timeout"
        while not follows:
            await asyncio.sleep(0.001)
        assert (await asyncio.wait_for(follows[0], 60))["exists"] is True
    await connection.close()


async def test_a_request_to_a_notification_method_is_refused_and_takes_no_place(workspace: Path,
                                                                                served: list[Served]) -> None:
    """`$/setTrace` or `$/cancelRequest` sent with an id was run as a notification and never answered:
    with --max-in-flight it took a place for good, and enough of them stopped the connection."""
    served.append(server := await start(workspace, "tcp", "--max-in-flight", "2", token=TOKEN))
    connection = await client(server.port, warm=False)
    for method, params in [("$/setTrace", {"value": "off"}), ("$/cancelRequest", {"id": 1}),
                           ("initialized", {})]:
        with pytest.raises(RpcError) as refused:
            await asyncio.wait_for(connection.request(method, params), 60)
        assert refused.value.code == -32600 and "is a notification" in refused.value.message
    assert (await asyncio.wait_for(connection.request("memory/read", READ), 60))["exists"] is True
    await connection.close()


async def test_refusals_that_reuse_an_id_in_progress_free_no_place(workspace: Path) -> None:
    """A request refused before it was taken in (a number beyond 64 bits, a batch, a notification
    method) answered under the id of one in progress counted as that one's answer: sent in turn,
    they kept the count near 0 while the real work queued without bound."""
    from context_assembly.lsp.server import build_server

    shared, hold, sent = SharedWorkers(1), threading.Event(), []

    class Captured:
        threadsafe = False

        def write(self, data: bytes) -> None:
            sent.append(json.loads(data))

    server = build_server(workspace, shared_workers=shared)
    try:
        server.attach(asyncio.get_running_loop())
        server.open(workspace, {}, llm_offered=False)
        await server.open_session()
        server.protocol.set_writer(Captured(), include_headers=False)
        server.protocol.in_flight = in_flight = InFlight(most=1)
        shared.connection().submit(hold.wait, 10)  # another connection's work holds the only thread
        server.protocol.receive(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "memory/read",
                                            "params": READ}).encode())
        await asyncio.sleep(0.05)
        assert len(in_flight) == 1
        for refused in (b'{"jsonrpc": "2.0", "id": 7, "method": "memory/read", "params": {"n": 123456789012345678901}}',
                        b'[{"jsonrpc": "2.0", "id": 7, "method": "memory/read"}]',
                        b'{"jsonrpc": "2.0", "id": 7, "method": "$/setTrace", "params": {"value": "off"}}'):
            server.protocol.receive(refused)
        assert [message["error"]["code"] for message in sent] == [-32602, -32600, -32600]
        assert len(in_flight) == 1  # still the read's place
        hold.set()
        while len(in_flight):
            await asyncio.sleep(0.01)
        assert sent[-1] == {"jsonrpc": "2.0", "id": 7, "result": {"uri": READ["uri"], "exists": True,
                                                                   "value": sent[-1]["result"]["value"]}}
    finally:
        hold.set()
        server.close()
        shared.shutdown()


async def test_serve_refuses_an_in_flight_cap_below_one(workspace: Path) -> None:
    from .support import SERVER

    process = await asyncio.create_subprocess_exec(*SERVER, "--tcp", "127.0.0.1:0", "--workspace", str(workspace),
                                                   "--max-in-flight", "0", stdin=asyncio.subprocess.DEVNULL,
                                                   stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2 and b"--max-in-flight must be at least 1" in stderr


# -- the parts -------------------------------------------------------------------------------------


def test_the_threads_go_to_the_connections_in_turn() -> None:
    shared = SharedWorkers(1)
    ran: list[str] = []
    release = threading.Event()
    try:
        greedy, modest = shared.connection(), shared.connection()
        holding = greedy.submit(release.wait, 10)  # the only thread
        backlog = [greedy.submit(ran.append, f"greedy-{i}") for i in range(50)]
        mine = modest.submit(ran.append, "modest")
        release.set()
        for future in [holding, *backlog, mine]:
            future.result(10)
        assert ran.index("modest") == 1  # after one job of the greedy backlog, not all fifty
        assert [name for name in ran if name != "modest"] == [f"greedy-{i}" for i in range(50)]  # in order
    finally:
        shared.shutdown()


def test_a_failing_job_fails_its_future_and_the_next_one_runs() -> None:
    shared = SharedWorkers(1)
    try:
        connection = shared.connection()
        failing = connection.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failing.result(10)
        assert connection.submit(lambda: "next").result(10) == "next"
        assert len(connection) == 0
    finally:
        shared.shutdown()


def test_stopping_the_threads_cancels_every_connections_queue() -> None:
    shared = SharedWorkers(1)
    release = threading.Event()
    connection = shared.connection()
    holding = connection.submit(release.wait, 10)
    queued = connection.submit(lambda: "never")
    threading.Timer(0.2, release.set).start()
    shared.shutdown(wait=True)
    assert holding.result(10) is True and queued.cancelled()


async def test_the_cap_admits_up_to_most_and_the_room_opens_on_an_answer() -> None:
    in_flight = InFlight(most=2)
    assert in_flight.admit(7) and in_flight.admit(7)  # ids may repeat: each request counts
    assert not in_flight.admit(8) and len(in_flight) == 2
    room = asyncio.ensure_future(in_flight.room())
    await asyncio.sleep(0.05)
    assert not room.done()
    in_flight.answered(99)  # never counted: nothing changes
    await asyncio.sleep(0.05)
    assert not room.done() and len(in_flight) == 2
    await asyncio.to_thread(in_flight.answered, 7)  # answers may come from a worker's thread
    await asyncio.wait_for(room, 5)
    assert len(in_flight) == 1 and in_flight.admit(8)


async def test_the_room_opens_while_the_server_waits_on_the_client() -> None:
    in_flight = InFlight(most=1)
    assert in_flight.admit(1)
    room = asyncio.ensure_future(in_flight.room())
    await asyncio.sleep(0.05)
    assert not room.done()
    with in_flight.asking("ask-1"):
        await asyncio.wait_for(room, 5)
        await asyncio.wait_for(in_flight.room(), 5)  # read on for as long as it waits
        assert not in_flight.admit(2)  # yet requests over the cap are not taken
        in_flight.replied("ask-1")  # its answer was read: the handler no longer waits on the client
        waiting = asyncio.ensure_future(in_flight.room())
        await asyncio.sleep(0.05)
        assert not waiting.done()  # the cap holds again at once, before the handler resumes
    in_flight.answered(1)
    await asyncio.wait_for(waiting, 5)


def test_an_answer_that_is_no_json_is_answered_as_an_internal_error_and_frees_its_place(workspace: Path) -> None:
    from context_assembly.lsp.server import build_server

    sent: list[Any] = []

    class Captured:
        def write(self, data: bytes) -> None:
            sent.append(json.loads(data))

    shared = SharedWorkers(1)
    server = build_server(workspace, shared_workers=shared)
    try:
        server.protocol.set_writer(Captured(), include_headers=False)
        server.protocol.in_flight = in_flight = InFlight(most=1)
        assert in_flight.admit(9)
        server.protocol.send_data({"jsonrpc": "2.0", "id": 9, "result": {"value": object()}})
        assert sent == [{"jsonrpc": "2.0", "id": 9, "error": {
            "code": -32603, "message": "Internal error: the answer could not be encoded as JSON"}}]
        assert len(in_flight) == 0
    finally:
        server.close()
        shared.shutdown()


async def test_a_websocket_client_held_at_the_cap_keeps_its_connection(workspace: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Held at the cap with two more messages sent, websockets stopped reading the socket, the
    client's keepalive pongs with it, and closed the connection ("keepalive ping timeout")."""
    from websockets.asyncio.client import connect

    from context_assembly.lsp import transports
    from context_assembly.lsp.server import build_server

    monkeypatch.setattr(transports, "PING_S", 0.3)
    shared, hold, stop = SharedWorkers(1), threading.Event(), asyncio.Event()
    network = transports.Network(lambda: build_server(workspace, shared_workers=shared), max_in_flight=1)
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.ensure_future(transports.serve_ws(network, "127.0.0.1", 0, listening.set_result, stop))
    try:
        address = await asyncio.wait_for(listening, 30)
        async with connect(address, ping_interval=None) as websocket:
            await websocket.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                             "params": INITIALIZE}))
            assert b'"result"' in (await asyncio.wait_for(websocket.recv(), 30)).encode()
            shared.threads.submit(hold.wait, 30)  # the only thread busy: the first read stays in progress
            for msg_id in range(1, 5):
                await websocket.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "memory/read",
                                                 "params": READ}))
            await asyncio.sleep(1.5)  # five keepalive rounds
            hold.set()
            answers = [json.loads(await asyncio.wait_for(websocket.recv(), 30)) for _ in range(4)]
            assert [a["id"] for a in answers] == [1, 2, 3, 4] and all(a["result"]["exists"] for a in answers)
    finally:
        hold.set()
        stop.set()
        await asyncio.wait_for(serving, 30)
        shared.shutdown()


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_a_cancellation_is_taken_at_the_cap(workspace: Path, transport: str) -> None:
    """`$/cancelRequest` read while the connection is at its cap waited for room like a request: a
    client could not cancel exactly when it had the most in progress."""
    from websockets.asyncio.client import connect

    from context_assembly.lsp import transports
    from context_assembly.lsp.framing import frame
    from context_assembly.lsp.server import build_server

    shared, hold, stop = SharedWorkers(1), threading.Event(), asyncio.Event()
    network = transports.Network(lambda: build_server(workspace, shared_workers=shared), max_in_flight=1)
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serve = transports.serve_tcp if transport == "tcp" else transports.serve_ws
    serving = asyncio.ensure_future(serve(network, "127.0.0.1", 0, listening.set_result, stop))
    messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE},
                {"jsonrpc": "2.0", "id": 1, "method": "memory/read", "params": READ},
                {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}]
    try:
        address = await asyncio.wait_for(listening, 30)
        shared.threads.submit(hold.wait, 30)  # the only thread busy: the read stays in progress
        if transport == "tcp":
            host, port = address.removeprefix("tcp://").rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"".join(frame(json.dumps(m).encode()) for m in messages))
            source = transports.StreamSource(reader)
            framed = transports.FrameReader(source, max_body=1 << 20)
            answers = [json.loads(await asyncio.wait_for(framed.next_body(), 30)) for _ in range(2)]
            writer.close()
        else:
            async with connect(address) as websocket:
                for message in messages:
                    await websocket.send(json.dumps(message))
                answers = [json.loads(await asyncio.wait_for(websocket.recv(), 30)) for _ in range(2)]
        assert answers[1]["id"] == 1 and answers[1]["error"]["code"] == -32800  # before the thread came free
    finally:
        hold.set()
        stop.set()
        await asyncio.wait_for(serving, 30)
        shared.shutdown()
