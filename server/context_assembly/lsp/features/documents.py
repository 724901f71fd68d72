"""Text synchronisation: open, change, save and close keep the document store current and
schedule diagnostics (see `diagnostics`)."""

from __future__ import annotations

from lsprotocol import types

from ..server import ContextAssemblyServer
from . import diagnostics
from .state import editor_state


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ContextAssemblyServer, params: types.DidOpenTextDocumentParams) -> None:
        diagnostics.schedule(ls, params.text_document.uri, immediate=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ContextAssemblyServer, params: types.DidChangeTextDocumentParams) -> None:
        diagnostics.schedule(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: ContextAssemblyServer, params: types.DidSaveTextDocumentParams) -> None:
        editor_state(ls).disk_changed()
        diagnostics.schedule(ls, params.text_document.uri, immediate=True, others=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ContextAssemblyServer, params: types.DidCloseTextDocumentParams) -> None:
        from ...editor.dependencies import contributions  # late: the engine is imported after `initialize`

        uri = params.text_document.uri
        state = editor_state(ls)
        timer = state.timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        # also a document no longer a definition (`$schema` broken), whose last diagnostics were cleared
        relpath = state.store.close(uri)
        if relpath is not None and not diagnostics.pull_supported(ls):
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if relpath is not None:  # the workspace falls back to the file on disk
            diagnostics.dependents_changed(ls, uri, relpath, contributions(state.disk_source(relpath)))
        state.forget(uri)
