"""LSP base-protocol framing (`Content-Length: N` header lines, a blank line, N bytes of JSON), read
tolerantly and written as UTF-8.

pygls' own reader trusts its input: a header line must match exactly, a line has no length limit,
a body of any declared size is allocated, and a body whose length was declared wrong swallows the
next message. This reader bounds header lines and bodies, finds a `Content-Length` header even when
junk precedes it on the line, and can resynchronise: when a body does not parse, the caller hands
it back (`resync`) and any `Content-Length` header inside it is read again as a header, so a
valid message that followed a bad one is still answered. It imports neither pygls nor lsprotocol,
so the agent client uses it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import stat
import threading
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from ..encoded import EncodedJSON, EncodedList, plain_subclass

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

MAX_HEADER_LINE = 8 * 1024  # a longer line without a newline is junk: dropped, keeping a tail
MAX_BODY = 64 * 1024 * 1024  # a larger declared body is refused and skipped (limits.request_bytes)
OVERSIZED_HEAD = 4096  # bytes of a refused body kept, to find the request's id
SKIP_AT_MOST = 1 << 32  # a declared size beyond this is junk, not a body to skip: the header is ignored
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,15})[ \t]*\r?\n?\Z", re.IGNORECASE)
_HEADER_START = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
# The first line of an HTTP request: a web page's `fetch` to a loopback port sends one, with a body
# the frames could hide in; no LSP client starts so
_HTTP_REQUEST = re.compile(rb"[A-Z]{3,10} \S+ HTTP/\d(\.\d)?\r?\n?\Z")
_READ_SIZE = 64 * 1024


class ByteSource(Protocol):
    async def read(self) -> bytes:
        """Some bytes; b"" at end of input."""


class StreamSource:
    """An asyncio stream (TCP, a subprocess pipe); `read_size`: at most this much per read."""

    def __init__(self, reader: asyncio.StreamReader, read_size: int = _READ_SIZE) -> None:
        self.reader = reader
        self.read_size = read_size

    async def read(self) -> bytes:
        try:
            return await self.reader.read(self.read_size)
        except (ConnectionError, OSError):
            return b""


class FileDescriptorSource:
    """A file descriptor (stdin) read by a daemon thread, so a blocked read never holds the event
    loop, the worker pool, or the interpreter's exit."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._queue: asyncio.Queue[bytes] | None = None
        self._thread: threading.Thread | None = None

    def _start(self) -> asyncio.Queue[bytes]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        def pump() -> None:
            while True:
                try:
                    chunk = os.read(self.fd, _READ_SIZE)
                except OSError:
                    chunk = b""
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
                except RuntimeError:  # the loop is closed: nobody is listening any more
                    return
                if not chunk:
                    return

        self._thread = threading.Thread(target=pump, name="stdin-reader", daemon=True)
        self._thread.start()
        return queue

    async def read(self) -> bytes:
        if self._queue is None:
            self._queue = self._start()
        return await self._queue.get()


class PipeSource:
    """A pipe or socket (stdin from a client that spawned the server) read by the event loop
    itself: a message costs no thread hand-off. The descriptor is made non-blocking while read
    (asyncio needs that) and blocking again by `close`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.ReadTransport | None = None

    async def _open(self) -> asyncio.StreamReader:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_READ_SIZE)  # asyncio stops reading past twice this, unread
        pipe = os.fdopen(self.fd, "rb", buffering=0, closefd=False)  # closing the transport keeps fd open
        self._transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        return reader

    async def read(self) -> bytes:
        if self._reader is None:
            try:
                self._reader = await self._open()
            except (OSError, ValueError):
                return b""
        try:
            return await self._reader.read(_READ_SIZE)
        except (ConnectionError, OSError):
            return b""

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        with contextlib.suppress(OSError):
            os.set_blocking(self.fd, True)


PIPE_SIZE = 1 << 20  # Linux's default most for an unprivileged process (fs.pipe-max-size)


def widen_pipe(fd: int, size: int = PIPE_SIZE) -> None:
    """Let a pipe hold `size` bytes (Linux; elsewhere, or past the system's limit, it stays as it
    is): a large answer is then written at once instead of 64 KiB per wake-up of the reader."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if set_size is None:
        return
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, set_size, size)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def input_source(fd: int, output_fd: int | None = None) -> FileDescriptorSource | PipeSource:
    """The source for an input descriptor: the event loop reads a pipe or socket itself; a regular
    file or a terminal (which the loop cannot wait on), or a descriptor that is also the output
    (non-blocking reads would make its writes fail with EAGAIN), is read by a thread."""
    try:
        status = os.fstat(fd)
        shared = output_fd is not None and _same_file(status, os.fstat(output_fd))
    except OSError:
        return FileDescriptorSource(fd)
    if shared or not (stat.S_ISFIFO(status.st_mode) or stat.S_ISSOCK(status.st_mode)):
        return FileDescriptorSource(fd)
    return PipeSource(fd)


Oversized = Callable[[bytes, int, int], None]  # (the body's first bytes, its declared size, the limit)


class FrameReader:
    """Message bodies from a byte source, one at a time.

    A body declared larger than `max_body` (an int, or a callable read per message) is never held:
    its first OVERSIZED_HEAD bytes go to `on_oversized` (so the caller can answer the request) and
    the rest is read and dropped as it arrives."""

    def __init__(self, source: ByteSource, *, max_body: int | Callable[[], int] = MAX_BODY,
                 on_problem: Callable[[str], None] | None = None, on_oversized: Oversized | None = None) -> None:
        self.source = source
        self.max_body = max_body
        self.on_problem = on_problem or (lambda message: None)
        self.on_oversized = on_oversized
        self._buffer = bytearray()
        self._eof = False
        self._started = False  # a line was read: the check of the first one is done

    async def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = await self.source.read()
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    async def _line(self) -> bytes | None:
        searched = 0
        while True:
            end = self._buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            searched = len(self._buffer)
            if len(self._buffer) > MAX_HEADER_LINE:
                self.on_problem(f"dropped {len(self._buffer) - 64} bytes that are not a header line")
                del self._buffer[:-64]  # keep a tail: a header may start there
                searched = 0
            if not await self._fill():
                if not self._buffer:
                    return None
                line = bytes(self._buffer)
                self._buffer.clear()
                return line

    async def _exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            if not await self._fill():
                return None
        with memoryview(self._buffer) as view:  # one copy of the body, not two
            body = bytes(view[:size])
        del self._buffer[:size]
        return body

    async def _skip(self, size: int) -> bool:
        """Drop `size` bytes of input without keeping them; False at end of input."""
        while size > 0:
            if not self._buffer and not await self._fill():
                return False
            taken = min(size, len(self._buffer))
            del self._buffer[:taken]
            size -= taken
        return True

    def _limit(self) -> int:
        return self.max_body() if callable(self.max_body) else self.max_body

    async def next_body(self) -> bytes | None:
        """The next message body, or None at end of input."""
        length: int | None = None
        oversized: int | None = None
        while True:
            line = await self._line()
            if line is None:
                return None
            if not self._started and line.strip():
                self._started = True
                if _HTTP_REQUEST.match(line):
                    self.on_problem("an HTTP request, not a JSON-RPC message: the input is closed")
                    self._eof, self._buffer = True, bytearray()
                    return None
            if not line.strip():
                if oversized is not None:  # skipped, never read as headers (a reader without a handler too)
                    head = b""
                    if self.on_oversized is not None:
                        head = await self._exactly(min(oversized, OVERSIZED_HEAD)) or b""
                        self.on_oversized(head, oversized, self._limit())
                    if not await self._skip(oversized - len(head)):
                        return None
                    oversized = None
                    continue
                if length is None:
                    continue  # stray blank line
                return await self._exactly(length)
            match = _CONTENT_LENGTH.search(line)
            if match is None:
                if not line.lower().startswith(b"content-type"):
                    self.on_problem(f"ignored a line that is not a header: {line[:80]!r}")
                continue
            declared = int(match.group(1))
            limit = self._limit()
            if declared > limit:
                self.on_problem(f"refused a body of {declared} bytes (at most {limit})")
                length, oversized = None, (declared if declared <= SKIP_AT_MOST else None)
            else:
                length, oversized = declared, None

    def resync(self, body: bytes) -> bool:
        """Read again, as headers, whatever follows a `Content-Length` header inside a body that did
        not parse (its declared length was wrong and it ran into the next message)."""
        match = _HEADER_START.search(body)
        if match is None:
            return False
        self._buffer[:0] = body[match.start():]
        return True


def _fallback(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def encode_json(message: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """UTF-8 JSON; stdlib json when orjson refuses (integers beyond 64 bits, lone surrogates). An
    `EncodedList` is written as the bytes it carries, an `EncodedJSON` as its bytes (subclasses of
    JSON types pass through `plain_subclass`, which writes the rest as orjson would have)."""
    other = default or _fallback

    def hook(value: Any) -> Any:
        if value.__class__ is EncodedList:  # the common case: an evaluateRules answer's engines
            return value.fragment()
        plain = plain_subclass(value)
        return other(value) if plain is NotImplemented else plain

    def stdlib_hook(value: Any) -> Any:
        if isinstance(value, EncodedJSON):  # (json has no way to embed bytes: decoded to be written again)
            return value.value()
        return (default or str)(value)

    try:
        return orjson.dumps(message, default=hook, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except TypeError:
        return json.dumps(message, default=stdlib_hook, ensure_ascii=True).encode("ascii")


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
