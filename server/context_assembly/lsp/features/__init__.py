"""Editor features over LSP (SPEC §9): each module registers its typed pygls handlers once and only
translates between lsprotocol types and the pure functions of `context_assembly.editor`.

Registering needs only names and options (`editor/capabilities.py`): the `editor` functions, which
import the whole engine, are imported inside the handlers, and all at once by `load` on the thread
that builds the session (before any handler runs), so no two threads import them concurrently.
"""

from __future__ import annotations

import importlib

from ..server import ContextAssemblyServer

IMPLEMENTATIONS = ("actions", "completion", "dependencies", "diagnostics", "documents", "formatting", "hover",
                   "navigation", "semantics", "tests")  # modules of `context_assembly.editor` the handlers use


def load() -> None:
    for name in IMPLEMENTATIONS:
        importlib.import_module(f"{__package__.rsplit('.', 2)[0]}.editor.{name}")
    importlib.import_module(f"{__package__.rsplit('.', 2)[0]}.lsp.editor_state")


def register(server: ContextAssemblyServer) -> None:
    from . import actions, completion, diagnostics, documents, formatting, hover, lens, navigation, semantics

    server.preload.append(load)
    for feature in (documents, diagnostics, completion, hover, actions, navigation, formatting, semantics, lens):
        feature.register(server)
