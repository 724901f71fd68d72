"""Hostile input at the transport: envelopes JSON-RPC answers in a set way, a message past
limits.request_bytes (answered, its body skipped unread, never a hang — over stdio, TCP and
WebSocket), text that is not UTF-8 or holds a lone surrogate (refused at its exact place). After
each, the server keeps serving."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client.connection import Connection, RpcError
from context_assembly.limits import DEFAULT

from .support import RawServer, clone, frame, start

READ = {"jsonrpc": "2.0", "method": "memory/read", "params": {"uri": "kv://users/u-ada"}}
LIMIT = 2048


@pytest.fixture(scope="module")
def raw(seeded_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    server = RawServer(clone(seeded_template, tmp_path_factory.mktemp("transport") / "ws"))
    server.initialize()
    yield server
    assert server.close() == 0


def still_serving(raw: RawServer, msg_id: str) -> None:
    raw.send(frame({**READ, "id": msg_id}))
    assert raw.answer(msg_id)["result"]["exists"] is True


def write_of_size(msg_id: str, size: int) -> bytes:
    """A memory/write body of exactly `size` bytes."""
    def body(pad: int) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "memory/write",
                           "params": {"uri": "kv://t/pad", "value": "x" * pad}}).encode()
    empty = len(body(0))
    result = body(size - empty)
    assert len(result) == size
    return result


def test_a_request_whose_id_is_an_object_gets_invalid_request_with_id_null(raw: RawServer) -> None:
    raw.send(frame(b'{"jsonrpc":"2.0","id":{"a":1},"method":"memory/read","params":{"uri":"kv://x"}}'))
    answer = raw.answer(None)
    assert answer["error"]["code"] == -32600
    assert "id must be a string or an integer" in answer["error"]["message"]
    still_serving(raw, "after-object-id")


def test_a_100_mb_request_is_answered_and_its_body_skipped(raw: RawServer) -> None:
    size = 100 * 1024 * 1024
    head = b'{"jsonrpc":"2.0","id":"huge","method":"memory/write","params":{"uri":"kv://t/huge","value":"'
    body = head + b"x" * (size - len(head) - 3) + b'"}}'
    raw.send(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    answer = raw.answer("huge", timeout=120)
    assert answer["error"]["code"] == -32600
    assert answer["error"]["data"] == {"size": size, "limit": 64 * 1024 * 1024}
    assert "limits.request_bytes" in answer["error"]["message"]
    still_serving(raw, "after-huge")  # the next message was not swallowed
    raw.send(frame({**READ, "id": "gone", "params": {"uri": "kv://t/huge"}}))
    assert raw.answer("gone")["result"]["exists"] is False


def test_an_escaped_lone_surrogate_is_refused_at_its_place(raw: RawServer) -> None:
    body = b'{"jsonrpc":"2.0","id":"s","method":"memory/read","params":{"uri":"kv://\\ud800"}}'
    raw.send(frame(body))
    answer = raw.answer("s")
    assert answer["error"]["code"] == -32700
    column = body.index(b"\\ud800") + 1
    assert f"line 1 column {column}" in answer["error"]["message"]
    still_serving(raw, "after-surrogate")


def test_bytes_that_are_not_utf8_are_refused_at_their_place(raw: RawServer) -> None:
    body = b'{"jsonrpc":"2.0","id":"u",\n"method":"memory/read","params":{"uri":"kv://\xed\xa0\x80"}}'
    raw.send(frame(body))
    answer = raw.answer("u")
    assert answer["error"]["code"] == -32700
    byte = body.index(b"\xed")
    column = byte - body.index(b"\n")
    assert f"line 2 column {column} (byte {byte})" in answer["error"]["message"]
    still_serving(raw, "after-not-utf8")


@pytest.fixture(scope="module")
def limited(seeded_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    server = RawServer(clone(seeded_template, tmp_path_factory.mktemp("limited") / "ws"))
    server.initialize({"settings": {"limits": {"request_bytes": LIMIT}}})
    yield server
    assert server.close() == 0


def test_a_request_at_the_size_limit_is_served(limited: RawServer) -> None:
    limited.send(frame(write_of_size("at", LIMIT)))
    assert limited.answer("at")["result"]["written"] is True


def test_a_request_one_byte_past_the_size_limit_is_refused(limited: RawServer) -> None:
    limited.send(frame(write_of_size("past", LIMIT + 1)))
    error: dict[str, Any] = limited.answer("past")["error"]
    assert error["code"] == -32600
    assert error["data"] == {"size": LIMIT + 1, "limit": LIMIT}
    still_serving(limited, "after-past")


INITIALIZE: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {},
                              "initializationOptions": {"settings": {"limits": {"request_bytes": LIMIT}}}}


async def test_over_tcp_a_message_past_the_limit_is_answered_and_skipped(seeded_template: Path,
                                                                         tmp_path: Path) -> None:
    served = await start(clone(seeded_template, tmp_path / "ws"), "tcp")
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", served.port)
    await connection.request("initialize", INITIALIZE)
    with pytest.raises(RpcError) as caught:
        await connection.request("memory/write", {"uri": "kv://t/big", "value": "x" * LIMIT})
    assert caught.value.code == -32600 and "limits.request_bytes" in caught.value.message
    assert (await connection.request("memory/read", {"uri": "kv://t/big"}))["exists"] is False
    await connection.close()
    assert await served.stop() == 0


async def test_over_websocket_a_message_past_the_limit_is_answered_and_one_past_the_frame_bound_closed(
        seeded_template: Path, tmp_path: Path) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    served = await start(clone(seeded_template, tmp_path / "ws"), "ws")
    async with connect(f"ws://127.0.0.1:{served.port}", max_size=None) as websocket:
        async def ask(message: bytes | str) -> Any:
            await websocket.send(message)
            return json.loads(await asyncio.wait_for(websocket.recv(), 60))

        assert "result" in await ask(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                 "params": INITIALIZE}))
        answer = await ask(write_of_size("past", LIMIT + 1))
        assert answer["id"] == "past" and answer["error"]["code"] == -32600
        assert answer["error"]["data"] == {"size": LIMIT + 1, "limit": LIMIT}
        assert (await ask(write_of_size("at", LIMIT)))["result"]["written"] is True
        # Past the WebSocket layer's own bound (the default request limit) the frame is never read:
        # the connection is closed with 1009, message too big, at once.
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ask(b"x" * (DEFAULT.request_bytes + 1)), 120)
        assert websocket.close_code == 1009
    assert await served.stop() == 0
