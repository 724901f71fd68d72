"""Hostile bytes on the server's stdin: after each, the process is alive and a valid request that
follows is still answered (SPEC §10). Raw pipes, since no LSP client library sends such input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import RawServer, frame

READ = {"jsonrpc": "2.0", "method": "memory/read", "params": {"uri": "kv://users/u-ada"}}


@pytest.fixture(scope="module")
def raw(workspace: Path) -> Iterator[RawServer]:
    server = RawServer(workspace)
    server.initialize()
    yield server
    assert server.close() == 0


def still_serving(raw: RawServer, msg_id: str) -> None:
    raw.send(frame({**READ, "id": msg_id}))
    assert raw.answer(msg_id)["result"]["exists"] is True
    assert raw.alive()


HOSTILE = {
    "invalid-json": b"Content-Length: 9\r\n\r\n{not json",
    "invalid-utf8": b"Content-Length: 6\r\n\r\n\xff\xfe{}\xc3\x28",
    "lone-surrogate": frame(b'{"jsonrpc":"2.0","id":"s","method":"memory/read","params":{"uri":"\\ud800"}}'),
    "batch": frame(b'[{"jsonrpc":"2.0","id":"b1","method":"memory/read","params":{}}]'),
    "not-an-object": frame(b"42"),
    "no-jsonrpc": frame(b'{"id":"n","method":"memory/read"}'),
    "non-numeric-length": b"Content-Length: twelve\r\n\r\n{}",
    "no-length": b"Content-Type: application/json\r\n\r\n",
    "length-too-short": b"Content-Length: 2\r\n\r\n" + b'{"jsonrpc":"2.0"}',
    "length-too-long": b"Content-Length: 60\r\n\r\n{}",  # swallows the start of the next message
    "huge-length": b"Content-Length: 99999999999999\r\n\r\n",
    "junk-without-newline": b"\x00garbage" * 20000,
    "empty-body": b"Content-Length: 0\r\n\r\n",
    "null-id": frame(b'{"jsonrpc":"2.0","id":null,"method":"memory/read","params":{"uri":"kv://x"}}'),
    "params-array": frame(b'{"jsonrpc":"2.0","id":"p","method":"memory/read","params":["kv://x"]}'),
    "deep-nesting": frame(b'{"jsonrpc":"2.0","id":"d","method":"memory/write","params":{"uri":"kv://d","value":'
                          + b"[" * 5000 + b"]" * 5000 + b"}}"),
    "lsp-params-wrong": frame(b'{"jsonrpc":"2.0","id":"w","method":"textDocument/didOpen","params":{"x":1}}'),
    "integer-beyond-64-bits": frame(b'{"jsonrpc":"2.0","id":"i","method":"memory/write",'
                                    b'"params":{"uri":"kv://big","value":18446744073709551617}}'),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_leaves_the_server_serving(raw: RawServer, name: str) -> None:
    raw.send(HOSTILE[name])
    still_serving(raw, f"after-{name}")


def test_answers_where_json_rpc_has_one(raw: RawServer) -> None:
    raw.send(HOSTILE["batch"])
    assert raw.answer("b1")["error"]["code"] == -32600
    raw.send(HOSTILE["params-array"])
    assert raw.answer("p")["error"]["code"] == -32602
    raw.send(HOSTILE["lone-surrogate"])
    assert raw.answer("s")["error"]["code"] == -32700  # the id is read from the unparsable body
    raw.send(HOSTILE["deep-nesting"])  # valid JSON, past what the parser reads: the nesting error, not a parse error
    error = raw.answer("d")["error"]
    assert error["code"] == -32602 and "nested too deeply (more than 1024 levels" in error["message"]
    # refused, not stored as 1.8446744073709552e+19 (orjson reads it as a float); the range's ends are kept
    raw.send(HOSTILE["integer-beyond-64-bits"])
    error = raw.answer("i")["error"]
    assert error["code"] == -32602 and "the integer 18446744073709551617 is outside the range" in error["message"]
    raw.send(frame({**READ, "id": "gone", "params": {"uri": "kv://big"}}))
    assert raw.answer("gone")["result"]["exists"] is False
    for n, value in enumerate((2**64 - 1, -(2**63))):
        raw.send(frame({"jsonrpc": "2.0", "id": f"w{n}", "method": "memory/write",
                        "params": {"uri": "kv://big", "value": value}}))
        assert "result" in raw.answer(f"w{n}")
        raw.send(frame({**READ, "id": f"r{n}", "params": {"uri": "kv://big"}}))
        assert raw.answer(f"r{n}")["result"]["value"] == value
    still_serving(raw, "at-the-end")


def test_a_request_before_initialize_and_an_exit_without_shutdown(workspace: Path) -> None:
    server = RawServer(workspace)
    server.send(frame({**READ, "id": 1}))
    assert server.answer(1)["error"]["code"] == -32002
    server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert server.process.wait(10) == 1  # LSP: exit without shutdown
