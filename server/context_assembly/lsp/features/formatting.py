"""textDocument/formatting and textDocument/rangeFormatting for definition documents."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from ...editor.formatting import format_edits
from ..server import ContextAssemblyServer
from .state import current_document, encoding, structure


def compute(ls: ContextAssemblyServer, uri: str, selection: Any) -> list[types.TextEdit] | None:
    document = current_document(ls, uri)
    if document is None:
        return None
    enc = encoding(ls)
    edits = format_edits(document, enc, structure_range(selection))
    return None if edits is None else [structure(ls, edit, types.TextEdit) for edit in edits]


def structure_range(selection: types.Range | None) -> dict[str, dict[str, int]] | None:
    if selection is None:
        return None
    return {"start": {"line": selection.start.line, "character": selection.start.character},
            "end": {"line": selection.end.line, "character": selection.end.character}}


def register(server: ContextAssemblyServer) -> None:
    # the server's layout is canonical (two spaces), so the client's tab size and spaces are not read
    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    async def on_formatting(ls: ContextAssemblyServer,
                            params: types.DocumentFormattingParams) -> list[types.TextEdit] | None:
        return await asyncio.get_running_loop().run_in_executor(
            ls.workers, compute, ls, params.text_document.uri, None)

    @server.feature(types.TEXT_DOCUMENT_RANGE_FORMATTING)
    async def on_range_formatting(ls: ContextAssemblyServer,
                                  params: types.DocumentRangeFormattingParams) -> list[types.TextEdit] | None:
        return await asyncio.get_running_loop().run_in_executor(
            ls.workers, compute, ls, params.text_document.uri, params.range)
