"""textDocument/semanticTokens (full and range) and textDocument/inlayHint."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from ...editor.semantics import TOKEN_MODIFIERS, TOKEN_TYPES, inlay_hints, semantic_tokens
from ..server import ContextAssemblyServer
from .formatting import structure_range
from .state import current_document, editor_state, encoding, structure

LEGEND = types.SemanticTokensLegend(token_types=list(TOKEN_TYPES), token_modifiers=list(TOKEN_MODIFIERS))


def tokens(ls: ContextAssemblyServer, uri: str, selection: types.Range | None) -> types.SemanticTokens | None:
    document = current_document(ls, uri)
    if document is None:
        return None
    workspace = editor_state(ls).workspace()
    return types.SemanticTokens(data=semantic_tokens(document, workspace, encoding(ls), structure_range(selection)))


def hints(ls: ContextAssemblyServer, params: types.InlayHintParams) -> list[types.InlayHint] | None:
    document = current_document(ls, params.text_document.uri)
    if document is None:
        return None
    found = inlay_hints(document, editor_state(ls).workspace(), encoding(ls), structure_range(params.range))
    return [structure(ls, hint, types.InlayHint) for hint in found]


def _off_loop(ls: ContextAssemblyServer, fn: Any, *args: Any) -> Any:
    return asyncio.get_running_loop().run_in_executor(ls.workers, fn, ls, *args)


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    async def on_tokens(ls: ContextAssemblyServer, params: types.SemanticTokensParams) -> types.SemanticTokens | None:
        return await _off_loop(ls, tokens, params.text_document.uri, None)

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_RANGE, LEGEND)
    async def on_tokens_range(ls: ContextAssemblyServer,
                              params: types.SemanticTokensRangeParams) -> types.SemanticTokens | None:
        return await _off_loop(ls, tokens, params.text_document.uri, params.range)

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    async def on_inlay_hint(ls: ContextAssemblyServer, params: types.InlayHintParams) -> list[types.InlayHint] | None:
        return await _off_loop(ls, hints, params)
