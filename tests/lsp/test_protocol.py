"""The JSON-RPC layer in process (no subprocess): what each kind of bad message is answered with,
plain JSON for custom methods, domain errors → codes, and a handler that crashes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from lsprotocol import types

from context_assembly.errors import ConflictError, InvalidParamsError, NotFoundError, StorageError, TimeoutError_
from context_assembly.lsp import calls
from context_assembly.lsp.errors import to_rpc_error
from context_assembly.lsp.server import ContextAssemblyServer, build_server
from context_assembly.methods import MethodSpec


class Capture:
    """A writer that keeps what the server sends (no headers: one message per write)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.messages.append(orjson.loads(data))

    def close(self) -> None:
        pass


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[ContextAssemblyServer, Capture]]:
    server = build_server()
    server.attach(asyncio.get_running_loop())
    out = Capture()
    server.protocol.set_writer(out, include_headers=False)
    yield server, out
    server.close()


def answered(out: Capture, msg_id: Any) -> Any:
    """The last answer to `msg_id` written so far (None: none yet)."""
    found = [m for m in out.messages if m.get("id") == msg_id and "method" not in m]
    return found[-1] if found else None


async def reply(out: Capture, msg_id: Any, tries: int = 500) -> Any:
    """The answer to `msg_id`, waited for (10 ms a try)."""
    for _ in range(tries):
        found = answered(out, msg_id)
        if found is not None:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"no answer to {msg_id!r}")


async def answer(server: ContextAssemblyServer, out: Capture, body: bytes | dict[str, Any], msg_id: Any) -> Any:
    server.protocol.receive(body if isinstance(body, bytes) else orjson.dumps(body))
    return await reply(out, msg_id)


def request(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, **({} if params is None else {"params": params})}


async def test_before_initialize_custom_methods_say_so(server: tuple[ContextAssemblyServer, Capture]) -> None:
    reply = await answer(*server, request(1, "memory/read", {"uri": "kv://x"}), 1)
    assert reply["error"]["code"] == -32002


async def test_bad_messages_get_json_rpc_errors(server: tuple[ContextAssemblyServer, Capture],
                                                tmp_path: Path) -> None:
    srv, out = server
    assert (await answer(srv, out, b"{nope", None))["error"]["code"] == -32700
    deep = b'{"jsonrpc":"2.0","id":41,"method":"memory/write","params":{"v":' + b"[" * 100000 + b"]" * 100000 + b"}}"
    reply = await answer(srv, out, deep, 41)  # the id is told even though the parser stops: nested too deeply
    assert reply["error"]["code"] == -32602 and "nested too deeply" in reply["error"]["message"]
    assert (await answer(srv, out, b'"just a string"', None))["error"]["code"] == -32600
    batch = orjson.dumps([request(7, "memory/read"), request(8, "memory/read")])
    assert (await answer(srv, out, batch, 8))["error"]["code"] == -32600
    assert any(m.get("id") == 7 and m["error"]["code"] == -32600 for m in out.messages)
    for bad in ({"id": 9, "method": "memory/read"},  # no jsonrpc
                {"jsonrpc": "2.0", "id": 9, "method": 5},
                {"jsonrpc": "2.0", "id": 9, "method": "memory/read", "params": "x"},
                {"jsonrpc": "2.0", "id": 9}):
        assert (await answer(srv, out, bad, 9))["error"]["code"] == -32600, bad
    weird_id = await answer(srv, out, {"jsonrpc": "2.0", "id": [1], "method": "memory/read"}, None)
    assert weird_id["error"]["code"] == -32600
    structured = await answer(srv, out, request(10, "initialize", {"capabilities": 5}), 10)
    assert structured["error"]["code"] == -32602
    # before a good initialize every request but initialize is -32002 (LSP), an unknown method too
    assert (await answer(srv, out, request(11, "no/such"), 11))["error"]["code"] == -32002
    assert (await answer(srv, out, request(12, types.SHUTDOWN), 12))["error"]["code"] == -32002
    assert (await answer(srv, out, request(13, types.TEXT_DOCUMENT_HOVER, {
        "textDocument": {"uri": "file:///x.json"}, "position": {"line": 0, "character": 0}}), 13))["error"][
        "code"] == -32002
    initialized = await answer(srv, out, request(14, types.INITIALIZE, {"processId": None, "capabilities": {},
                                                                      "rootUri": tmp_path.as_uri()}), 14)
    assert "result" in initialized  # the shutdown before it did not count
    assert (await answer(srv, out, request(15, "no/such"), 15))["error"]["code"] == -32601


async def test_custom_params_and_results_stay_plain(server: tuple[ContextAssemblyServer, Capture],
                                                   tmp_path: Path) -> None:
    srv, out = server
    srv.open(tmp_path, {}, llm_offered=False)
    value = {"scope.agent.agent_name": 1, "$schema": "s", "class": {"jsonrpc": "2.0", "id": 3, "method": "x"}}
    await answer(srv, out, request("w", "memory/write", {"uri": "kv://a", "value": value}), "w")
    reply = await answer(srv, out, request("r", "memory/read", {"uri": "kv://a"}), "r")
    assert reply["result"] == {"uri": "kv://a", "exists": True, "value": value}
    message = srv.protocol.structure_message(request(1, "contextAssembly/assemble", {"scope.x": 1}))
    assert message.params == {"scope.x": 1}
    # the server's own notifications are sent as given, not taken for custom requests
    srv.protocol.notify("contextAssembly/started", {"assembly_id": "a", "scope.x": 1})
    assert out.messages[-1] == {"jsonrpc": "2.0", "method": "contextAssembly/started",
                                "params": {"assembly_id": "a", "scope.x": 1}}


async def test_a_crashing_handler_answers_internal_error_and_the_server_goes_on(
        server: tuple[ContextAssemblyServer, Capture], tmp_path: Path) -> None:
    srv, out = server
    srv.open(tmp_path, {}, llm_offered=False)

    def boom(session: Any, params: Any, ctx: Any) -> Any:
        raise RuntimeError("the disk caught fire")

    spec = MethodSpec("test/boom", boom)
    srv.feature(spec.name)(calls._handler(srv, spec.name))
    srv.protocol.plain_methods = srv.protocol.plain_methods | {spec.name}
    from context_assembly.methods import table

    table.METHODS[spec.name] = spec
    try:
        reply = await answer(srv, out, request(1, "test/boom", {}), 1)
    finally:
        del table.METHODS[spec.name]
    assert reply["error"]["code"] == -32603
    assert reply["error"]["message"] == "RuntimeError: the disk caught fire"
    assert (await answer(srv, out, request(2, "memory/read", {"uri": "kv://x"}), 2))["result"]["exists"] is False


async def test_after_shutdown_requests_are_refused(server: tuple[ContextAssemblyServer, Capture],
                                                   tmp_path: Path) -> None:
    srv, out = server
    srv.open(tmp_path, {}, llm_offered=False)
    assert (await answer(srv, out, request(1, types.SHUTDOWN), 1))["result"] is None
    assert (await answer(srv, out, request(2, "memory/read", {"uri": "kv://x"}), 2))["error"]["code"] == -32600
    srv.protocol.receive(orjson.dumps({"jsonrpc": "2.0", "method": "exit"}))
    assert srv.exit_code == 0


def test_domain_errors_map_to_their_codes() -> None:
    cases = [(InvalidParamsError("bad", [{"path": "/id", "message": "is required"}]), -32602),
             (NotFoundError("gone", {"id": "x"}), -32001), (ConflictError("taken"), -32003),
             (TimeoutError_("slow"), -32005), (StorageError("disk"), -32006), (ValueError("oops"), -32603)]
    for exc, code in cases:
        error = to_rpc_error(exc)
        assert error.code == code
    assert to_rpc_error(cases[0][0]).data == {"errors": [{"path": "/id", "message": "is required"}]}
    assert to_rpc_error(ValueError("oops")).message == "ValueError: oops"


async def test_watched_files_and_pushed_settings(server: tuple[ContextAssemblyServer, Capture],
                                                 tmp_path: Path) -> None:
    srv, out = server
    await answer(srv, out, request(1, types.INITIALIZE, {"processId": None, "rootUri": tmp_path.as_uri(),
                                                          "capabilities": {}}), 1)
    session = srv.require_session()
    changed: list[Any] = []
    srv.on_workspace_changed.append(changed.append)
    srv.protocol.receive(orjson.dumps({"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles", "params": {
        "changes": [{"uri": (tmp_path / ".codebolt/context-rule-engines/x.json").as_uri(), "type": 1}]}}))
    # a client that cannot be asked for its configuration pushes it
    srv.protocol.receive(orjson.dumps({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": {
        "settings": {"contextAssembly": {"max_tokens": 777, "tokenizer": "no-such"}}}}))
    for _ in range(500):
        if changed and session.overrides:
            break
        await asyncio.sleep(0.01)
    assert changed == [session]
    assert session.overrides == {"max_tokens": 777}  # the refused key is dropped, the rest applies
    assert session.settings().max_tokens == 777


async def test_edits_leave_no_handler_futures_behind(server: tuple[ContextAssemblyServer, Capture],
                                                     tmp_path: Path) -> None:
    """pygls files a future per notification handled by a generator (didOpen/didChange/didClose) and
    never removes it: one per edit for the life of the connection, unless the protocol drops it."""
    from context_assembly.lsp import pygls_compat as compat

    srv, out = server
    init = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
    assert "result" in await answer(srv, out, request(0, types.INITIALIZE, init), 0)
    srv.protocol.receive(orjson.dumps({"jsonrpc": "2.0", "method": types.INITIALIZED, "params": {}}))
    uri = (tmp_path / ".codebolt" / "context-rules" / "a.json").as_uri()
    srv.protocol.receive(orjson.dumps({"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_OPEN, "params": {
        "textDocument": {"uri": uri, "languageId": "json", "version": 1, "text": "{}"}}}))
    for version in range(2, 202):
        srv.protocol.receive(orjson.dumps({"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_CHANGE, "params": {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"text": f'{{"id": "r{version}"}}'}]}}))
    assert srv.protocol.workspace.get_text_document(uri).version == 201
    for _ in range(5):
        await asyncio.sleep(0)  # done-callbacks of asyncio futures run on the loop
    pending = compat.pending_requests(srv.protocol)
    assert [key for key, future in pending.items() if future.done()] == []
    assert len(pending) < 5  # what is left: the server's own requests the client has not answered
    assert (await answer(srv, out, request(1, "memory/read", {"uri": "kv://x"}), 1))["result"]["exists"] is False


async def test_work_refused_by_a_closed_connection_is_cancelled_not_an_internal_error(
        server: tuple[ContextAssemblyServer, Capture], caplog: pytest.LogCaptureFixture) -> None:
    """An editor request arriving as its connection closes: its worker pool takes no more work."""
    from concurrent.futures import Future

    from context_assembly.lsp.workers import ConnectionClosed

    srv, out = server
    refused: Future[Any] = Future()
    refused.set_exception(ConnectionClosed("the connection is closed: no new work"))
    srv.protocol.answer_request(refused, 7)  # type: ignore[arg-type]
    assert (await reply(out, 7))["error"]["code"] == -32800
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
