"""Diagnostics: pulled (`textDocument/diagnostic`, `workspace/diagnostic`) when the client supports
it, else pushed with the document version after a per-document debounce (`diagnostics_debounce_ms`).
Other open documents are re-checked only when an edit changes what they read from it (ids and
declared variables, `editor/dependencies.py`) and they name it, or when `.codebolt/` changes on
disk; once per debounce window, and for push clients only the `limits.eager_documents` most
recently touched ones (the others when next touched; pull clients get one refresh request)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import TYPE_CHECKING, Any

import orjson
from lsprotocol import types

from .. import pygls_compat as compat
from ..server import ContextAssemblyServer
from . import semantics
from .state import (
    Snapshot,
    client_capabilities,
    current_document,
    document_of,
    editor_state,
    encoding,
    snapshot,
    structure,
)

if TYPE_CHECKING:
    from ...methods import Session

logger = logging.getLogger(__name__)
IDENTIFIER = "context-assembly"
# kinds whose content other documents read (memory ids, declared variables, duplicate ids)
SHARED_KINDS = ("persistent-memory", "rule-engine", "context-rules")


def pull_supported(ls: ContextAssemblyServer) -> bool:
    capabilities = client_capabilities(ls)
    text_document = capabilities.text_document if capabilities is not None else None
    return bool(text_document is not None and text_document.diagnostic is not None)


def refresh_supported(ls: ContextAssemblyServer) -> bool:
    capabilities = client_capabilities(ls)
    workspace = capabilities.workspace if capabilities is not None else None
    return bool(workspace is not None and workspace.diagnostics is not None and workspace.diagnostics.refresh_support)


def _debounce_s(ls: ContextAssemblyServer) -> float:
    try:
        return max(0, ls.require_session().settings().diagnostics_debounce_ms) / 1000
    except Exception:
        return 0.3


def compute(ls: ContextAssemblyServer, snap: Snapshot) -> tuple[int | None, list[types.Diagnostic]] | None:
    from ...editor.diagnostics import document_diagnostics  # late: the engine is imported after `initialize`

    document = document_of(ls, snap)
    state = editor_state(ls)
    if document is None:  # a `$schema` file an edit broke: what was published for it is cleared
        return (snap.version, []) if state.store.known(snap.uri) is not None else None
    found = document_diagnostics(document, state.workspace(), encoding(ls), ran_on(state, document),
                                 ls.require_session().lookup)
    return document.version, [structure(ls, d, types.Diagnostic) for d in found]


def ran_on(state: Any, document: Any) -> list[Any]:
    """Results of "Run test" on exactly this text of the document (none once it changed)."""
    text, results = state.test_runs.get(document.relpath, ("", []))
    return results if text == document.text else []


def _publish(ls: ContextAssemblyServer, uri: str) -> None:
    """Compute off the event loop, publish on it (unless a newer version arrived meanwhile)."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(ls.workers, compute, ls, snapshot(ls, uri))

    def done(f: asyncio.Future[Any]) -> None:
        if f.cancelled():
            return
        if f.exception() is not None:
            logger.warning("diagnostics of %s failed: %s", uri, f.exception())
            return
        result = f.result()
        if result is None:
            return
        version, found = result
        open_doc = compat.open_document(ls.workspace, uri)
        if open_doc is None or (version is not None and open_doc.version != version):
            return  # closed, or a newer version is on its way
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=found,
                                                                            version=version))
        warm(ls, uri)

    future.add_done_callback(done)


def warm(ls: ContextAssemblyServer, uri: str) -> None:
    """After publishing, build the document's tree and line index on a worker, so the next edit
    re-parses incrementally and completion finds them ready."""
    document = editor_state(ls).store.get(uri)
    if document is not None:
        ls.workers.submit(document.parsed.warm)


def schedule(ls: ContextAssemblyServer, uri: str, immediate: bool = False, others: bool = False) -> None:
    """Re-parse now (cheap: once per version) and publish after the debounce (push clients); the
    documents that depend on what this one changed are re-checked at the end of the window."""
    from ...editor.dependencies import contributions  # late: the engine is imported after `initialize`

    document = current_document(ls, uri)
    state = editor_state(ls)
    relpath = document.relpath if document is not None else state.store.known(uri)
    if relpath is None:
        return  # not a definition, and never was one while open
    state.touch(uri)
    if not pull_supported(ls):
        timer = state.timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        delay = 0.0 if immediate else _debounce_s(ls)
        if delay <= 0:
            _publish(ls, uri)
        else:
            state.timers[uri] = asyncio.get_running_loop().call_later(delay, _publish, ls, uri)
    if document is None:  # no longer a definition: it gives the others nothing now
        dependents_changed(ls, uri, relpath, frozenset())
        return
    if document.kind == "persistent-memory":
        semantics.refresh(ls)  # other documents' hints and tokens show a memory's placement
    if others:
        refresh_others(ls, uri)
    else:
        dependents_changed(ls, uri, document.relpath, contributions(document.source))


def dependents_changed(ls: ContextAssemblyServer, uri: str, relpath: str, now: frozenset[Any]) -> None:
    """Queue the open documents that name an id or variable this document stopped or started
    giving the workspace (compared with its previous version, or the file on disk)."""
    from ...editor.dependencies import affected, changed_names, contributions  # late: see features/__init__.py

    state = editor_state(ls)
    before = state.contributed.get(uri)
    if before is None:
        before = contributions(state.disk_source(relpath))
    state.contributed[uri] = now
    names = changed_names(before, now)
    if not names:
        return  # almost every keystroke: nothing another document reads has changed
    others = ((d.uri, d.text) for d in state.store.all() if d.uri != uri and compat.is_open(ls.workspace, d.uri))
    state.pending.update(affected(names, others))
    _flush_later(ls)


def refresh_others(ls: ContextAssemblyServer, changed_uri: str | None) -> None:
    """Re-check the other open documents at the end of the window (the disk changed)."""
    state = editor_state(ls)
    state.pending.update(d.uri for d in state.store.all() if d.uri != changed_uri)
    _flush_later(ls)


def _flush_later(ls: ContextAssemblyServer) -> None:
    state = editor_state(ls)
    if state.flush is None and state.pending:
        state.flush = asyncio.get_running_loop().call_later(_debounce_s(ls), _flush, ls)


def _flush(ls: ContextAssemblyServer) -> None:
    """One re-check per queued document per window; push clients only for the eager ones."""
    state = editor_state(ls)
    state.flush = None
    pending, state.pending = state.pending, set()
    if pending:
        semantics.refresh(ls)  # their inlay hints and tokens depend on it too
    if pull_supported(ls):
        if pending and refresh_supported(ls):
            ls.protocol.send_request(types.WORKSPACE_DIAGNOSTIC_REFRESH, None)
        return
    eager = state.eager(ls.require_session().current_limits().eager_documents)
    for uri in sorted(pending & eager):
        if compat.is_open(ls.workspace, uri):
            _publish(ls, uri)


def _on_workspace_changed(ls: ContextAssemblyServer) -> Any:
    def listener(session: Session) -> None:  # on a worker thread, after the session re-read the disk
        editor_state(ls).disk_changed()
        ls.post(refresh_others, ls, None)

    return listener


def register(server: ContextAssemblyServer) -> None:
    server.on_workspace_changed.append(_on_workspace_changed(server))

    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC,
                    types.DiagnosticOptions(identifier=IDENTIFIER, inter_file_dependencies=True,
                                            workspace_diagnostics=True))
    async def pull(ls: ContextAssemblyServer, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(ls.workers, compute, ls, snapshot(ls, params.text_document.uri))
        warm(ls, params.text_document.uri)
        items = result[1] if result else []
        result_id = _result_id(ls, items)
        if params.previous_result_id == result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=result_id)

    @server.feature(types.WORKSPACE_DIAGNOSTIC)
    async def pull_workspace(ls: ContextAssemblyServer, params: types.WorkspaceDiagnosticParams) \
            -> types.WorkspaceDiagnosticReport:
        loop = asyncio.get_running_loop()
        previous = {p.uri: p.value for p in params.previous_result_ids}
        return await loop.run_in_executor(ls.workers, workspace_report, ls, previous)


def _result_id(ls: ContextAssemblyServer, items: list[types.Diagnostic]) -> str:
    """Names the report's content: a client that sends it back gets "unchanged" while it holds."""
    data = orjson.dumps(compat.converter_of(ls.protocol).unstructure(items))
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def workspace_report(ls: ContextAssemblyServer, previous: dict[str, str] | None = None) \
        -> types.WorkspaceDiagnosticReport:
    from ...editor.diagnostics import document_diagnostics  # late: the engine is imported after `initialize`
    from ...editor.documents import document_from_source

    state = editor_state(ls)
    workspace = state.workspace()
    lookup_of = ls.require_session().lookup
    items: list[types.WorkspaceDocumentDiagnosticReport] = []
    open_docs = {d.relpath: d for d in state.store.all()}
    for relpath, source in workspace.files.items():
        document = open_docs.get(relpath) or document_from_source(source, state.store.places)
        found = [structure(ls, d, types.Diagnostic)
                 for d in document_diagnostics(document, workspace, encoding(ls), ran_on(state, document),
                                               lookup_of)]
        result_id = _result_id(ls, found)
        if (previous or {}).get(document.uri) == result_id:
            items.append(types.WorkspaceUnchangedDocumentDiagnosticReport(
                uri=document.uri, result_id=result_id, version=document.version))
        else:
            items.append(types.WorkspaceFullDocumentDiagnosticReport(
                uri=document.uri, items=found, version=document.version, result_id=result_id))
    return types.WorkspaceDiagnosticReport(items=items)
