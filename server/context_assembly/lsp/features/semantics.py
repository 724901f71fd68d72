"""textDocument/semanticTokens (full and range) and textDocument/inlayHint."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from ...editor.capabilities import TOKEN_MODIFIERS, TOKEN_TYPES
from ..server import ContextAssemblyServer
from .formatting import structure_range
from .state import Snapshot, client_capabilities, document_of, editor_state, encoding, off_loop, structure

LEGEND = types.SemanticTokensLegend(token_types=list(TOKEN_TYPES), token_modifiers=list(TOKEN_MODIFIERS))


def tokens(ls: ContextAssemblyServer, snap: Snapshot, params: Any) -> types.SemanticTokens | None:
    from ...editor.semantics import semantic_tokens  # late: the engine is imported after `initialize`

    state = editor_state(ls)
    state.asked.add(types.WORKSPACE_SEMANTIC_TOKENS_REFRESH)
    document = document_of(ls, snap)
    if document is None:
        return None
    selection = structure_range(getattr(params, "range", None))
    return types.SemanticTokens(data=semantic_tokens(document, state.workspace(), encoding(ls), selection))


def hints(ls: ContextAssemblyServer, snap: Snapshot, params: types.InlayHintParams) -> list[types.InlayHint] | None:
    from ...editor.semantics import inlay_hints  # late: the engine is imported after `initialize`

    state = editor_state(ls)
    state.asked.add(types.WORKSPACE_INLAY_HINT_REFRESH)
    document = document_of(ls, snap)
    if document is None:
        return None
    found = inlay_hints(document, state.workspace(), encoding(ls), structure_range(params.range))
    return [structure(ls, hint, types.InlayHint) for hint in found]


def refresh(ls: ContextAssemblyServer) -> None:
    """Another document changed (a memory's placement, a variable): ask the client to request the
    hints and tokens of its open documents again, when it accepts that request and has asked for
    them before."""
    capabilities = client_capabilities(ls)
    workspace = capabilities.workspace if capabilities is not None else None
    if workspace is None:
        return
    asked = editor_state(ls).asked
    if types.WORKSPACE_INLAY_HINT_REFRESH in asked and workspace.inlay_hint is not None \
            and workspace.inlay_hint.refresh_support:
        ls.protocol.send_request(types.WORKSPACE_INLAY_HINT_REFRESH, None)
    if types.WORKSPACE_SEMANTIC_TOKENS_REFRESH in asked and workspace.semantic_tokens is not None \
            and workspace.semantic_tokens.refresh_support:
        ls.protocol.send_request(types.WORKSPACE_SEMANTIC_TOKENS_REFRESH, None)


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    async def on_tokens(ls: ContextAssemblyServer, params: types.SemanticTokensParams) -> types.SemanticTokens | None:
        return await off_loop(ls, tokens, params)

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_RANGE, LEGEND)
    async def on_tokens_range(ls: ContextAssemblyServer,
                              params: types.SemanticTokensRangeParams) -> types.SemanticTokens | None:
        return await off_loop(ls, tokens, params)

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    async def on_inlay_hint(ls: ContextAssemblyServer, params: types.InlayHintParams) -> list[types.InlayHint] | None:
        return await off_loop(ls, hints, params)
