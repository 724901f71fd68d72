"""The connection to a sidecar: a JSON-RPC client that keeps every message plain JSON.

Built on pygls' `JsonRPCClient` and `JsonRPCProtocol` (request ids, futures, dispatch of the
server's requests), with two parts replaced. The protocol's structuring: pygls would turn the
results of unknown methods into namedtuples, renaming keys such as `"scope.agent.agent_name"`;
here every request, notification and result is kept exactly as received. And the reader: pygls'
reader runs its structuring hook on every nested object; here each body is parsed once, with the
same tolerant framing the server uses (`context_assembly.lsp.framing`, which imports no pygls).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import inspect
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from lsprotocol.types import ResponseError, ResponseErrorMessage
from pygls.client import JsonRPCClient
from pygls.exceptions import JsonRpcException, JsonRpcMethodNotFound
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    default_converter,
)

from ..errors import (
    CancelledError,
    ConflictError,
    ContextAssemblyError,
    ForbiddenError,
    InvalidParamsError,
    NotFoundError,
    StorageError,
    TimeoutError_,
)
from ..lsp import pygls_compat as compat
from ..lsp.framing import FrameReader, StreamSource, encode_json, frame

logger = logging.getLogger(__name__)

Listener = Callable[[str, Any], Any]  # (method, params); may return an awaitable
RequestHandler = Callable[[Any], Any]  # params -> result (or an awaitable of it)

CANCEL_REQUEST = "$/cancelRequest"
CANCELLED_KEPT = 1024  # cancelled requests whose late answers are recognised (and dropped)
READ_SIZE = 1 << 20  # bytes per read of the sidecar's output (its answers reach megabytes)
# The sidecar is the client's own: an answer of any size is read (a full trace of 140k rules passes
# 64 MiB, the server's limit for what it is sent)
MAX_ANSWER = 1 << 62
EXIT_GRACE_S = 0.5  # a sidecar never initialized: from stdin closed to killed
EXIT_WAIT_S = 1.0  # once its output closed, how long the reason waits for the sidecar's exit status
STDERR_KEPT = 64 * 1024  # of a piped stderr, the tail kept (`stderr_tail`)
PAUSE_COLLECTOR_FROM = 64 << 10  # bytes of a message decoded with the cyclic collector paused


class RpcError(ContextAssemblyError):
    """A JSON-RPC error without a domain class of its own (method not found, internal error, …)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message, data if isinstance(data, dict) else ({} if data is None else {"value": data}))
        self.code = code


class ForbiddenRpcError(RpcError, ForbiddenError):
    """-32004: the token does not allow the call. A ForbiddenError, and an RpcError as it always was."""


class ConnectionLost(ContextAssemblyError):
    """The sidecar went away (exited, closed its output) before answering."""


_BY_CODE: dict[int, type[ContextAssemblyError]] = {
    cls.code: cls for cls in (NotFoundError, ConflictError, TimeoutError_, StorageError, CancelledError)
}


def error_from(code: int, message: str, data: Any) -> ContextAssemblyError:
    """The domain exception for a JSON-RPC error: InvalidParamsError (with `errors`), NotFoundError, …"""
    details = data if isinstance(data, dict) else ({} if data is None else {"value": data})
    if code == InvalidParamsError.code:
        errors = details.get("errors")
        exc: ContextAssemblyError = InvalidParamsError(message, errors if isinstance(errors, list) else [])
        exc.data = details
        return exc
    if code == ForbiddenError.code:
        return ForbiddenRpcError(code, message, data)
    cls = _BY_CODE.get(code)
    return cls(message, details) if cls is not None else RpcError(code, message, data)


_froze = False


def freeze_once() -> bool:
    """Once per process, when the caller has frozen nothing itself and the collector runs: every
    object alive now (after the first sidecar started: chiefly the modules the client and pygls
    import, ~48,000 objects of which ~1,500 classes) moved out of the cyclic collector's way
    (`gc.freeze`), as the server does after loading. Otherwise each full collection re-walks them,
    25–35 ms, and answers kept alive across collections start one every ~130 `evaluateRules`
    answers on `medium`. Objects frozen are still freed by reference counting; only cycles among
    them that become garbage later stay. True when this call froze."""
    global _froze
    if _froze or gc.get_freeze_count() or not gc.isenabled():
        return False
    _froze = True
    gc.freeze()
    return True


def decode(body: bytes) -> Any:
    """One message body as plain JSON (orjson.JSONDecodeError when it is not JSON).

    A large answer (an `evaluateRules` trace: up to hundreds of thousands of dicts and lists) is
    decoded with the cyclic collector paused: its containers can form no cycle, but each few
    hundred of them would start a collection that re-walks the ones made before (and, as they
    pile up, the whole heap). The collector is left exactly as found, also when decoding fails."""
    if len(body) < PAUSE_COLLECTOR_FROM or not gc.isenabled():
        return orjson.loads(body)
    gc.disable()
    try:
        return orjson.loads(body)
    finally:
        gc.enable()


def _release(*held: Any) -> None:
    """A loop callback whose arguments are what it keeps alive until it runs (see `Connection._read`)."""


class PlainJsonProtocol(compat.SendDataHook, compat.HandlerHook, compat.NotificationHook, JsonRPCProtocol):
    """Every message as plain JSON; notifications go to the connection's listeners."""

    @property
    def connection(self) -> Connection:
        connection: Connection = compat.server_of(self)
        return connection

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" not in data:
            return data
        if "method" in data:
            if "id" in data:
                return JsonRPCRequestMessage(id=data["id"], method=data["method"], jsonrpc=data["jsonrpc"],
                                             params=data.get("params"))
            return JsonRPCNotification(method=data["method"], jsonrpc=data["jsonrpc"], params=data.get("params"))
        msg_id: Any = data.get("id")
        compat.expected_results(self).pop(msg_id, None)
        error = data.get("error")
        if isinstance(error, dict):
            return ResponseErrorMessage(id=msg_id, error=ResponseError(
                code=int(error.get("code", -32603)), message=str(error.get("message", "")), data=error.get("data")))
        return JsonRPCResponseMessage(id=msg_id, jsonrpc=data["jsonrpc"], result=data.get("result"))

    def send_data(self, data: Any) -> None:
        if not data or self.writer is None:
            return
        if isinstance(data, JsonRPCRequestMessage):
            message: Any = {"jsonrpc": "2.0", "id": data.id, "method": data.method}
            if data.params is not None:  # JSON-RPC 2.0: params are structured, or left out
                message["params"] = data.params
        elif isinstance(data, JsonRPCNotification):
            message = {"jsonrpc": "2.0", "method": data.method}
            if data.params is not None:
                message["params"] = data.params
        elif isinstance(data, JsonRPCResponseMessage):
            message = {"jsonrpc": "2.0", "id": data.id, "result": data.result}
        else:
            message = compat.converter_of(self).unstructure(data)
        try:
            self.writer.write(frame(encode_json(message)))
        except (ConnectionError, RuntimeError, OSError) as exc:  # the sidecar is gone; pending calls fail
            logger.debug("cannot send to the sidecar: %s", exc)

    def handler_for(self, method: str) -> Any:
        handler = self.connection.request_handlers.get(method)
        if handler is None:
            raise JsonRpcMethodNotFound.of(method)
        return handler

    def on_notification(self, method: str, params: Any) -> None:
        if method == CANCEL_REQUEST:
            msg_id = params.get("id") if isinstance(params, dict) else None
            if isinstance(msg_id, (str, int)):
                compat.cancel_request(self, msg_id)
            return
        self.connection.dispatch(method, params)


class Connection(JsonRPCClient):
    """One JSON-RPC connection (a spawned sidecar over stdio, or TCP). Use from one event loop."""

    protocol: PlainJsonProtocol

    def __init__(self) -> None:
        super().__init__(protocol_cls=PlainJsonProtocol, converter_factory=default_converter)
        self.listeners: dict[str, list[Listener]] = {}
        self.request_handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {}
        self.process: asyncio.subprocess.Process | None = None
        self.lost: ContextAssemblyError | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}  # our requests in flight, by id
        self._reader: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cancelled: deque[int] = deque(maxlen=CANCELLED_KEPT)  # ids whose late answers are dropped
        self._transport_writer: asyncio.StreamWriter | None = None
        self.stderr = ""  # the tail of the sidecar's stderr when it was piped (`stderr=subprocess.PIPE`)

    # -- opening ----------------------------------------------------------------------------------

    async def spawn(self, command: Sequence[str], *, cwd: Path | str | None = None, env: dict[str, str] | None = None,
                    stderr: Any = None) -> None:
        """Start the sidecar process and talk to it over its stdin/stdout."""
        self.process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr, cwd=cwd, env=env,
            limit=READ_SIZE)  # asyncio pauses reading past twice this: a large answer arrives in few reads
        assert self.process.stdin is not None and self.process.stdout is not None
        if self.process.stderr is not None:  # piped: read on, or a chatty sidecar blocks on a full pipe
            self.schedule(self._drain(self.process.stderr))
        self._attach(self.process.stdout, self.process.stdin)

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(READ_SIZE):
            self.stderr = (self.stderr + chunk.decode("utf-8", "replace"))[-STDERR_KEPT:]

    async def _why_lost(self) -> str:
        """What became of the sidecar whose output closed: its exit status, and its last words."""
        process = self.process
        if process is None:
            return "the sidecar closed the connection"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), EXIT_WAIT_S)
        code = process.returncode
        how = "closed its output" if code is None else \
            f"exited with code {code}" if code >= 0 else f"was ended by signal {-code}"
        last = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return f"the sidecar {how}" + (f": {last[-1]}" if last else "")

    async def connect_tcp(self, host: str, port: int, ssl: Any = None) -> None:
        """Connect to `serve --tcp` (`ssl`: an ssl.SSLContext for a server with --tls-cert)."""
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl)
        self._attach(reader, writer)

    def _attach(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._transport_writer = writer
        self.protocol.set_writer(writer)
        self._reader = asyncio.ensure_future(self._read(reader))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        reader = FrameReader(StreamSource(stream, READ_SIZE), max_body=MAX_ANSWER,
                             on_problem=lambda m: logger.warning("sidecar output: %s", m))
        ended = False
        try:
            while (body := await reader.next_body()) is not None:
                try:
                    data = decode(body)
                except orjson.JSONDecodeError:
                    reader.resync(body)
                    continue
                if not isinstance(data, dict):
                    continue
                if "method" not in data and self._answer(data):
                    # Let go of the message after the caller's task has run on with its result (a
                    # sequential caller: up to sending its next request), not when the next
                    # message arrives: an answer the caller dropped meanwhile is freed while the
                    # sidecar works (a full trace's 100,000 objects take milliseconds to free).
                    asyncio.get_running_loop().call_soon(_release, body, data)
                    body, data = b"", None
                    continue
                try:
                    self.protocol.handle_message(self.protocol.structure_message(data))
                except Exception:
                    logger.exception("cannot handle a message from the sidecar")
            ended = True
        finally:
            if not ended:  # cancelled (close), or failed: no waiting here
                self._fail_pending(ConnectionLost("the sidecar closed the connection"))
        self._fail_pending(ConnectionLost(await self._why_lost()))

    def _answer(self, data: dict[str, Any]) -> bool:
        """Hand a response to the request waiting for it (False: no request of ours has that id)."""
        msg_id = data.get("id")
        waiter = self._waiting.get(msg_id) if isinstance(msg_id, int) else None
        if waiter is None:
            # the late answer to a request this side cancelled: expected, dropped (handed on, pygls
            # logged "Received response to unknown message id" for every cancel)
            return msg_id in self._cancelled
        if not waiter.done():
            error = data.get("error")
            if isinstance(error, dict):  # as pygls reads an error (its defaults for an empty message)
                code = error.get("code")
                exc = JsonRpcException.from_error(ResponseError(
                    code=code if isinstance(code, int) else -32603, message=str(error.get("message", "")),
                    data=error.get("data")))
                waiter.set_exception(error_from(exc.code, exc.message, exc.data))
            else:
                waiter.set_result(data.get("result"))
        return True

    def _fail_pending(self, error: ContextAssemblyError) -> None:
        self.lost = error
        for waiter in list(self._waiting.values()):
            if not waiter.done():
                waiter.set_exception(error)
        for future in list(compat.pending_requests(self.protocol).values()):
            if isinstance(future, concurrent.futures.Future) and not future.done():
                future.set_exception(error)

    # -- messages ---------------------------------------------------------------------------------

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result; a JSON-RPC error is raised as its domain exception.
        Cancelling the awaiting task sends `$/cancelRequest`."""
        if self.lost is not None:
            raise ConnectionLost(self.lost.message)
        msg_id = next(self._ids)
        # An asyncio future answered by the reader itself: no concurrent.futures hop through the
        # loop's self-pipe per answer, as pygls' `send_request` would take.
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = waiter
        try:
            self.protocol.send_data(JsonRPCRequestMessage(id=msg_id, method=method, jsonrpc="2.0", params=params))
            return await waiter
        except asyncio.CancelledError:
            if not waiter.done() or waiter.cancelled():  # not answered yet: tell the sidecar
                self._cancelled.append(msg_id)
                self.notify(CANCEL_REQUEST, {"id": msg_id})
            raise
        finally:
            self._waiting.pop(msg_id, None)

    def notify(self, method: str, params: Any = None) -> None:
        self.protocol.notify(method, params)

    def on(self, method: str, listener: Listener) -> Callable[[], None]:
        """Call `listener(method, params)` for each notification `method` ("*" = every one). Returns an unsubscribe."""
        self.listeners.setdefault(method, []).append(listener)

        def unsubscribe() -> None:
            if listener in self.listeners.get(method, []):
                self.listeners[method].remove(listener)

        return unsubscribe

    def handle(self, method: str, handler: RequestHandler) -> None:
        """Answer the server's requests `method` with `handler(params)` (sync handlers run in a thread)."""

        async def run(params: Any) -> Any:
            if inspect.iscoroutinefunction(handler):
                return await handler(params)
            result = await asyncio.to_thread(handler, params)
            return await result if inspect.isawaitable(result) else result

        self.request_handlers[method] = run

    def dispatch(self, method: str, params: Any) -> None:
        for listener in [*self.listeners.get(method, []), *self.listeners.get("*", [])]:
            try:
                result = listener(method, params)
            except Exception:
                logger.exception("a listener of %s failed", method)
                continue
            if inspect.isawaitable(result):
                self.schedule(result)

    def schedule(self, awaitable: Any) -> None:
        """Run an async listener's awaitable on the loop (kept until done: no task is lost)."""
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- closing ----------------------------------------------------------------------------------

    async def _reap(self, timeout: float) -> int:
        """The process's exit status: waited for `timeout` (at least EXIT_GRACE_S), killed after."""
        assert self.process is not None
        if self.process.returncode is None:
            try:
                return await asyncio.wait_for(self.process.wait(), max(timeout, EXIT_GRACE_S))
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                    self.process.kill()
        return await self.process.wait()

    async def close(self, timeout: float = 5.0) -> int | None:
        """`shutdown` + `exit`, then wait for the process (killed when it does not exit in time)."""
        if self.lost is None and self._reader is not None:
            try:
                await asyncio.wait_for(self.request("shutdown"), timeout)
                self.notify("exit")
            except (ContextAssemblyError, TimeoutError, OSError):
                pass
        code = None
        if self.process is not None:
            if self._transport_writer is not None:  # end of input: a sidecar (or a wrapper) reading it stops
                self._transport_writer.close()
            code = await self._reap(timeout)
        if self._transport_writer is not None:
            self._transport_writer.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, timeout)
            except (TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
        self._fail_pending(ConnectionLost("the connection is closed"))
        return code
