"""What every editor feature shares: the editor state of the session, the document a request is
about, and the conversions to lsprotocol types.

A request's document is snapshotted on the event loop (`snapshot`) before any work goes to a worker
thread: pygls' workspace changes under a worker as edits arrive, so only the event loop reads it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from attrs import frozen
from lsprotocol import types

from .. import pygls_compat as compat
from ..server import ContextAssemblyServer

if TYPE_CHECKING:
    from ...editor.documents import EditorDocument
    from ..editor_state import EditorState

T = TypeVar("T")


class AboutDocument(Protocol):
    """The params of any request about one document."""

    @property
    def text_document(self) -> types.TextDocumentIdentifier: ...


P = TypeVar("P", bound=AboutDocument)
_LOCK = threading.Lock()


def editor_state(ls: ContextAssemblyServer) -> EditorState:
    from ..editor_state import EditorState  # late: the engine is imported after `initialize`

    session = ls.require_editor()
    with _LOCK:
        state = ls.editor
        if state is None or state.session is not session:
            state = ls.editor = EditorState(session)
    state.watched = ls.watching
    return state


def encoding(ls: ContextAssemblyServer) -> str:
    return ls.require_session().position_encoding


@frozen
class Snapshot:
    """An open document's text and version as pygls held them when the request arrived."""

    uri: str
    source: str | None  # None: the document is not open
    version: int | None


def snapshot(ls: ContextAssemblyServer, uri: str) -> Snapshot:
    """Read pygls' workspace: on the event loop only."""
    open_doc = compat.open_document(ls.workspace, uri)
    if open_doc is None:
        return Snapshot(uri, None, None)
    return Snapshot(uri, open_doc.source, open_doc.version)


def document_of(ls: ContextAssemblyServer, snap: Snapshot) -> EditorDocument | None:
    """The editor document of a snapshot (parsed once per version); any thread."""
    state = editor_state(ls)
    if snap.source is None:
        return state.store.get(snap.uri)
    return state.store.update(snap.uri, snap.source, snap.version)


def current_document(ls: ContextAssemblyServer, uri: str) -> EditorDocument | None:
    """The document as the editor has it now: on the event loop only."""
    return document_of(ls, snapshot(ls, uri))


async def off_loop(ls: ContextAssemblyServer, compute: Callable[[ContextAssemblyServer, Snapshot, P], T],
                   params: P) -> T:
    """Run `compute(ls, snapshot, params)` on a worker, the request's document snapshotted here first."""
    snap = snapshot(ls, params.text_document.uri)
    return await asyncio.get_running_loop().run_in_executor(ls.workers, _with_editor, compute, ls, snap, params)


def _with_editor(compute: Callable[[ContextAssemblyServer, Snapshot, P], T], ls: ContextAssemblyServer,
                 snap: Snapshot, params: P) -> T:
    ls.require_editor()  # the editor's implementations imported by one thread, before `compute` imports any
    return compute(ls, snap, params)


def structure(ls: ContextAssemblyServer, value: Any, cls: type[T]) -> T:
    """An LSP-shaped dict from `editor/` as the lsprotocol type pygls sends."""
    result: T = compat.converter_of(ls.protocol).structure(value, cls)
    return result


def position(params: Any) -> dict[str, int]:
    """The position of any request that has one (hover, completion, definition, ...)."""
    return {"line": params.position.line, "character": params.position.character}


def client_capabilities(ls: ContextAssemblyServer) -> types.ClientCapabilities | None:
    return getattr(ls.protocol, "client_capabilities", None)
