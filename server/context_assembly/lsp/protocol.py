"""The JSON-RPC protocol: pygls' LSP protocol, with custom methods kept as plain JSON and every
incoming message checked before pygls sees it.

pygls 2 structures the params of a method it has no type for into namedtuples, renaming keys that
are not identifiers (`"scope.agent.agent_name"` becomes `_0`; `class` and `$schema` do not survive
either), and its reader calls the structuring hook on every nested object, so a stored value that
happens to hold a `"jsonrpc"` key would be taken for a message. Here a body is parsed once, plainly;
incoming requests and notifications of the methods in `context_assembly.methods.METHODS` (by exact
name) and of any other method lsprotocol has no type for, and responses to the server's own plain
requests (`llm/complete`), keep their JSON as sent; LSP methods (`initialize`, `$/cancelRequest`, …)
are structured by lsprotocol as usual. Nothing matches method names by prefix, and outgoing
notifications (`contextAssembly/started`, …) are written as given: the rule only reads input.

Bad input gets an answer where JSON-RPC has one: invalid JSON or UTF-8 → -32700 (id null), a batch
array or a malformed envelope → -32600, LSP params that do not structure → -32602 with the request's
id, an integer beyond 64 bits (which orjson would read as a float: json_numbers.py) or JSON nested
deeper than the parser reads (1,024 levels, past any `limits.nesting_depth`) → -32602, a request
after `shutdown` → -32600. Nothing of it stops the server.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import threading
from concurrent.futures import Future
from typing import Any

import attrs
import orjson
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcRequestCancelled
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    lsp_method,
)

from ..collector import paused
from ..errors import ContextAssemblyError
from ..json_numbers import inexact_integer
from ..limits import BY_NAME as LIMITS_BY_NAME
from ..methods import METHODS, CallContext, call
from . import pygls_compat as compat
from .errors import not_initialized, to_rpc_error
from .framing import encode_json, frame
from .in_flight import InFlight
from .refusals import peer_warning
from .text_sync import TextSync
from .workers import ConnectionClosed

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
NOT_INITIALIZED = -32002
SERVER_BUSY = -32000  # as a connection over --max-connections is answered
_CONTAINER = re.compile(rb"[\[{]")
_ID_MEMBER = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")')
DEPTH_EXCEEDED = "depth limit exceeded"  # orjson's message for a body nested past PARSER_DEPTH
PARSER_DEPTH = 1024
NESTING_MOST = LIMITS_BY_NAME["nesting_depth"].maximum
PLAIN_OUTGOING = frozenset({"llm/complete"})  # server-to-client requests whose results stay plain JSON
TOKENS = ("workDoneToken", "partialResultToken")  # LSP's, taken out of a custom method's params
# Rule evaluations the event loop answers itself when the runtime is settled: `"explain": "none"`
# (both), a compact trace of every enabled engine once one was made (`evaluateRules`)
EVALUATE_RULES = "contextAssembly/evaluateRules"
INLINE_METHODS = frozenset({EVALUATE_RULES, "contextRuleEngine/evaluate"})


# notifications taken at once even at the in-flight cap (`passes_cap`)
PASSING_METHODS = frozenset({types.CANCEL_REQUEST, types.WINDOW_WORK_DONE_PROGRESS_CANCEL, types.EXIT})
_PASSING_NAMES = tuple(name.encode() for name in PASSING_METHODS)


class ClientGone(JsonRpcException):
    """The client left before answering a request of the server's."""

    CODE = -32099  # (JSON-RPC's server-error range: never sent, only raised to the one waiting)


class PlainResult:
    """Marker result type: keep the response's `result` exactly as received."""


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def top_level_id(body: bytes) -> Any:
    """The id of a body that does not parse (nested too deep, a bad value), when it can be told for sure:
    an `"id"` member before the first nested object or array, so it is the message's own."""
    head = body[:4096]
    if not head.lstrip().startswith(b"{"):
        return None
    start = head.index(b"{") + 1
    nested = _CONTAINER.search(head, start)
    match = _ID_MEMBER.search(head[: nested.start() if nested else len(head)], start)
    if match is None:
        return None
    try:
        value = orjson.loads(match.group(1))
    except orjson.JSONDecodeError:
        return None
    return value if _is_id(value) else None


def parse_problem(body: bytes, exc: orjson.JSONDecodeError) -> str:
    """orjson's message, with the exact place of bytes that are not UTF-8 (orjson says "line 1
    column 1" for those; an escaped lone surrogate it places right itself)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = body.count(b"\n", 0, bad.start) + 1
        column = bad.start - (body.rfind(b"\n", 0, bad.start) + 1) + 1
        return f"the message is not valid UTF-8 ({bad.reason}): line {line} column {column} (byte {bad.start})"
    return str(exc)


def envelope_problem(data: Any) -> str | None:
    """Why `data` is not a JSON-RPC 2.0 request, notification or response (None when it is one)."""
    if not isinstance(data, dict):
        return "a message must be a JSON object"
    if data.get("jsonrpc") != "2.0":
        return 'a message must have "jsonrpc": "2.0"'
    if "method" in data:
        if not isinstance(data["method"], str) or not data["method"]:
            return "method must be a non-empty string"
        if "id" in data and not _is_id(data["id"]):
            return "id must be a string or an integer"
        if "params" in data and not isinstance(data["params"], (dict, list)) and data["params"] is not None:
            return "params must be an object or an array"
        return None
    if "id" not in data or ("result" not in data and "error" not in data):
        return "a message must be a request (method), a notification, or a response (id with result or error)"
    if "error" in data and not (isinstance(data["error"], dict) and isinstance(data["error"].get("code"), int)):
        return "error must be an object with an integer code"
    return None


def _error(msg_id: Any, code: int, message: str, data: Any) -> dict[str, Any]:
    error = {"code": code, "message": message, **({} if data is None else {"data": data})}
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def _notification_method(method: str) -> bool:
    """An LSP notification (`$/setTrace`, `initialized`, …): it has no answer (lsprotocol's own table)."""
    entry = types.METHOD_TO_TYPES.get(method)
    return entry is not None and entry[1] is None


def inline_kind(method: str, params: Any) -> str | None:
    """Which rule evaluation the event loop may answer itself: "plain" (`"explain": "none"`), or
    an `evaluateRules` compact answer over every enabled engine, "none" or "trace" (all / matched:
    answered so once a compact answer of that kind made the trace programs and layouts, and the
    bits, of the workspace version, `RuleSet.compacted`); None: a worker's (any other method or
    mode, progress asked for)."""
    if method not in INLINE_METHODS or not isinstance(params, dict) or any(key in params for key in TOKENS):
        return None
    explain, packing = params.get("explain"), params.get("trace_format", "full")
    if explain == "none" and packing == "full":
        return "plain"
    if method != EVALUATE_RULES or packing != "compact" or "rule_engine_ids" in params:
        return None
    return "none" if explain == "none" else "trace"


ANSWERED = object()  # a handler's result when its worker has sent the answer itself


class Answer:
    """One request answered exactly once: by its worker, straight from the worker's thread with the
    result (`run`), or by the event loop (errors, cancellation), whichever comes first. Made on the
    event loop inside the request's task; only where the writer is thread-safe."""

    def __init__(self, protocol: ContextAssemblyProtocol) -> None:
        self.protocol = protocol
        self.msg_id = protocol.msg_id  # the request's id: pygls keeps it in the task's context
        self._once = threading.Lock()  # acquired by the first to answer, never released
        task = asyncio.current_task()
        assert task is not None
        protocol.answers[task] = self

    def take(self) -> bool:
        """True for the first caller only: that one answers."""
        return self._once.acquire(blocking=False)

    def run(self, session: Any, method: str, params: Any, ctx: Any) -> Any:
        """On the worker: run the method and send its result, unless the loop answered first. A
        rule evaluation's answer is written and dropped before the collector runs again."""
        if method not in INLINE_METHODS:
            return self._run(session, method, params, ctx)
        with paused():
            return self._run(session, method, params, ctx)

    def _run(self, session: Any, method: str, params: Any, ctx: Any) -> Any:
        result = call(session, method, params, ctx)
        if not self.take():
            return result  # cancelled meanwhile: answered already, the result is dropped
        compat.send_response(self.protocol, self.msg_id, result=result)
        return ANSWERED


class ContextAssemblyProtocol(compat.SendDataHook, compat.AnswerHook, compat.ReleaseNotificationFutures,
                              LanguageServerProtocol):
    plain_methods: frozenset[str] = frozenset(METHODS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.text_sync = TextSync()
        self.answers: dict[Any, Answer] = {}  # request task -> its Answer (requests a worker may answer)
        self.in_flight: InFlight | None = None  # a network connection's requests in progress (transports)
        self.gone = False  # the client can answer nothing more (`abandon_requests`)
        self._asked: dict[Any, Future[Any]] = {}  # the server's own requests awaiting the client, by id
        super().__init__(*args, **kwargs)

    # -- receiving ---------------------------------------------------------------------------------

    def receive(self, body: bytes) -> bool:
        """Handle one message body. False when it is not JSON at all (the reader may resync)."""
        try:
            data = orjson.loads(body)  # strict UTF-8, no lone surrogates
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith(DEPTH_EXCEEDED):  # JSON all the same: deeper than any limits.nesting_depth
                self.refuse(top_level_id(body), INVALID_PARAMS, f"Invalid params: the message is nested too "
                            f"deeply (more than {PARSER_DEPTH} levels; limits.nesting_depth is at most "
                            f"{NESTING_MOST})")
                return True
            self.refuse(top_level_id(body), PARSE_ERROR, f"Parse error: {parse_problem(body, exc)}")
            return False
        if isinstance(data, list):
            self._refuse_batch(data)
            return True
        problem = envelope_problem(data)
        if problem is not None:
            msg_id = data.get("id") if isinstance(data, dict) and _is_id(data.get("id")) else None
            # A request whose id is not a valid id (an object, a float) is still a request: JSON-RPC
            # answers it with id null; only a message without any id is a notification.
            if msg_id is not None or not isinstance(data, dict) or "method" not in data or "id" in data:
                self.refuse(msg_id, INVALID_REQUEST, f"Invalid request: {problem}")
            else:
                peer_warning(logger, "ignored a malformed notification: %s", problem)
            return True
        is_request = "method" in data and "id" in data
        if "method" in data and (inexact := inexact_integer(body)) is not None:
            if is_request:  # a number no store keeps exactly: refused, not changed on the way in
                self.refuse(data["id"], INVALID_PARAMS, f"Invalid params: {inexact}")
            else:
                peer_warning(logger, "ignored %s: %s", data["method"], inexact)
            return True
        server = compat.server_of(self)
        if "method" in data and data["method"] not in (types.INITIALIZE, types.EXIT) \
                and (server.locked or not server.opened):
            # LSP: nothing but initialize (with a valid token) before a good initialize, and `exit` (a
            # `shutdown` taken then made every later initialize fail; editor features failed -32603)
            if is_request:
                self.refuse(data["id"], NOT_INITIALIZED, "initialize with a valid token first "
                            "(initializationOptions.token)" if server.locked else not_initialized().message)
            return True
        if compat.shutting_down(self) and is_request and data["method"] != types.EXIT:
            self.refuse(data["id"], INVALID_REQUEST, "the server is shutting down")
            return True
        if is_request and data["method"] != types.EXIT and _notification_method(data["method"]):
            # answered by nobody (pygls runs it as a notification): an id wanting an answer never got one
            self.refuse(data["id"], INVALID_REQUEST, f"Invalid request: {data['method']} is a notification: "
                        "send it without an id")
            return True
        if "method" not in data and self.in_flight is not None:
            self.in_flight.replied(data["id"])  # a handler waiting on this answer no longer waits on the client
        elif is_request and data["method"] != types.EXIT and self.in_flight is not None \
                and not self.in_flight.admit(data["id"]):
            self._refuse_busy(data["id"])
            return True
        try:
            message = self.structure_message(data)
        except Exception as exc:  # LSP params that lsprotocol cannot structure
            if is_request:
                self.send_error(data["id"], INVALID_PARAMS, f"Invalid params for {data['method']}: "
                                f"{exc.__cause__ or exc}")
            else:
                logger.warning("ignored %s: its params do not structure", data.get("method") or "a response")
            return True
        try:
            self.handle_message(message)
        except (SystemExit, KeyboardInterrupt):
            raise
        except Exception:
            logger.exception("failed to handle %s", data.get("method") or "a response")
            if is_request:
                self.send_error(data["id"], -32603, "Internal error")
        return True

    def passes_cap(self, body: bytes) -> bool:
        """Whether a message read while the connection is at its in-flight cap is taken at once: a
        cancellation (`$/cancelRequest`, `window/workDoneProgress/cancel`) or `exit`, which a
        connection at its cap needs most, and which start no work."""
        if not any(name in body for name in _PASSING_NAMES):
            return False
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return False
        return isinstance(data, dict) and "id" not in data and data.get("method") in PASSING_METHODS

    def handle_message(self, message: Any) -> None:
        # A request of ours was checked by `receive` (envelope, initialize, shutdown): straight to
        # its handler, past pygls' slow protocol `isinstance` tests.
        if type(message) is JsonRPCRequestMessage and message.jsonrpc == "2.0" and not compat.shutting_down(self):
            if not self._answer_inline(message):
                compat.handle_request(self, message.id, message.method, message.params)
            return
        super().handle_message(message)

    def _answer_inline(self, message: JsonRPCRequestMessage) -> bool:
        """Answer a rule evaluation here, on the event loop, when it only computes (`inline_kind`)
        and the runtime is settled (nothing to read, compile, open or ask over a network:
        `Runtime.settled`). It takes ~0.1-10 ms then, which a worker would spend holding the GIL
        anyway, while handing it to one and back costs ~0.1 ms a request (`bench/README.md`).
        Anything else, or the same request while anything is pending, goes to a worker. False:
        not answered here."""
        kind = inline_kind(message.method, message.params)
        if kind is None:
            return False
        server = compat.server_of(self)
        session = server.session
        if session is None or not session.runtime.settled() \
                or (kind != "plain" and not session.runtime.compacted(kind)):
            return False
        ctx = CallContext(emit=self.notify, llm=server.ask_llm if server.llm_offered else None, encodes=True)
        with paused():  # the answer written and dropped before the collector runs again (collector.py)
            self._answer_now(session, message, ctx)
        return True

    def _answer_now(self, session: Any, message: JsonRPCRequestMessage, ctx: CallContext) -> None:
        try:
            with session.runtime.loader.foreground():
                result = call(session, message.method, message.params, ctx)
        except Exception as exc:  # answered as a worker's failure is (run_method)
            failed: Future[Any] = Future()
            failed.set_exception(to_rpc_error(exc, message.method))
            self.answer_request(failed, message.id)
            return
        # written as `answer_request` writes a result, without its future and pygls' response
        # object: nothing was registered for a request answered here (no pending entry, no result type)
        self.send_data({"jsonrpc": "2.0", "id": message.id, "result": result})

    def refuse_oversized(self, head: bytes, size: int, limit: int) -> None:
        """A message larger than limits.request_bytes: its body is skipped unread, the request answered."""
        message = f"Invalid request: the message is {size} bytes; at most {limit} (limits.request_bytes)"
        self.refuse(top_level_id(head), INVALID_REQUEST, message, {"size": size, "limit": limit})

    def _refuse_busy(self, msg_id: Any) -> None:
        """Over the cap while a handler waits for this client's `llm/complete` answer (`in_flight`)."""
        assert self.in_flight is not None
        count, most = len(self.in_flight), self.in_flight.most
        self.refuse(msg_id, SERVER_BUSY, f"{count} requests of this connection are in progress, at most {most} "
                    "(--max-in-flight), and the server waits for this client's llm/complete answer: send it, "
                    "or wait for answers before sending more requests", {"in_flight": count, "most": most})

    def _refuse_batch(self, batch: list[Any]) -> None:
        """LSP has no batches: each request in one gets an Invalid Request answer (one error when none has an id)."""
        ids = [m["id"] for m in batch if isinstance(m, dict) and "method" in m and _is_id(m.get("id"))]
        for msg_id in ids or [None]:
            self.refuse(msg_id, INVALID_REQUEST, "Invalid request: batches are not supported; send one message "
                        "per frame")

    def structure_message(self, data: dict[str, Any]) -> Any:
        method = data.get("method")
        if isinstance(method, str) and (method in self.plain_methods or self.get_message_type(method) is None):
            if "id" in data:
                return JsonRPCRequestMessage(id=data["id"], method=method, jsonrpc=data["jsonrpc"],
                                             params=data.get("params"))
            return JsonRPCNotification(method=method, jsonrpc=data["jsonrpc"], params=data.get("params"))
        if method is None and "id" in data:
            expected_results = compat.expected_results(self)
            expected = expected_results.get(data["id"])
            if expected is PlainResult or "error" in data:
                expected_results.pop(data["id"], None)
            if expected is PlainResult and "error" not in data:
                return JsonRPCResponseMessage(id=data["id"], jsonrpc=data["jsonrpc"], result=data.get("result"))
        return super().structure_message(data)

    def get_result_type(self, method: str) -> Any:  # type: ignore[override]
        if method in PLAIN_OUTGOING:
            return PlainResult
        return super().get_result_type(method)

    # -- sending -----------------------------------------------------------------------------------

    def _unstructure(self, value: Any) -> Any:
        if attrs.has(type(value)):
            return compat.converter_of(self).unstructure(value)
        raise TypeError(f"{type(value).__name__} is not JSON")

    def _message(self, data: Any) -> Any:
        # The generic messages carry plain JSON (custom results and params): no converter pass over them.
        if isinstance(data, JsonRPCResponseMessage):
            return {"jsonrpc": data.jsonrpc, "id": data.id, "result": data.result}
        if isinstance(data, JsonRPCRequestMessage):
            return {"jsonrpc": data.jsonrpc, "id": data.id, "method": data.method, "params": data.params}
        if isinstance(data, JsonRPCNotification):
            out = {"jsonrpc": data.jsonrpc, "method": data.method}
            return out if data.params is None else {**out, "params": data.params}
        return compat.converter_of(self).unstructure(data) if attrs.has(type(data)) else data

    def send_data(self, data: Any, answers: bool = True) -> None:
        """Write a message. `answers=False`: a refusal of a request never counted in progress
        (`in_flight`), so it does not count as the answer of another with the same id."""
        if not data:
            return
        if self.writer is None:
            logger.error("no transport to send a message on")
            return
        message = self._message(data)
        try:
            body = encode_json(message, self._unstructure)
        except Exception:  # a result that is no JSON: its request still gets an answer
            logger.exception("failed to encode a message")
            if type(message) is not dict or "id" not in message or "method" in message:
                return
            error = {"code": -32603, "message": "Internal error: the answer could not be encoded as JSON"}
            body = encode_json({"jsonrpc": "2.0", "id": message["id"], "error": error})
        try:
            written = self.writer.write(frame(body) if compat.writes_headers(self) else body)
            if inspect.isawaitable(written):
                asyncio.ensure_future(written)
        except (BrokenPipeError, ConnectionError) as exc:
            logger.error("the client is gone: %s", exc)
            compat.server_of(self).request_stop()
        except Exception:
            logger.exception("failed to send a message")
        if type(message) is dict and "id" in message:
            if "method" in message:
                self._asking(message["id"])
            elif answers and self.in_flight is not None:
                self.in_flight.answered(message["id"])  # a response: one request fewer in progress

    def send_error(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        self.send_data(_error(msg_id, code, message, data))

    def refuse(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        """Answer a message refused before it was taken in (never counted in progress: `in_flight`)."""
        self.send_data(_error(msg_id, code, message, data), answers=False)

    def answers_from_workers(self) -> bool:
        """Whether a worker may write its answer itself: the writer is safe to call from any thread."""
        return bool(getattr(self.writer, "threadsafe", False))

    def answer_request(self, future: Future[Any], msg_id: Any) -> None:
        """Answer a request: expected errors are answered without a traceback in the log."""
        compat.pending_requests(self).pop(msg_id, None)
        answer = self.answers.pop(future, None)
        if answer is not None and not answer.take():
            return  # its worker answered
        exc = None if future.cancelled() else future.exception()
        if future.cancelled() or isinstance(exc, ConnectionClosed):  # (closed: it arrived as the client left)
            cancelled = JsonRpcRequestCancelled(f'Request with id "{msg_id}" is canceled')
            compat.send_response(self, msg_id, error=cancelled.to_response_error())
            return
        if exc is None:
            compat.send_response(self, msg_id, result=future.result())
        elif isinstance(exc, JsonRpcException):
            compat.send_response(self, msg_id, error=exc.to_response_error())
        elif isinstance(exc, ContextAssemblyError):  # a domain error of an editor feature or command
            compat.send_response(self, msg_id, error=to_rpc_error(exc).to_response_error())
        else:
            logger.error("request %s failed", msg_id, exc_info=exc)
            error = JsonRpcInternalError(f"{type(exc).__name__}: {exc}")
            compat.send_response(self, msg_id, error=error.to_response_error())

    def abandon_requests(self) -> None:
        """The client can answer nothing more (it left, or closed its sending side): fail the
        server's own requests still waiting for its answer (`workspace/configuration`,
        `llm/complete`), which would wait for good (the task awaiting one was destroyed pending,
        or logged a traceback at the server's stop), and any it would ask later (`gone`)."""
        self.gone = True
        pending, expected = compat.pending_requests(self), compat.expected_results(self)
        for msg_id, future in list(self._asked.items()):
            expected.pop(msg_id, None)
            if pending.get(msg_id) is future:
                pending.pop(msg_id, None)
            if not future.done():
                future.set_exception(ClientGone(f"the client left before answering request {msg_id}"))
        self._asked.clear()

    def _asking(self, msg_id: Any) -> None:
        """The server's request `msg_id` was just filed (pygls files its future, then writes it)."""
        future = compat.pending_requests(self).get(msg_id)
        if isinstance(future, Future):
            self._asked[msg_id] = future
            future.add_done_callback(lambda done: self._asked.pop(msg_id, None)
                                     if self._asked.get(msg_id) is done else None)

    # -- lifecycle ---------------------------------------------------------------------------------

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:  # type: ignore[override]
        """Stop serving; the transport closes and the process exits with 0 after `shutdown`, else 1."""
        server = compat.server_of(self)
        server.exit_code = 0 if compat.shutting_down(self) else 1
        server.request_stop()


    # -- text synchronisation ----------------------------------------------------------------------

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        """The changes are applied by `TextSync` (pygls miscounts lines, see there), then handed to
        pygls as the whole new text, which it stores without reading it."""
        uri = params.text_document.uri
        document = self.workspace.get_text_document(uri)
        encoding = str(getattr(self.workspace.position_encoding, "value", None) or "utf-16")
        text = self.text_sync.apply(uri, document.source, params.content_changes, encoding)
        self.workspace.update_text_document(params.text_document,
                                            types.TextDocumentContentChangeWholeDocument(text=text))
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Any:
        self.text_sync.forget(params.text_document.uri)
        yield from super().lsp_text_document__did_close(params)
