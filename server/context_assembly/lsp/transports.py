"""Serving the protocol over stdio (default), TCP or WebSocket (SPEC §8).

All three feed message bodies to `ContextAssemblyProtocol.receive`; stdio and TCP through the
tolerant `FrameReader`, WebSocket one message per frame (text or binary; answers go out as text
frames, in order, from one sender task). TCP and WebSocket serve one client connection at a time
(the sidecar belongs to one agent or editor): a second concurrent connection is refused, and the
process ends when the connection does, as it does when stdin closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from . import pygls_compat as compat
from .framing import FileDescriptorSource, FrameReader, StreamSource
from .server import ContextAssemblyServer

logger = logging.getLogger(__name__)

Announce = Callable[[str], None]


class PipeWriter:
    """stdout as pygls' writer: whole frames, flushed."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        self.stream.write(data)
        self.stream.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.close()


class QueuedWebSocketWriter:
    """Sends each message as a text frame, in the order written, from one task."""

    def __init__(self, websocket: Any) -> None:
        self.websocket = websocket
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while (text := await self.queue.get()) is not None:
            try:
                await self.websocket.send(text)
            except Exception as exc:  # the connection closed: the reader ends the session
                logger.warning("websocket send failed: %s", exc)
                return

    def write(self, data: bytes) -> None:
        self.queue.put_nowait(data.decode("utf-8"))

    def close(self) -> None:
        self.queue.put_nowait(None)


async def _until_stopped(server: ContextAssemblyServer, work: Awaitable[Any]) -> None:
    """Run `work` until it ends or `exit` asks the server to stop."""
    assert server.stop_requested is not None
    reading = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(server.stop_requested.wait())
    await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    for task in (reading, stopping):
        task.cancel()
    await asyncio.gather(reading, stopping, return_exceptions=True)


async def _pump(server: ContextAssemblyServer, reader: FrameReader) -> None:
    protocol = server.protocol
    while (body := await reader.next_body()) is not None:
        if not protocol.receive(body):
            reader.resync(body)
        await asyncio.sleep(0)  # let answers and cancellations through between messages


def _reader(source: Any) -> FrameReader:
    return FrameReader(source, on_problem=lambda message: logger.warning("input: %s", message))


async def serve_stdio(server: ContextAssemblyServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    server.protocol.set_writer(PipeWriter(stdout), include_headers=True)
    await _until_stopped(server, _pump(server, _reader(FileDescriptorSource(stdin.fileno()))))


async def serve_tcp(server: ContextAssemblyServer, host: str, port: int, announce: Announce) -> None:
    finished = asyncio.Event()
    busy = False

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal busy
        if busy:
            writer.close()
            return
        busy = True
        server.protocol.set_writer(writer, include_headers=True)
        try:
            await _until_stopped(server, _pump(server, _reader(StreamSource(reader))))
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            finished.set()

    listener = await asyncio.start_server(connection, host, port)
    address = listener.sockets[0].getsockname()
    announce(f"tcp://{_netloc(address)}")
    async with listener:
        await finished.wait()


async def serve_ws(server: ContextAssemblyServer, host: str, port: int, announce: Announce) -> None:
    from websockets.asyncio.server import ServerConnection, serve

    finished = asyncio.Event()
    busy = False

    async def connection(websocket: ServerConnection) -> None:
        nonlocal busy
        if busy:
            await websocket.close(1013, "the server already has a client")
            return
        busy = True
        writer = QueuedWebSocketWriter(websocket)
        server.protocol.set_writer(writer, include_headers=False)

        async def receive() -> None:
            async for message in websocket:
                server.protocol.receive(message.encode("utf-8", "surrogatepass") if isinstance(message, str)
                                        else message)

        try:
            await _until_stopped(server, receive())
        except Exception as exc:  # the connection dropped
            logger.warning("websocket connection ended: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.task, 2)
                await websocket.close()
            finished.set()

    async with serve(connection, host, port) as listener:
        address = next(iter(listener.sockets)).getsockname()
        announce(f"ws://{_netloc(address)}")
        await finished.wait()


def _netloc(address: Any) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run(server: ContextAssemblyServer, transport: str = "stdio", host: str = "127.0.0.1", port: int = 0,
        announce: Announce | None = None) -> int:
    """Serve until the client exits or disconnects; the exit status LSP asks for (0 after shutdown)."""
    say = announce or (lambda address: print(f"context-assembly: listening on {address}", file=sys.stderr,
                                             flush=True))

    async def main() -> None:
        server.attach(asyncio.get_running_loop())
        if transport == "tcp":
            await serve_tcp(server, host, port, say)
        elif transport == "ws":
            await serve_ws(server, host, port, say)
        else:
            stdout = sys.stdout.buffer
            sys.stdout = sys.stderr  # nothing but the protocol may reach the real stdout
            await serve_stdio(server, sys.stdin.buffer, stdout)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        return 130
    finally:
        server.close()
    if server.exit_code is not None:
        return server.exit_code
    return 0 if compat.shutting_down(server.protocol) else 1
