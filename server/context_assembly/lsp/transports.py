"""Serving the protocol over stdio (default), TCP or WebSocket (SPEC §8).

All three feed message bodies to `ContextAssemblyProtocol.receive`; stdio and TCP through the
tolerant `FrameReader` (stdin read by the event loop itself when it is a pipe or a socket, by a
thread otherwise; stdout written by whichever thread answers, one whole frame at a time),
WebSocket one message per frame (text or binary; answers go out as text frames, in order, from
one sender task). TCP and WebSocket serve many clients at once (up to
`--max-connections`), each its own session over one shared runtime (stores, compiled engines, the
result cache), optionally over TLS and behind a token; the process serves until SIGTERM or SIGINT.
A network client's next message is read only while less than `OUTPUT_HIGH_WATER` of its answers
is unsent (one that sends and never reads held them all in memory) and fewer than
`--max-in-flight` of its requests are unanswered (`in_flight.py`), and a closing connection is
dropped after `FLUSH_S`, at once when it never presented a valid token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from attrs import define, field

from ..limits import DEFAULT as DEFAULT_LIMITS
from . import pygls_compat as compat
from .framing import (
    OVERSIZED_HEAD,
    FrameReader,
    PipeSource,
    StreamSource,
    encode_json,
    frame,
    input_source,
    widen_pipe,
)
from .in_flight import MAX_IN_FLIGHT, InFlight
from .polling import DEFAULT_MS, loop_factory
from .refusals import peer_warning
from .server import ContextAssemblyServer

logger = logging.getLogger(__name__)

Announce = Callable[[str], None]
AUTH_TIMEOUT_S = 10.0  # a TCP/WebSocket client has this long to present a valid token (`initialize`)
DRAIN_S = 5.0  # how long a stopping network server waits for its connections to close
HANDSHAKE_S = 10.0  # a TLS handshake not done by then is dropped (asyncio's default held a socket 60 s)
# bytes of answers a TCP/WebSocket connection may have unsent before its next message waits: room
# for a pipelining client's answers, a bound on what a client that never reads costs (per connection)
OUTPUT_HIGH_WATER = 1 << 20
PING_S = 20.0  # WebSocket keepalive: a ping this often, the connection closed when its pong is this late
ANSWERS_S = 30.0  # a TCP client that half-closed gets the answers of what it sent for this long
FLUSH_S = 3.0  # a closing connection's unsent answers get this long (then it is dropped): below DRAIN_S
# a page of this machine (http(s)://localhost, 127.0.0.1 or [::1], any port): a WebSocket Origin let in
LOOPBACK_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?")


def _close_if_locked(server: ContextAssemblyServer, after_s: float) -> None:
    if server.locked:
        peer_warning(logger, "closed the connection of %s: no valid token within %g s", server.peer or "a client",
                     after_s)
        server.request_stop()


class GoneWriter:
    """A closed connection's writer: what its requests still running answer is dropped (written to
    the lost socket, each answer logged an asyncio warning, hundreds after a busy client left)."""

    threadsafe = False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


class StreamWriter:
    """A TCP connection's writer (on the event loop only): what is written once the connection is
    closing is dropped (asyncio logged a warning for each write to a lost socket)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    def write(self, data: bytes) -> None:
        if not self.writer.transport.is_closing():
            self.writer.write(data)

    def close(self) -> None:
        self.writer.close()


class PipeWriter:
    """stdout as pygls' writer: whole frames, flushed, one at a time from any thread (workers
    write their own answers, see `protocol.Answer`)."""

    threadsafe = True

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self._closed = False

    def write(self, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise BrokenPipeError("the output is closed")
            self.stream.write(data)
            self.stream.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            with contextlib.suppress(OSError, ValueError):
                self.stream.close()


class QueuedWebSocketWriter:
    """Sends each message as a text frame, in the order written, from one task (on the event loop,
    as every write is: the writer is not thread-safe). Counts the bytes queued and not yet sent:
    over `high_water` the session reads no further message (`room`), as `websocket.send` waits
    while the client reads nothing."""

    def __init__(self, websocket: Any, high_water: int = OUTPUT_HIGH_WATER) -> None:
        self.websocket = websocket
        self.high_water = high_water
        self.queue: asyncio.Queue[tuple[str, int] | None] = asyncio.Queue()  # (text, its size in bytes)
        self.queued = 0
        self._room = asyncio.Event()
        self._room.set()
        self._failed = False
        self.task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while (item := await self.queue.get()) is not None:
            text, size = item
            try:
                await self.websocket.send(text)
            except Exception as exc:  # the connection closed: the reader ends the session
                logger.warning("websocket send failed: %s", exc)
                self._failed = True
                self._room.set()  # nothing leaves the queue any more: the reader must not wait on it
                return
            self.queued -= size
            if self.queued <= self.high_water:
                self._room.set()

    def write(self, data: bytes) -> None:
        if self._failed:
            return
        # decoded now, a compact copy: an encoder's output (`data`) held a few KiB each while queued
        self.queue.put_nowait((data.decode("utf-8"), len(data)))
        self.queued += len(data)
        if self.queued > self.high_water:
            self._room.clear()

    async def room(self) -> None:
        """Wait while more than `high_water` bytes are queued."""
        await self._room.wait()

    def close(self) -> None:
        self.queue.put_nowait(None)


class Inbox:
    """A WebSocket connection's messages read ahead of their turn, up to `most` bytes (then one more
    message). websockets stops reading the socket while its own queue is full, and with it the
    client's keepalive pongs: a client held at the in-flight cap or behind its unread answers, its
    next two messages sent, was closed after 40 s ("keepalive ping timeout", 1011) however well it
    behaved. Read on into here, the pongs go through until the client sends `most` bytes ahead."""

    def __init__(self, most: int = OUTPUT_HIGH_WATER) -> None:
        self.most = most
        self.items: deque[bytes] = deque()
        self.size = 0
        self._arrived = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()

    async def put(self, body: bytes) -> None:
        self.items.append(body)
        self.size += len(body)
        self._arrived.set()
        if self.size >= self.most:
            self._space.clear()
            await self._space.wait()

    async def get(self) -> bytes:
        while not self.items:
            self._arrived.clear()
            await self._arrived.wait()
        body = self.items.popleft()
        self.size -= len(body)
        if self.size < self.most:
            self._space.set()
        return body


async def _until_stopped(server: ContextAssemblyServer, work: Awaitable[Any]) -> None:
    """Run `work` until it ends or `exit` asks the server to stop."""
    assert server.stop_requested is not None
    reading = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(server.stop_requested.wait())
    await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    for task in (reading, stopping):
        task.cancel()
    await asyncio.gather(reading, stopping, return_exceptions=True)


async def _pump(server: ContextAssemblyServer, reader: FrameReader,
                room: Callable[[], Awaitable[None]] | None = None) -> None:
    """`room`: awaited before the next message is read (TCP: while the client has too many
    answers unsent; stdio has none). A network connection's message read while it has too many
    requests in progress is held until it has room (`InFlight.room`)."""
    protocol = server.protocol
    while (body := await reader.next_body()) is not None:
        if protocol.in_flight is not None and protocol.in_flight.full() and not protocol.passes_cap(body):
            await protocol.in_flight.room()
        if not protocol.receive(body):
            reader.resync(body)
        if room is not None:
            await room()
        await asyncio.sleep(0)  # let answers and cancellations through between messages


def _reader(server: ContextAssemblyServer, source: Any) -> FrameReader:
    return FrameReader(source, max_body=server.request_limit, on_oversized=server.protocol.refuse_oversized,
                       on_problem=lambda message: peer_warning(logger, "input: %s", message))


async def serve_stdio(server: ContextAssemblyServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    server.protocol.set_writer(PipeWriter(stdout), include_headers=True)
    output = _fileno(stdout)
    if output is not None:
        widen_pipe(output)
    source = input_source(stdin.fileno(), output)
    try:
        await _until_stopped(server, _pump(server, _reader(server, source)))
    finally:
        if isinstance(source, PipeSource):
            source.close()


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # not a file (io.UnsupportedOperation is both)
        return None


ServerFactory = Callable[[], ContextAssemblyServer]


@define
class Network:
    """How `serve --tcp` / `--ws` listens: every connection gets its own server (its own session and
    editor state) from `factory`, over the runtime and the worker pool the factory shares."""

    factory: ServerFactory
    max_connections: int = 16
    auth_timeout_s: float = AUTH_TIMEOUT_S
    ssl: Any = None  # an ssl.SSLContext: TLS
    allowed_origins: tuple[str, ...] = ()  # WebSocket Origins let in besides this machine's (--allow-origin)
    max_in_flight: int = MAX_IN_FLIGHT  # a connection's requests in progress before it is read no further
    servers: set[ContextAssemblyServer] = field(factory=set)

    def full(self) -> bool:
        return len(self.servers) >= self.max_connections

    def full_message(self) -> str:
        return f"the server has {len(self.servers)} connections; at most {self.max_connections} (--max-connections)"

    async def session(self, serve: Callable[[ContextAssemblyServer], Awaitable[None]], peer: str | None) -> None:
        server = self.factory()
        loop = asyncio.get_running_loop()
        server.attach(loop)
        server.peer = peer
        server.protocol.in_flight = InFlight(self.max_in_flight)
        self.servers.add(server)
        # a connection that has not presented a valid token in time is closed: held open, it kept a
        # place of --max-connections from the token holders
        deadline = loop.call_later(self.auth_timeout_s, _close_if_locked, server, self.auth_timeout_s) \
            if server.locked else None
        try:
            await serve(server)
        finally:
            if deadline is not None:
                deadline.cancel()
            self.servers.discard(server)
            server.protocol.set_writer(GoneWriter(), include_headers=True)
            server.protocol.abandon_requests()
            server.close()


async def serve_tcp(network: Network, host: str, port: int, announce: Announce, stop: asyncio.Event) -> None:
    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if network.full():
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": network.full_message()}}
            writer.write(frame(encode_json(error)))
            with contextlib.suppress(Exception):
                await writer.drain()
                writer.close()
            return

        async def serve(server: ContextAssemblyServer) -> None:
            server.protocol.set_writer(StreamWriter(writer), include_headers=True)
            # the pump's drain() waits while more than this is unsent, costs a few checks when it is
            # not, and raises once the connection is lost (the pump ends). Answers are written on the
            # event loop only (the StreamWriter is not thread-safe: workers post theirs).
            writer.transport.set_write_buffer_limits(high=OUTPUT_HIGH_WATER)

            try:
                await _until_stopped(server, _pump(server, _reader(server, StreamSource(reader)), writer.drain))
                await _answers_owed(server, writer)
            finally:
                await _end_stream(writer, server.locked)

        await network.session(serve, _peer(writer.get_extra_info("peername")))

    listener = await asyncio.start_server(connection, host, port, ssl=network.ssl,
                                          ssl_handshake_timeout=HANDSHAKE_S if network.ssl else None)
    address = listener.sockets[0].getsockname()
    announce(f"{'tls' if network.ssl else 'tcp'}://{_netloc(address)}")
    async with listener:
        await stop.wait()
        await _close_all(network)  # inside: from Python 3.12 leaving waits for every connection to end


async def serve_ws(network: Network, host: str, port: int, announce: Announce, stop: asyncio.Event) -> None:
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.typing import Origin

    async def connection(websocket: ServerConnection) -> None:
        if network.full():
            await websocket.close(1013, network.full_message()[:120])
            return

        async def session(server: ContextAssemblyServer) -> None:
            writer = QueuedWebSocketWriter(websocket)
            server.protocol.set_writer(writer, include_headers=False)
            in_flight = server.protocol.in_flight
            assert in_flight is not None

            async def take(inbox: Inbox) -> None:
                while True:
                    body = await inbox.get()
                    if in_flight.full() and not server.protocol.passes_cap(body):
                        await in_flight.room()  # held while the client has too many requests in progress
                    if len(body) > (limit := server.request_limit()):
                        server.protocol.refuse_oversized(body[:OVERSIZED_HEAD], len(body), limit)
                    else:
                        server.protocol.receive(body)
                    await writer.room()  # the next message waits while the client leaves its answers unread

            async def receive() -> None:
                inbox = Inbox()
                taking = asyncio.ensure_future(take(inbox))
                try:
                    async for message in websocket:
                        await inbox.put(message.encode("utf-8", "surrogatepass") if isinstance(message, str)
                                        else message)
                        if taking.done():
                            break
                finally:
                    taking.cancel()
                    for outcome in await asyncio.gather(taking, return_exceptions=True):
                        if isinstance(outcome, Exception):
                            logger.error("handling a websocket message failed", exc_info=outcome)

            try:
                await _until_stopped(server, receive())
            except Exception as exc:  # the connection dropped
                peer_warning(logger, "websocket connection ended: %s", exc)
            finally:
                await _end_websocket(websocket, writer, server.locked)

        await network.session(session, _peer(websocket.remote_address))

    # websockets' own bound (1 MiB by default) would close the connection: frames up to the default
    # limit arrive, and the workspace's limits.request_bytes answers those past it.
    # A browser always sends Origin: one not of this machine is a web page reaching for the sidecar
    # (cross-site WebSocket hijacking, DNS rebinding) and is refused (403); agents send none.
    origins: list[Origin | re.Pattern[str] | None] = [None, LOOPBACK_ORIGIN, *map(Origin, network.allowed_origins)]
    # max_queue 1: websockets buffers that many frames of up to max_size each while the session
    # waits (`Inbox` full): at its default of 16, ~1 GiB a connection, a token or not
    async with serve(connection, host, port, max_size=DEFAULT_LIMITS.request_bytes, max_queue=1, ssl=network.ssl,
                     origins=origins, logger=_handshake_logger(), ping_interval=PING_S,
                     ping_timeout=PING_S) as listener:
        address = next(iter(listener.sockets)).getsockname()
        announce(f"{'wss' if network.ssl else 'ws'}://{_netloc(address)}")
        await stop.wait()
        await _close_all(network)


async def _answers_owed(server: ContextAssemblyServer, writer: asyncio.StreamWriter) -> None:
    """At the end of a TCP client's input: wait (`ANSWERS_S` at most) for the answers of what it
    sent, which a client that half-closed (sent everything, reads on: a script, `nc -N`) is owed;
    not when `exit` or the server's stop ended it, when it never presented a token, or once it is
    gone (its first answer after a full close gets a reset)."""
    in_flight = server.protocol.in_flight
    assert server.stop_requested is not None
    if in_flight is None or server.locked or server.stop_requested.is_set():
        return
    server.protocol.abandon_requests()  # it can send no answer now: what waits on one fails (and answers)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWERS_S
    while len(in_flight) and not writer.transport.is_closing() and loop.time() < deadline \
            and not server.stop_requested.is_set():
        await asyncio.sleep(0.02)


async def _end_stream(writer: asyncio.StreamWriter, locked: bool) -> None:
    """Close a TCP connection: once its unsent answers went out, for FLUSH_S at most (close alone
    waits for them: a client that reads nothing kept the socket and its buffer for good); one that
    never presented a valid token at once, what it was not sent dropped."""
    if not locked:
        writer.close()
        with contextlib.suppress(Exception):  # TimeoutError: the client reads nothing; a reset
            await asyncio.wait_for(writer.wait_closed(), FLUSH_S)
    writer.transport.abort()


async def _end_websocket(websocket: Any, writer: QueuedWebSocketWriter, locked: bool) -> None:
    """Close a WebSocket connection: once its queued answers and the close handshake went out, for
    FLUSH_S at most (the handshake waits on a client that reads nothing for good); one that never
    presented a valid token at once."""
    writer.close()
    if not locked:
        with contextlib.suppress(Exception):  # TimeoutError: the client reads nothing
            async with asyncio.timeout(FLUSH_S):
                await writer.task
                await websocket.close()
    writer.task.cancel()
    websocket.transport.abort()
    with contextlib.suppress(Exception):
        await websocket.wait_closed()  # closed before websockets' own close() runs on it


class _RefusedHandshakes(logging.Filter):
    """websockets logs every refused handshake (an Origin not let in, a request that is not a
    WebSocket upgrade) as an error with a traceback: one line instead, as a refused token gets."""

    def filter(self, record: logging.LogRecord) -> bool:
        from websockets.exceptions import InvalidHandshake

        refused = record.exc_info[1] if record.exc_info else None
        if isinstance(refused, InvalidHandshake):
            peer_warning(logger, "refused a WebSocket handshake: %s", refused)
            return False
        return True


def _handshake_logger() -> logging.Logger:
    """websockets' server logger, its refused handshakes in one line (`_RefusedHandshakes`)."""
    handshakes = logging.getLogger("websockets.server")
    if not any(isinstance(f, _RefusedHandshakes) for f in handshakes.filters):
        handshakes.addFilter(_RefusedHandshakes())
    return handshakes


async def _close_all(network: Network, timeout_s: float = DRAIN_S) -> None:
    """Ask every connection to stop and wait (a while) for them to close: cancelled by the runner
    instead, each logged a CancelledError traceback on the way out (asyncio's stream callback), and
    from Python 3.12 a TCP listener's close waits for them (SIGTERM did nothing while a client stayed)."""
    for server in list(network.servers):
        server.request_stop()
    deadline = asyncio.get_running_loop().time() + timeout_s
    while network.servers and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)


def _peer(address: Any) -> str | None:
    return _netloc(address) if isinstance(address, tuple) and len(address) >= 2 else None


def _netloc(address: Any) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run(server: ContextAssemblyServer, announce: Announce | None = None, busy_poll_s: float = DEFAULT_MS / 1000) -> int:
    """Serve stdio until the client exits or disconnects; the exit status LSP asks for (0 after
    shutdown). `busy_poll_s`: how long the event loop polls after each event before it sleeps
    (polling.py; 0: not at all)."""

    async def main() -> None:
        server.attach(asyncio.get_running_loop())
        stdout = sys.stdout.buffer
        sys.stdout = sys.stderr  # nothing but the protocol may reach the real stdout
        await serve_stdio(server, sys.stdin.buffer, stdout)

    try:
        with asyncio.Runner(loop_factory=loop_factory(busy_poll_s)) as runner:
            runner.run(main())
    except KeyboardInterrupt:
        return 130
    finally:
        server.close()
    if server.exit_code is not None:
        return server.exit_code
    return 0 if compat.shutting_down(server.protocol) else 1


def run_network(network: Network, transport: str, host: str = "127.0.0.1", port: int = 0,
                announce: Announce | None = None, busy_poll_s: float = DEFAULT_MS / 1000) -> int:
    """Serve TCP or WebSocket clients until SIGTERM or SIGINT (exit status 0); a client's `exit`
    ends its own connection only. `busy_poll_s`: as `run`'s."""
    say = announce or (lambda address: print(f"context-assembly: listening on {address}", file=sys.stderr,
                                             flush=True))

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # a Python-level handler, not loop.add_signal_handler: asyncio learns of that signal from a
        # byte in its self-pipe, which every worker's answer also writes, and a full pipe dropped
        # the byte: under load a SIGTERM was lost and the server ran on
        before: dict[signal.Signals, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, OSError):  # (not the main thread: embedded callers)
                before[signum] = signal.signal(signum, lambda *_: loop.call_soon_threadsafe(stop.set))
        serve = serve_ws if transport == "ws" else serve_tcp
        try:
            await serve(network, host, port, say, stop)
        finally:
            await _close_all(network)
            for signum, handler in before.items():  # (the loop is closing: its handlers must go)
                signal.signal(signum, handler)

    try:
        with asyncio.Runner(loop_factory=loop_factory(busy_poll_s)) as runner:
            runner.run(main())
    except KeyboardInterrupt:
        return 0
    finally:
        for server in list(network.servers):
            server.close()
    return 0
