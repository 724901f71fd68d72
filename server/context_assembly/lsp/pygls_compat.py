"""Every use of a pygls member that is not public API, in one place.

pygls 2 gives no public way to do a few things this server and its agent client need (write a
message in our own framing, answer a request without a traceback, see requests in flight, know
that `shutdown` arrived). Each such member is reached only through this module, so a pygls upgrade
is checked here: `tests/lsp/test_pygls_compat.py` has one test per member against the installed
pygls, and `pyproject.toml` pins pygls to the minor versions those tests passed on.

For each member: what it is, and the upstream API that would replace it (none exists in 2.1).

Member (of `JsonRPCProtocol` unless said) -> what it is used for -> the upstream API that would replace it:

- `_converter` -> (un)structuring LSP types -> already public as `protocol.fm.converter` (the same
  object), which is what this module reads.
- `_server` -> the server or client a protocol belongs to -> a public `protocol.server`.
- `_shutdown` -> refusing requests after `shutdown`, the exit code -> a public `shutdown_requested`.
- `_request_futures` -> waiting for, or failing, requests in flight (pygls' own client does the
  same) -> a public view of pending requests.
- `_result_types` -> keeping the results of our own requests as plain JSON -> a per-request result
  type argument of `send_request`.
- `_include_headers` -> framing replies like the transport's input -> a getter beside
  `set_writer(include_headers=)`.
- `_send_data` (hook) -> writing with our framing and JSON encoder -> a pluggable message writer.
- `_send_response` -> answering a request from our own hook -> a public `send_response`.
- `_send_handler_result` (hook) -> answering expected errors without a traceback -> an
  error-reporting hook per request.
- `_get_handler` (hook) -> the agent client answering server requests from its own table -> a
  public handler lookup.
- `_handle_notification` (hook) -> the agent client handing notifications to its listeners -> a
  catch-all notification handler.
- `_request_futures` of notifications -> pygls files the future of every notification handler that is
  a coroutine, a thread function or a generator (its own `didOpen`/`didChange`/`didClose`) under a
  fresh uuid and never removes it (only answers to requests do): one future per edit, for as long as
  the connection lives. `ReleaseNotificationFutures` removes each once it is done -> pygls not
  filing them (or popping them in `_check_handler_result`).
- `_handle_cancel_notification` -> the agent client honouring `$/cancelRequest` -> a public
  `cancel_request`.
- `_handle_request` -> dispatching a request the server already parsed and checked, without
  `handle_message`'s `isinstance` tests against pygls' runtime-checkable protocols (~15 µs per
  request on Python 3.11) -> a public `handle_request`.
- `LanguageServerProtocol._workspace` -> no longer used: open documents' text for methods comes
  from the editor's own store (`ContextAssemblyServer.open_document_text`).

The hooks are overridden through the mixins below, which give them public names
(`send_data`, `answer_request`, `handler_for`, `on_notification`); subclasses override those.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import MutableMapping
from concurrent.futures import Future
from typing import Any
from urllib.parse import unquote

import cattrs

TESTED_PYGLS = ">=2.1,<2.2"  # keep equal to the pin in pyproject.toml


# -- reading protocol state --------------------------------------------------------------------------


def open_document(workspace: Any, uri: str) -> Any:
    """The open document of `uri`, or None. pygls keeps open documents under the URI with its
    escapes decoded (`file:///tmp/sp%20ace/x.json` under `file:///tmp/sp ace/x.json`): looked up as
    the client sent it, a document in a folder with a space, `#` or a non-ASCII name was never found,
    so it got no diagnostics and no code lenses."""
    return workspace.text_documents.get(unquote(uri))


def is_open(workspace: Any, uri: str) -> bool:
    return unquote(uri) in workspace.text_documents


def converter_of(protocol: Any) -> cattrs.Converter:
    """The protocol's cattrs converter (public path: the feature manager holds the same one)."""
    converter: cattrs.Converter = protocol.fm.converter
    return converter


def server_of(protocol: Any) -> Any:
    return protocol._server


def shutting_down(protocol: Any) -> bool:
    """True once the client sent `shutdown`."""
    return bool(protocol._shutdown)


def pending_requests(protocol: Any) -> MutableMapping[Any, Future[Any]]:
    """Requests in flight, by id: the server's own handlers' futures, or the client's awaited
    answers (the live table: entries leave when answered)."""
    futures: MutableMapping[Any, Future[Any]] = protocol._request_futures
    return futures


def expected_results(protocol: Any) -> MutableMapping[Any, Any]:
    """Result types of requests this side sent, by id (the live table: structuring pops entries)."""
    types: MutableMapping[Any, Any] = protocol._result_types
    return types


def writes_headers(protocol: Any) -> bool:
    """Whether the writer was set with `include_headers=True` (Content-Length framing)."""
    return bool(protocol._include_headers)


# -- calling protocol internals ----------------------------------------------------------------------


def send_response(protocol: Any, msg_id: Any, *, result: Any = None, error: Any = None) -> None:
    protocol._send_response(msg_id, result=result, error=error)


def handle_request(protocol: Any, msg_id: Any, method: str, params: Any) -> None:
    """Run the handler of a request (as `handle_message` does for one, in its own context copy)."""
    contextvars.copy_context().run(protocol._handle_request, msg_id, method, params)


def cancel_request(protocol: Any, msg_id: Any) -> None:
    """Cancel a request the other side sent, as `$/cancelRequest` would."""
    protocol._handle_cancel_notification(msg_id)


# -- overriding protocol hooks under public names -----------------------------------------------------


class SendDataHook:
    """`send_data(data)` is called for every message the protocol writes; the default is pygls'."""

    def _send_data(self, data: Any) -> None:
        self.send_data(data)

    def send_data(self, data: Any) -> None:
        super()._send_data(data)  # type: ignore[misc]


class AnswerHook:
    """`answer_request(future, msg_id)` answers a request once its handler finished."""

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        self.answer_request(future, msg_id)

    def answer_request(self, future: Future[Any], msg_id: Any) -> None:
        super()._send_handler_result(future, msg_id=msg_id)  # type: ignore[misc]


class HandlerHook:
    """`handler_for(method)` finds the handler of a request or notification from the other side."""

    def _get_handler(self, feature_name: str) -> Any:
        return self.handler_for(feature_name)

    def handler_for(self, method: str) -> Any:
        return super()._get_handler(method)  # type: ignore[misc]


class NotificationHook:
    """`on_notification(method, params)` receives every notification from the other side."""

    def _handle_notification(self, method_name: str, params: Any) -> None:
        self.on_notification(method_name, params)

    def on_notification(self, method: str, params: Any) -> None:
        super()._handle_notification(method, params)  # type: ignore[misc]


class ReleaseNotificationFutures(NotificationHook):
    """Drops the futures pygls files for a notification's handlers once they are done (pygls keeps
    them forever: see the module docstring), so a long editing session does not grow per edit."""

    def on_notification(self, method: str, params: Any) -> None:
        pending = pending_requests(self)
        before = set(pending)
        super().on_notification(method, params)
        for key in set(pending) - before:  # filed by this notification's handlers, just now
            pending[key].add_done_callback(functools.partial(_release, pending, key))


def _release(pending: MutableMapping[Any, Future[Any]], key: Any, done: Any) -> None:
    if pending.get(key) is done:  # not a newer entry under the same id
        pending.pop(key, None)


__all__ = [
    "TESTED_PYGLS", "AnswerHook", "HandlerHook", "NotificationHook", "ReleaseNotificationFutures", "SendDataHook",
    "cancel_request", "handle_request",
    "converter_of", "expected_results", "pending_requests", "send_response", "server_of", "shutting_down",
    "writes_headers",
]
