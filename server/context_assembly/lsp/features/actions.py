"""textDocument/codeAction: quick fixes for the diagnostics in the request, and the canonical rewrite."""

from __future__ import annotations

from lsprotocol import types

from ...editor.capabilities import CODE_ACTION_KINDS
from .. import pygls_compat as compat
from ..server import ContextAssemblyServer
from .state import Snapshot, document_of, encoding, off_loop, structure


def compute(ls: ContextAssemblyServer, snap: Snapshot, params: types.CodeActionParams) \
        -> list[types.CodeAction] | None:
    from ...editor.actions import code_actions  # late: the engine is imported after `initialize`

    document = document_of(ls, snap)
    if document is None:
        return None
    converter = compat.converter_of(ls.protocol)
    diagnostics = [converter.unstructure(d) for d in params.context.diagnostics]
    only = [str(k.value if hasattr(k, "value") else k) for k in params.context.only or []] or None
    found = code_actions(document, diagnostics, ls.require_session().places, encoding(ls), only)
    return [structure(ls, a, types.CodeAction) for a in found]


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind(kind) for kind in CODE_ACTION_KINDS]))
    async def on_code_action(ls: ContextAssemblyServer, params: types.CodeActionParams) \
            -> list[types.CodeAction] | None:
        return await off_loop(ls, compute, params)
