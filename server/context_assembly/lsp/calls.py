"""Every custom method of `context_assembly.methods.METHODS`, registered once, generically.

Per call: params stay plain JSON (see protocol.py); `workDoneToken` / `partialResultToken` are LSP's
and are taken out before the method sees its params; the handler runs on the worker pool with a
`CallContext` whose `emit` sends notifications, whose `cancelled` turns true on `$/cancelRequest`
(or `window/workDoneProgress/cancel`, or `shutdown`), and whose `progress` reports `$/progress`
when the request carried a token. Domain errors become JSON-RPC errors (errors.py).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from lsprotocol import types

from ..errors import CancelledError
from ..methods import METHODS, CallContext, MethodSpec, call
from .errors import to_rpc_error
from .protocol import TOKENS, Answer
from .server import ContextAssemblyServer
from .workers import ConnectionClosed


def split_tokens(params: Any) -> tuple[Any, Any]:
    """(params without the LSP tokens, the work-done token or None)."""
    if not isinstance(params, dict) or not any(key in params for key in TOKENS):
        return params, None
    return {k: v for k, v in params.items() if k not in TOKENS}, params.get("workDoneToken")


class WorkDone:
    """`$/progress` for one request: begin before it runs, report from the worker, end after."""

    def __init__(self, server: ContextAssemblyServer, token: Any, spec: MethodSpec) -> None:
        self.server = server
        self.token = token
        self.spec = spec

    def _send(self, value: Any) -> None:
        self.server.protocol.notify(types.PROGRESS, types.ProgressParams(token=self.token, value=value))

    def begin(self) -> None:
        self._send(types.WorkDoneProgressBegin(title=self.spec.name, cancellable=self.spec.long_running,
                                               percentage=0))

    def report(self, message: str, percentage: int | None) -> None:
        value = types.WorkDoneProgressReport(message=message, percentage=percentage)
        self.server.post(self._send, value)

    def end(self, message: str) -> None:
        self._send(types.WorkDoneProgressEnd(message=message))


def _ignore_progress(message: str, percentage: int | None) -> None:
    del message, percentage


async def run_method(server: ContextAssemblyServer, name: str, raw: Any) -> Any:
    params, token = split_tokens(raw)
    try:
        session = await server.open_session()  # the first request may find it still being built
        if session is None:
            session = server.require_session()  # before `initialize`: says so
        spec = METHODS[name]  # its family is imported on its first call
    except Exception as exc:
        raise to_rpc_error(exc, name) from None
    stop = threading.Event()
    work = WorkDone(server, token, spec) if token is not None else None
    protocol = server.protocol
    # Without progress to report, and where the writer is thread-safe (stdio), the worker answers
    # and sends its notifications itself, in order, without handing them back to the event loop.
    answer = Answer(protocol) if work is None and protocol.answers_from_workers() else None
    ctx = CallContext(emit=protocol.notify if answer is not None else server.notify_threadsafe,
                      cancelled=stop.is_set, progress=work.report if work else _ignore_progress,
                      llm=server.ask_llm if server.llm_offered else None, encodes=True)
    if work is not None:
        work.begin()
        server.progress_cancels[token] = stop.set
    outcome = "failed"
    try:
        loop = asyncio.get_running_loop()
        with session.runtime.loader.foreground():  # rule engines compiling in the background wait a while
            if answer is None:
                result = await loop.run_in_executor(server.workers, call, session, spec.name, params, ctx)
            else:
                result = await loop.run_in_executor(server.workers, answer.run, session, spec.name, params, ctx)
        outcome = "done"
        return result
    except asyncio.CancelledError:
        stop.set()  # the worker notices at its next check; its result is dropped
        outcome = "cancelled"
        raise
    except ConnectionClosed:  # the client left as the request came: nothing failed, nobody to answer
        outcome = "cancelled"
        raise to_rpc_error(CancelledError("the connection closed before the request ran"), spec.name) from None
    except Exception as exc:
        raise to_rpc_error(exc, spec.name) from None
    finally:
        if work is not None:
            server.progress_cancels.pop(token, None)
            work.end(outcome)


def _handler(server: ContextAssemblyServer, name: str) -> Any:
    async def handle(params: Any) -> Any:
        return await run_method(server, name, params)

    handle.__name__ = handle.__qualname__ = "handle_" + name.replace("/", "_")
    # evaluated, not strings: pygls reads the first parameter's type of every handler of every new
    # connection, and compiled each string annotation to do so (~1 ms a connection)
    handle.__annotations__ = {"params": Any, "return": Any}
    return handle


def register(server: ContextAssemblyServer) -> None:
    for name in METHODS:  # names only: no family is imported here
        server.feature(name)(_handler(server, name))

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def cancel_progress(ls: ContextAssemblyServer, params: types.WorkDoneProgressCancelParams) -> None:
        stop = ls.progress_cancels.get(params.token)
        if stop is not None:
            stop()
