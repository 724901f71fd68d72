"""Many clients and a door with a lock: `serve --tcp` / `--ws` serve concurrent connections, each
its own session over one workspace, up to --max-connections; with a token configured a client
must present it in `initialize` (nothing else is served before), a wrong or missing one closes the
connection; the access policy of the settings file limits what each token may read, write and
call, and every refusal lands in `log://access`; no token, no listening beyond loopback; TLS."""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client.connection import Connection, ConnectionLost, RpcError
from context_assembly.errors import ContextAssemblyError
from context_assembly.lsp.framing import encode_json, frame
from context_assembly.methods import METHODS
from context_assembly.methods.access import load_tokens, token_name
from context_assembly.runtime import Runtime

from .support import REQUEST, SERVER, Served, admitted, clone, start

TOKEN = "s3cret-token"
WRITE = {"uri": "kv://door/written", "value": "should not be"}
INITIALIZE: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {}}


@pytest.fixture
def workspace(seeded_template: Path, tmp_path: Path) -> Path:
    return clone(seeded_template, tmp_path / "ws")


async def client(port: int, token: str | None = None, tls: ssl.SSLContext | None = None,
                 settings: dict[str, Any] | None = None) -> Connection:
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", port, ssl=tls)
    options: dict[str, Any] = {**({"token": token} if token is not None else {}),
                               **({"settings": settings} if settings is not None else {})}
    await connection.request("initialize", {**INITIALIZE, "initializationOptions": options})
    connection.notify("initialized", {})
    return connection


async def refusal(awaitable: Any) -> ContextAssemblyError:
    with pytest.raises(ContextAssemblyError) as caught:
        await awaitable
    return caught.value


async def closed(connection: Connection) -> None:
    while connection.lost is None:
        await asyncio.sleep(0.05)


# -- many clients --------------------------------------------------------------------------------


async def test_many_tcp_clients_at_once_share_one_workspace(workspace: Path, served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp"))
    clients = await asyncio.gather(*(client(server.port) for _ in range(6)))

    async def work(index: int, connection: Connection) -> Any:
        await connection.request("memory/write", {"uri": f"kv://many/c{index}", "value": index})
        request = {**REQUEST, "input": {"text": f"client {index}"}}
        assembled = await connection.request("contextAssembly/assemble", request)
        assert assembled["meta"]["assembly_id"]
        return await connection.request("memory/read", {"uri": f"kv://many/c{(index + 1) % 6}"})

    await asyncio.gather(*(work(i, c) for i, c in enumerate(clients)))
    for index, connection in enumerate(clients):  # every write is visible to every other session
        assert (await connection.request("memory/read", {"uri": f"kv://many/c{(index + 1) % 6}"}))["value"] == \
            (index + 1) % 6
    await asyncio.gather(*(c.close() for c in clients))


async def test_the_connection_limit_refuses_one_more_and_frees_a_place(workspace: Path,
                                                                       served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp", "--max-connections", "2"))
    first, second = await client(server.port), await client(server.port)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    answer = await asyncio.wait_for(reader.read(), 20)  # an error, then the server closes
    assert b'"code":-32000' in answer and b"at most 2" in answer
    writer.close()
    await first.close()
    # a place comes free once the server lets go
    third = await asyncio.wait_for(admitted(lambda: client(server.port)), 20)
    assert (await third.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    await asyncio.gather(second.close(), third.close())


async def test_a_connection_without_a_token_in_time_is_closed_and_frees_its_place(
        workspace: Path, served: list[Served]) -> None:
    """Peers that never authenticate (silent, or asking before `initialize`) held places of
    --max-connections for good, locking the token holders out."""
    served.append(server := await start(workspace, "tcp", "--max-connections", "2", "--auth-timeout", "1",
                                        token=TOKEN))
    silent = await asyncio.open_connection("127.0.0.1", server.port)
    asking = await asyncio.open_connection("127.0.0.1", server.port)
    asking[1].write(frame(encode_json({"jsonrpc": "2.0", "id": 1, "method": "memory/read",
                                       "params": {"uri": "kv://users/u-ada"}})))
    for reader, _writer in (silent, asking):  # each is closed by the server (EOF) within the timeout
        await asyncio.wait_for(reader.read(), 20)
    holder = await asyncio.wait_for(client(server.port, TOKEN), 20)
    assert (await holder.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    await asyncio.sleep(1.5)  # an authenticated client is never closed by the timeout
    assert (await holder.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    await holder.close()
    for _reader, writer in (silent, asking):
        writer.close()


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_sigterm_with_clients_connected_exits_quietly(workspace: Path, transport: str) -> None:
    """Exit status 0 and nothing on stderr but the address: the connections were cancelled by the
    runner and asyncio logged a CancelledError traceback for each."""
    server = await start(workspace, transport)
    if transport == "tcp":
        connected = await client(server.port)
        assert (await connected.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    else:
        from websockets.asyncio.client import connect

        socket = await connect(f"ws://127.0.0.1:{server.port}")
        await socket.send(encode_json({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}))
        assert b'"result"' in (await socket.recv()).encode()
    assert await server.stop() == 0
    assert not [line for line in server.stderr if b"Traceback" in line or b"ERROR" in line], server.stderr


async def test_many_websocket_clients_at_once(workspace: Path, served: list[Served]) -> None:
    from websockets.asyncio.client import connect

    served.append(server := await start(workspace, "ws"))

    async def one(index: int) -> Any:
        async with connect(f"ws://127.0.0.1:{server.port}") as websocket:
            async def ask(msg_id: int, method: str, params: Any = None) -> Any:
                await websocket.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
                while True:
                    message = json.loads(await asyncio.wait_for(websocket.recv(), 30))
                    if message.get("id") == msg_id:
                        return message

            await ask(1, "initialize", INITIALIZE)
            await ask(2, "memory/write", {"uri": f"kv://ws/c{index}", "value": index})
            return (await ask(3, "memory/read", {"uri": f"kv://ws/c{index}"}))["result"]["value"]

    assert await asyncio.gather(*(one(i) for i in range(4))) == [0, 1, 2, 3]


# -- tokens --------------------------------------------------------------------------------------


@pytest.mark.parametrize("presented", [None, "wrong-token", ""])
async def test_without_the_right_token_initialize_fails_and_the_connection_closes(
        workspace: Path, served: list[Served], presented: str | None) -> None:
    served.append(server := await start(workspace, "tcp", token=TOKEN))
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", server.port)
    options = {} if presented is None else {"token": presented}
    error = await refusal(connection.request("initialize", {**INITIALIZE, "initializationOptions": options}))
    assert isinstance(error, RpcError) and error.code == -32004 and "token" in error.message
    await asyncio.wait_for(closed(connection), 20)  # the server closes the connection
    later = await refusal(connection.request("memory/read", {"uri": "kv://users/u-ada"}))
    assert isinstance(later, ConnectionLost)
    for _ in range(200):  # the refusal is written off the event loop, the close does not wait for it
        if any(payload.get("method") == "initialize" for payload in refusals(workspace)):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the refusal was not logged")


async def test_nothing_is_served_before_a_good_initialize(workspace: Path, served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp", token=TOKEN))
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", server.port)
    calls: list[tuple[str, Any]] = [(method, WRITE if method == "memory/write" else {"id": "x"})
                                    for method in sorted(METHODS)]
    calls += [("shutdown", None), ("textDocument/hover", {"textDocument": {"uri": "file:///x.json"},
                                                          "position": {"line": 0, "character": 0}})]
    for method, params in calls:
        error = await refusal(connection.request(method, params))
        assert isinstance(error, RpcError) and error.code == -32002, method
    connection.notify("textDocument/didOpen", {"textDocument": {  # a notification is dropped, not run
        "uri": (workspace / ".codebolt" / "x.json").as_uri(), "languageId": "json", "version": 1, "text": "{"}})
    await connection.request("initialize", {**INITIALIZE, "initializationOptions": {"token": TOKEN}})
    assert (await connection.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    assert (await connection.request("memory/read", {"uri": WRITE["uri"]}))["exists"] is False
    await connection.close()


async def test_requests_sent_behind_a_wrong_token_are_not_run(workspace: Path, served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp", token=TOKEN))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {**INITIALIZE, "initializationOptions": {"token": TOKEN + "x"}}},
                {"jsonrpc": "2.0", "id": 2, "method": "memory/write", "params": WRITE},
                {"jsonrpc": "2.0", "id": 3, "method": "contextAssembly/endTurn", "params": {"thread_id": "t-42"}}]
    writer.write(b"".join(frame(encode_json(m)) for m in messages))  # one write: all arrive before the answer
    received = await asyncio.wait_for(reader.read(), 30)  # until the server closes the connection
    writer.close()
    answers = {a["id"]: a for a in map(json.loads, re.split(rb"Content-Length: \d+\r\n\r\n", received)[1:])}
    assert answers[1]["error"]["code"] == -32004
    assert all(a["error"]["code"] == -32002 for i, a in answers.items() if i != 1)  # refused, if answered at all
    probe = await client(server.port, TOKEN)
    assert (await probe.request("memory/read", {"uri": WRITE["uri"]}))["exists"] is False
    assert (await probe.request("memory/read", {"uri": "working://t-42/plan"}))["exists"] is True
    await probe.close()


@pytest.mark.parametrize("presented", [None, "wrong-token"])
async def test_a_websocket_client_without_the_right_token_is_closed(workspace: Path, served: list[Served],
                                                                   presented: str | None) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    served.append(server := await start(workspace, "ws", token=TOKEN))
    async with connect(f"ws://127.0.0.1:{server.port}") as websocket:
        await websocket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "memory/read",
                                         "params": {"uri": "kv://users/u-ada"}}))
        assert json.loads(await websocket.recv())["error"]["code"] == -32002
        options = {} if presented is None else {"token": presented}
        await websocket.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "initialize",
                                         "params": {**INITIALIZE, "initializationOptions": options}}))
        answer = json.loads(await asyncio.wait_for(websocket.recv(), 30))
        assert answer["error"]["code"] == -32004 and "token" in answer["error"]["message"]
        with pytest.raises(ConnectionClosed):  # the server closes the connection
            await asyncio.wait_for(websocket.recv(), 30)


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_a_non_loopback_address_needs_a_token(workspace: Path, served: list[Served], transport: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *SERVER, f"--{transport}", "0.0.0.0:0", "--workspace", str(workspace), stdin=subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env={k: v for k, v in os.environ.items() if k != "CONTEXT_ASSEMBLY_TOKEN"})
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert b"refusing to listen on 0.0.0.0 without a token" in stderr
    served.append(server := await start(workspace, transport, token=TOKEN, host="0.0.0.0"))  # with one it does
    assert server.scheme == transport


# -- the access policy ---------------------------------------------------------------------------

POLICY = {
    "reader": {"methods": ["memory/read", "memory/list", "contextAssembly/*"], "read": ["kv://users/*"]},
    "writer": {"methods": ["memory/*"], "read": ["kv://**"], "write": ["kv://notes/*"]},
}


@pytest.fixture
async def policed(workspace: Path, served: list[Served], tmp_path: Path) -> Served:
    settings = workspace / ".codebolt" / "context-assembly.json"
    settings.write_text(json.dumps({"access": POLICY}))
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {"reader": "r-token", "writer": "w-token", "nobody": "n-token"}}))
    served.append(server := await start(workspace, "tcp", "--token-file", str(tokens)))
    return server


def refusals(workspace: Path) -> list[dict[str, Any]]:
    runtime = Runtime(workspace)
    try:
        return [e["payload"] for e in runtime.memory.read("log://access")["value"]]
    finally:
        runtime.close()


async def test_editor_features_count_only_the_turns_a_token_may_read(workspace: Path, served: list[Served],
                                                                     tmp_path: Path) -> None:
    """The rule-test lens, its diagnostics and "Evaluate rule" built their variables with the
    unrestricted lookup: they told a token how many turns a thread it may not read holds."""
    (workspace / ".codebolt" / "context-assembly.json").write_text(json.dumps({"access": POLICY}))
    engine = {"id": "probe", "name": "probe", "enabled": True, "rules": [
        {"id": "many", "name": "many", "priority": 1,
         "when": [{"field": "addVar.turn_count", "operator": "gt", "value": 5}], "then": {"add_memories": ["kv://x"]}}]}
    (workspace / ".codebolt" / "context-rule-engines" / "probe.json").write_text(json.dumps(engine))
    runtime = Runtime(workspace)
    for n in range(7):
        runtime.memory.write("episodic://t-secret", {"role": "user", "content": f"turn {n}"})
    runtime.close()
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {"reader": "r-token"}}))
    served.append(server := await start(workspace, "tcp", "--token-file", str(tokens)))
    reader = await client(server.port, "r-token")
    test = {"request": {"thread_id": "t-secret", "scope_variables": {"thread": {"thread_id": "t-secret"}},
                        "input": {"text": "x"}},
            "cases": [{"name": "probe", "expect": {"rules_not_fired": ["probe/many"]}}]}
    uri = (workspace / ".codebolt" / "tests" / "probe.json").as_uri()
    reader.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "json", "version": 1,
                                                            "text": json.dumps(test)}})
    ran = await reader.request("workspace/executeCommand", {"command": "contextAssembly.runTest",
                                                            "arguments": [".codebolt/tests/probe.json", "probe"]})
    diagnostics = await reader.request("textDocument/diagnostic", {"textDocument": {"uri": uri}})
    evaluated = await reader.request("workspace/executeCommand", {"command": "contextAssembly.evaluateRule",
                                                                  "arguments": ["probe", "many"]})
    await reader.close()
    assert [r["status"] for r in ran["results"]] == ["passed"]
    assert not [d for d in diagnostics["items"] if "probe/many" in d["message"]]
    assert [c["matched"] for c in evaluated["cases"] if c["file"].endswith("probe.json")] == [False]


async def test_a_token_cannot_choose_its_workspace_and_so_its_policy(workspace: Path, served: list[Served],
                                                                     tmp_path: Path) -> None:
    """Without --workspace a token holder's rootUri chose the workspace: "/" read any file on the
    host (the token file too) under no policy at all. With tokens the workspace is the server's:
    the one found from its current directory."""
    (workspace / ".codebolt" / "context-assembly.json").write_text(json.dumps({"access": POLICY}))
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {"reader": "r-token"}}))
    (workspace / "src").mkdir(exist_ok=True)
    served.append(server := await start(workspace, "tcp", "--token-file", str(tokens), cwd=workspace / "src"))
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", server.port)
    await connection.request("initialize", {**INITIALIZE, "rootUri": "file:///",
                                            "initializationOptions": {"token": "r-token"}})
    connection.notify("initialized", {})
    for uri in (f"file://{tokens.as_posix().lstrip('/')}", "file://etc/hostname"):
        error = await refusal(connection.request("memory/read", {"uri": uri}))
        assert isinstance(error, RpcError) and error.code == -32004, uri
    denied = await refusal(connection.request("memory/write", {"uri": "kv://pwn/x", "value": 1}))
    assert "may not call memory/write" in denied.message
    assert (await connection.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    await connection.close()
    assert not (Path("/") / ".codebolt").exists()
    # started where no .codebolt/ is found (a service manager's "/"): refused, not the folder served
    outside = tmp_path / "nowhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CONTEXT_ASSEMBLY_TOKEN"}
    refused = subprocess.run([*SERVER, "--tcp", "127.0.0.1:0", "--token-file", str(tokens)], cwd=outside, env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "with a token, give the workspace to serve (--workspace DIR)" in refused.stderr


async def test_a_read_outside_the_policy_is_refused_and_logged(workspace: Path, policed: Served) -> None:
    reader = await client(policed.port, "r-token")
    assert (await reader.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    error = await refusal(reader.request("memory/read", {"uri": "kv://notes/secret"}))
    assert isinstance(error, RpcError) and error.code == -32004
    assert error.message == "the token 'reader' may not read kv://notes/secret"
    denied = await refusal(reader.request("memory/write", {"uri": "kv://users/u-ada", "value": 1}))
    assert "may not call memory/write" in denied.message
    await reader.close()
    logged = refusals(workspace)
    assert {(e["token"], e["method"]) for e in logged} >= {("reader", "memory/read"), ("reader", "memory/write")}
    assert all(e["peer"].startswith("127.0.0.1:") for e in logged)


async def test_a_write_outside_the_policy_is_refused_and_nothing_is_written(workspace: Path,
                                                                            policed: Served) -> None:
    writer = await client(policed.port, "w-token", settings={"access": {"writer": {}}})  # cannot widen itself
    before = await writer.request("memory/read", {"uri": "kv://users/u-ada"})
    assert (await writer.request("memory/write", {"uri": "kv://notes/a", "value": "ok"}))["written"] is True
    error = await refusal(writer.request("memory/write", {"uri": "kv://users/u-ada", "value": {"tone": "x"}}))
    assert isinstance(error, RpcError) and error.code == -32004
    assert error.message == "the token 'writer' may not write kv://users/u-ada"
    assert await writer.request("memory/read", {"uri": "kv://users/u-ada"}) == before
    assert "may not call contextAssembly/assemble" in (await refusal(writer.request(
        "contextAssembly/assemble", {"input": {"text": "x"}}))).message
    await writer.close()
    nobody = await client(policed.port, "n-token")
    assert "no entry in the access policy" in (await refusal(nobody.request(
        "memory/read", {"uri": "kv://users/u-ada"}))).message
    await nobody.close()
    assert any(e["token"] == "writer" and e.get("uri") == "kv://users/u-ada" for e in refusals(workspace))


# -- TLS -----------------------------------------------------------------------------------------


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM), made by the openssl command."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def test_tls(workspace: Path, served: list[Served], tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    served.append(server := await start(workspace, "tcp", "--tls-cert", str(cert), "--tls-key", str(key),
                                        token=TOKEN))
    assert server.scheme == "tls"
    context = ssl.create_default_context(cafile=str(cert))
    connection = await client(server.port, TOKEN, tls=context)
    assert (await connection.request("memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True
    await connection.close()
    plain = Connection()
    await plain.connect_tcp("127.0.0.1", server.port)
    error = await refusal(asyncio.wait_for(plain.request("initialize", INITIALIZE), 20))
    assert isinstance(error, ConnectionLost)  # no plain text on a TLS port


async def test_websocket_over_tls(workspace: Path, served: list[Served], tmp_path: Path) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidMessage

    cert, key = certificate(tmp_path)
    served.append(server := await start(workspace, "ws", "--tls-cert", str(cert), "--tls-key", str(key),
                                        token=TOKEN))
    assert server.scheme == "wss"
    trusted = ssl.create_default_context(cafile=str(cert))
    async with connect(f"wss://127.0.0.1:{server.port}", ssl=trusted) as websocket:
        async def ask(msg_id: int, method: str, params: Any) -> Any:
            await websocket.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
            return json.loads(await asyncio.wait_for(websocket.recv(), 30))

        answer = await ask(1, "initialize", {**INITIALIZE, "initializationOptions": {"token": TOKEN}})
        assert answer["result"]["serverInfo"]["name"] == "context-assembly"
        assert (await ask(2, "memory/read", {"uri": "kv://users/u-ada"}))["result"]["exists"] is True
    with pytest.raises(ssl.SSLCertVerificationError):  # a client that does not trust the certificate
        await connect(f"wss://127.0.0.1:{server.port}", ssl=ssl.create_default_context())
    with pytest.raises((InvalidMessage, ConnectionError, EOFError)):  # no plain WebSocket on a TLS port
        await asyncio.wait_for(connect(f"ws://127.0.0.1:{server.port}", open_timeout=20), 30)


def test_a_token_is_found_only_when_it_is_whole_and_exact() -> None:
    tokens = {"reader": "r-token-1", "writer": "w-token-22"}
    assert token_name(tokens, "r-token-1") == "reader" and token_name(tokens, "w-token-22") == "writer"
    for presented in ("r-token-", "r-token-12", "R-TOKEN-1", "", None, 12, ["r-token-1"], "\ud800", "r-token-1 "):
        assert token_name(tokens, presented) is None, presented
    assert load_tokens(None, {"CONTEXT_ASSEMBLY_TOKEN": "  env-token\n"}) == {"default": "env-token"}
    assert load_tokens(None, {"CONTEXT_ASSEMBLY_TOKEN": "   "}) == {}
