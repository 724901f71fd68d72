"""A web page the user opens cannot drive a loopback sidecar that has no token: a WebSocket
handshake from another origin is refused (cross-site hijacking, DNS rebinding), and a TCP
connection that starts as an HTTP request (a page's `fetch` carrying frames in its body) is
closed before any frame is read."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from context_assembly.lsp.framing import encode_json, frame

from .support import Served, clone, start

INITIALIZE: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {}}


@pytest.fixture
def workspace(seeded_template: Path, tmp_path: Path) -> Path:
    return clone(seeded_template, tmp_path / "ws")


async def _initialize_over(url: str, origin: str | None) -> dict[str, Any]:
    async with connect(url, origin=origin) as websocket:  # type: ignore[arg-type]
        await websocket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}))
        return dict(json.loads(await websocket.recv()))


async def test_a_websocket_from_another_origin_is_refused(workspace: Path, served: list[Served]) -> None:
    served.append(server := await start(workspace, "ws", "--allow-origin", "https://ui.example.com"))
    url = f"ws://127.0.0.1:{server.port}"
    for origin in ("https://evil.example.com", "http://localhost.evil.example.com:80", "null"):
        with pytest.raises(InvalidStatus) as refused:
            await _initialize_over(url, origin)
        assert refused.value.response.status_code == 403, origin
    for origin in (None, "http://localhost:5173", "https://127.0.0.1", "http://[::1]:8080", "https://ui.example.com"):
        assert "result" in await _initialize_over(url, origin), origin  # agents send none; pages of this machine


async def test_a_tcp_connection_that_starts_as_an_http_request_is_closed(workspace: Path,
                                                                         served: list[Served]) -> None:
    served.append(server := await start(workspace, "tcp"))
    frames = b"".join(frame(encode_json(m)) for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "memory/write",
         "params": {"uri": "markdown://pwned", "value": "written by a web page"}}))
    request = (b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example.com\r\n"
               b"Content-Type: text/plain\r\nContent-Length: " + str(len(frames)).encode() + b"\r\n\r\n" + frames)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 20)  # the server closes: end of input, nothing answered
    writer.close()
    assert b'"result"' not in answer
    assert not (workspace / ".codebolt" / "memory" / "pwned.md").exists()


async def test_a_flood_of_refused_handshakes_is_logged_at_a_bounded_rate(workspace: Path,
                                                                         served: list[Served]) -> None:
    """Each refused Origin was a warning line (before: a traceback): a page retrying in a loop
    filled the server's log. Peers' warnings are a burst, then one a second, with the count left out."""
    served.append(server := await start(workspace, "ws"))
    url = f"ws://127.0.0.1:{server.port}"

    async def refused() -> None:
        with pytest.raises(InvalidStatus):
            await _initialize_over(url, "https://evil.example.com")

    for _ in range(60):
        await refused()
    await asyncio.sleep(1.2)  # room for one more
    await refused()
    assert "result" in await _initialize_over(url, None)  # an agent is served meanwhile
    assert await server.stop() == 0
    said = [line for line in server.stderr if b"refused a WebSocket handshake" in line]
    assert 20 <= len(said) <= 23
    assert re.search(rb"\((\d+) more such warnings left out: rate limit\)", said[-1])
