"""textDocument/formatting and textDocument/rangeFormatting for definition documents."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from ..server import ContextAssemblyServer
from .state import Snapshot, document_of, encoding, off_loop, structure


def compute(ls: ContextAssemblyServer, snap: Snapshot, params: Any) -> list[types.TextEdit] | None:
    from ...editor.formatting import format_edits  # late: the engine is imported after `initialize`

    document = document_of(ls, snap)
    if document is None:
        return None
    edits = format_edits(document, encoding(ls), structure_range(getattr(params, "range", None)))
    return None if edits is None else [structure(ls, edit, types.TextEdit) for edit in edits]


def structure_range(selection: types.Range | None) -> dict[str, dict[str, int]] | None:
    if selection is None:
        return None
    return {"start": {"line": selection.start.line, "character": selection.start.character},
            "end": {"line": selection.end.line, "character": selection.end.character}}


def register(server: ContextAssemblyServer) -> None:
    # the layout is the project's (two spaces), so the client's tab size and spaces are not read
    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    async def on_formatting(ls: ContextAssemblyServer,
                            params: types.DocumentFormattingParams) -> list[types.TextEdit] | None:
        return await off_loop(ls, compute, params)

    @server.feature(types.TEXT_DOCUMENT_RANGE_FORMATTING)
    async def on_range_formatting(ls: ContextAssemblyServer,
                                  params: types.DocumentRangeFormattingParams) -> list[types.TextEdit] | None:
        return await off_loop(ls, compute, params)
