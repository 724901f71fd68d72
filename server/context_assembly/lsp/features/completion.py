"""textDocument/completion: the editor's items as lsprotocol types."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from ..server import ContextAssemblyServer
from .state import Snapshot, client_capabilities, document_of, editor_state, encoding, off_loop, position, snapshot

TRIGGERS = ['"', ".", ":", " ", "/"]


def snippets_supported(ls: ContextAssemblyServer) -> bool:
    caps = client_capabilities(ls)
    completion = caps.text_document.completion if caps is not None and caps.text_document else None
    item = completion.completion_item if completion is not None else None
    return bool(item is not None and item.snippet_support)


def compute(ls: ContextAssemblyServer, snap: Snapshot, params: types.CompletionParams) -> dict[str, Any] | None:
    """A `CompletionList` as JSON: the editor's items are already LSP-shaped, so they are sent as
    they are rather than converted to lsprotocol types and back (a third of a round trip)."""
    from ...editor.completion import complete  # late: the engine is imported after `initialize`

    document = document_of(ls, snap)
    if document is None:
        return None
    enc = encoding(ls)
    items = complete(document, document.offset(position(params), enc), editor_state(ls).workspace(), enc,
                     snippets_supported(ls))
    return {"isIncomplete": False, "items": items}


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=TRIGGERS))
    async def completion(ls: ContextAssemblyServer, params: types.CompletionParams) -> dict[str, Any] | None:
        snap = snapshot(ls, params.text_document.uri)
        if snap.source is not None and editor_state(ls).ready(snap.uri, snap.version):
            return compute(ls, snap, params)  # all built: answering here saves two thread hand-offs
        return await off_loop(ls, compute, params)
