"""Editor features over LSP (SPEC §9): each module registers its typed pygls handlers once and only
translates between lsprotocol types and the pure functions of `context_assembly.editor`."""

from __future__ import annotations

from ..server import ContextAssemblyServer


def register(server: ContextAssemblyServer) -> None:
    from . import actions, completion, diagnostics, documents, formatting, hover, lens, navigation, semantics

    for feature in (documents, diagnostics, completion, hover, actions, navigation, formatting, semantics, lens):
        feature.register(server)
