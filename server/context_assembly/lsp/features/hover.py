"""textDocument/hover."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from ...editor.hover import hover
from ..server import ContextAssemblyServer
from .state import current_document, editor_state, encoding, position, structure


def compute(ls: ContextAssemblyServer, params: types.HoverParams) -> types.Hover | None:
    document = current_document(ls, params.text_document.uri)
    if document is None:
        return None
    enc = encoding(ls)
    found = hover(document, document.offset(position(params), enc), editor_state(ls).workspace(), enc)
    return structure(ls, found, types.Hover) if found is not None else None


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: ContextAssemblyServer, params: types.HoverParams) -> types.Hover | None:
        return await asyncio.get_running_loop().run_in_executor(ls.workers, compute, ls, params)
