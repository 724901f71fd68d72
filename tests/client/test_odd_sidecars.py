"""The client against sidecars that misbehave in ways a real one can: exits at start, answers more
than 64 MiB, reads its input to the end before leaving. A scripted stand-in plays each part."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from context_assembly.client import ContextAssemblyClient, SyncContextAssemblyClient
from context_assembly.client.connection import ConnectionLost

STAND_IN = r'''
import json, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
mode = sys.argv[1]
def send(message):
    body = json.dumps(message).encode()
    out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    out.flush()
def read():
    length = None
    while True:
        line = inp.readline()
        if not line:
            return None
        if not line.strip():
            if length is not None:
                return json.loads(inp.read(length))
            continue
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
while (message := read()) is not None:
    method, ident = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {"capabilities": {}}})
    elif method == "big":
        send({"jsonrpc": "2.0", "id": ident, "result": {"s": "a" * (65 << 20)}})
    elif method == "raw":
        send({"jsonrpc": "2.0", "id": ident, "result": {"had_params": "params" in message}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": ident, "result": None})
    elif method == "exit" and mode == "normal":
        sys.exit(0)
# mode "reads-to-the-end": leaves only once its input is closed
'''


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return script


EXITS = [sys.executable, "-c", "import sys; sys.stderr.write('ModuleNotFoundError: pygls\\n'); sys.exit(3)"]


@pytest.mark.asyncio
async def test_a_sidecar_that_exits_at_start_is_a_clear_error(tmp_path: Path) -> None:
    """It was a bare ProcessLookupError (killing a process already gone), the real error lost."""
    for _ in range(5):  # the race between the exit and the kill went both ways
        with pytest.raises(ConnectionLost):
            async with ContextAssemblyClient(tmp_path, command=EXITS):
                pass


def test_the_sync_client_too(tmp_path: Path) -> None:
    for _ in range(3):
        with pytest.raises(ConnectionLost), SyncContextAssemblyClient(tmp_path, command=EXITS):
            pass


@pytest.mark.asyncio
async def test_an_answer_over_64_mib_arrives(tmp_path: Path, stand_in: Path) -> None:
    """It was refused as oversized and its body read as header lines: the call never returned."""
    async with ContextAssemblyClient(tmp_path, command=[sys.executable, str(stand_in), "normal"]) as client:
        answer = await asyncio.wait_for(client.request("big"), 120)  # it hung: fail, do not hang
        assert len(answer["s"]) == 65 << 20
        assert await client.request("raw", {"x": 1}) == {"had_params": True}


@pytest.mark.asyncio
async def test_a_request_without_params_leaves_them_out(tmp_path: Path, stand_in: Path) -> None:
    """JSON-RPC 2.0: params are structured or absent (it sent `"params": null`)."""
    async with ContextAssemblyClient(tmp_path, command=[sys.executable, str(stand_in), "normal"]) as client:
        assert await client.request("raw") == {"had_params": False}


@pytest.mark.asyncio
async def test_close_ends_the_input_so_a_sidecar_reading_it_to_the_end_exits(tmp_path: Path, stand_in: Path) -> None:
    """A wrapper (`cat | context-assembly serve`) leaves at end of input: close waited out its timeout
    and killed it (-9) with the input still open."""
    client = ContextAssemblyClient(tmp_path, command=[sys.executable, str(stand_in), "reads-to-the-end"], timeout=5)
    async with client:
        pass
    assert client.returncode == 0


def test_every_error_code_of_the_server_has_its_exception() -> None:
    """-32004 (a shared sidecar refusing a token) came back as a bare RpcError."""
    from context_assembly.client import ForbiddenError, RpcError, error_from
    from context_assembly.errors import (
        CancelledError,
        ConflictError,
        InvalidParamsError,
        NotFoundError,
        StorageError,
        TimeoutError_,
    )

    for cls in (NotFoundError, ConflictError, TimeoutError_, StorageError, CancelledError, InvalidParamsError):
        error = error_from(cls.code, "no", {"errors": []})
        assert type(error) is cls, cls
    forbidden = error_from(-32004, "no", None)
    assert isinstance(forbidden, ForbiddenError) and isinstance(forbidden, RpcError) and forbidden.code == -32004
    assert type(error_from(-32099, "other", None)) is RpcError


@pytest.mark.asyncio
async def test_a_lost_sidecar_says_how_it_ended_and_its_last_words(tmp_path: Path) -> None:
    """It said only "the sidecar closed the connection"."""
    with pytest.raises(ConnectionLost, match="exited with code 3$"):
        async with ContextAssemblyClient(tmp_path, command=EXITS):
            pass
    client = ContextAssemblyClient(tmp_path, command=EXITS, stderr=subprocess.PIPE)
    with pytest.raises(ConnectionLost, match="exited with code 3: ModuleNotFoundError: pygls"):
        async with client:
            pass
    assert "ModuleNotFoundError" in client.stderr_tail
