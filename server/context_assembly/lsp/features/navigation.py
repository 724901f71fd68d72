"""Document symbols, definition, references, rename (memory ids across the workspace), folding."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types

from ..server import ContextAssemblyServer
from .state import (
    Snapshot,
    client_capabilities,
    document_of,
    editor_state,
    encoding,
    off_loop,
    position,
    structure,
)

if TYPE_CHECKING:
    from ...editor.documents import EditorDocument

T = TypeVar("T")


def _at(ls: ContextAssemblyServer, snap: Snapshot, params: Any) \
        -> tuple[EditorDocument, str, Any, dict[str, EditorDocument]] | None:
    from ...editor import navigation as nav  # late: the engine is imported after `initialize`

    document = document_of(ls, snap)
    if document is None:
        return None
    state = editor_state(ls)
    workspace = state.workspace()
    memory_id = nav.memory_id_at(document, document.offset(position(params), encoding(ls)), workspace)
    if memory_id is None:
        return None
    return document, memory_id, workspace, {d.relpath: d for d in state.store.all()}


def definition(ls: ContextAssemblyServer, snap: Snapshot, params: types.DefinitionParams) -> types.Location | None:
    from ...editor import navigation as nav

    found = _at(ls, snap, params)
    if found is None:
        return None
    doc, memory_id, workspace, open_docs = found
    where = nav.definition(memory_id, workspace, open_docs, encoding(ls), doc.places)
    return structure(ls, where, types.Location) if where else None


def references(ls: ContextAssemblyServer, snap: Snapshot, params: types.ReferenceParams) \
        -> list[types.Location] | None:
    from ...editor import navigation as nav

    found = _at(ls, snap, params)
    if found is None:
        return None
    doc, memory_id, workspace, open_docs = found
    return [structure(ls, loc, types.Location) for loc in nav.references(
        memory_id, workspace, open_docs, encoding(ls), params.context.include_declaration, doc.places)]


def rename(ls: ContextAssemblyServer, snap: Snapshot, params: types.RenameParams) -> types.WorkspaceEdit | None:
    from ...editor import navigation as nav

    found = _at(ls, snap, params)
    if found is None:
        return None
    doc, memory_id, workspace, open_docs = found
    return structure(ls, nav.rename(memory_id, params.new_name, workspace, open_docs, encoding(ls),
                                    _renames_files(ls), doc.places), types.WorkspaceEdit)


def _renames_files(ls: ContextAssemblyServer) -> bool:
    """Whether the editor applies a file rename inside a workspace edit."""
    capabilities = client_capabilities(ls)
    edit = capabilities.workspace.workspace_edit if capabilities and capabilities.workspace else None
    operations = (edit.resource_operations or []) if edit is not None else []
    return bool(edit and edit.document_changes and types.ResourceOperationKind.Rename in operations)


def symbols(ls: ContextAssemblyServer, snap: Snapshot, params: types.DocumentSymbolParams) \
        -> list[types.DocumentSymbol] | None:
    from ...editor import navigation as nav

    document = document_of(ls, snap)
    if document is None:
        return None
    return [structure(ls, s, types.DocumentSymbol) for s in nav.document_symbols(document, encoding(ls))]


def folding(ls: ContextAssemblyServer, snap: Snapshot, params: types.FoldingRangeParams) \
        -> list[types.FoldingRange] | None:
    from ...editor import navigation as nav

    document = document_of(ls, snap)
    if document is None:
        return None
    return [structure(ls, r, types.FoldingRange) for r in nav.folding_ranges(document)]


def _off_loop(fn: Callable[[ContextAssemblyServer, Snapshot, Any], T]) -> Callable[[ContextAssemblyServer, Any], Any]:
    async def handler(ls: ContextAssemblyServer, params: Any) -> T:
        return await off_loop(ls, fn, params)

    return handler


def register(server: ContextAssemblyServer) -> None:
    server.feature(types.TEXT_DOCUMENT_DEFINITION)(_off_loop(definition))
    server.feature(types.TEXT_DOCUMENT_REFERENCES)(_off_loop(references))
    server.feature(types.TEXT_DOCUMENT_RENAME)(_off_loop(rename))
    server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)(_off_loop(symbols))
    server.feature(types.TEXT_DOCUMENT_FOLDING_RANGE)(_off_loop(folding))
