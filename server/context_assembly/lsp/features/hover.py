"""textDocument/hover."""

from __future__ import annotations

from lsprotocol import types

from ..server import ContextAssemblyServer
from .state import Snapshot, document_of, editor_state, encoding, off_loop, position, structure


def compute(ls: ContextAssemblyServer, snap: Snapshot, params: types.HoverParams) -> types.Hover | None:
    from ...editor.hover import hover  # late: the engine is imported after `initialize`

    document = document_of(ls, snap)
    if document is None:
        return None
    enc = encoding(ls)
    found = hover(document, document.offset(position(params), enc), editor_state(ls).workspace(), enc)
    return structure(ls, found, types.Hover) if found is not None else None


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: ContextAssemblyServer, params: types.HoverParams) -> types.Hover | None:
        return await off_loop(ls, compute, params)
