"""One workspace, wired: the loader, the stores, the pipeline executor and the assembler.

The CLI and the sidecar both build a `Runtime`; neither wires stores by hand. The settings are read
first, then the stores' factory builds the backend they name (embedded unless `stores.backend`
says otherwise); everything opens lazily: opening a workspace starts nothing, connects to nothing
and downloads nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .assembly.cache import ResultCache
from .assembly.engine import Assembler
from .assembly.execute import Executor
from .model.context import AssembledContext
from .stores.bundle import StoreBundleView
from .stores.factory import open_stores
from .stores.memory import MemoryRouter
from .workspace.loader import Workspace, WorkspaceLoader
from .workspace.settings import load_settings


class Runtime:
    def __init__(self, root: Path | str) -> None:
        self.loader = WorkspaceLoader(root)
        self.layout = self.loader.layout
        self._lock = threading.Lock()
        self._workspace: Workspace | None = None
        # The backend is chosen once, from the settings file, before any store is built.
        settings, _ = load_settings(self.layout.settings_path)
        self.memory = MemoryRouter(self.layout, stores=open_stores(self.layout, settings.stores))
        self.stores = StoreBundleView(self.memory)
        self.cache = ResultCache()
        self.executor = Executor(self.memory, self.stores, self.cache)
        self.assembler = Assembler(self.workspace, self.memory, self.stores, self.executor)

    @property
    def root(self) -> Path:
        return self.loader.root

    @property
    def vectors(self) -> Any:
        return self.memory.vectors

    @property
    def graph(self) -> Any:
        return self.memory.graph

    def workspace(self) -> Workspace:
        """The workspace as on disk now (files re-read only when they changed)."""
        with self._lock:
            self._workspace = self.loader.load()
            self.cache.ttl_s = self._workspace.settings.cache_ttl_s
            return self._workspace

    def last_workspace(self) -> Workspace | None:
        """The workspace as last loaded, without looking at the disk (None before the first load)."""
        return self._workspace

    def assemble(self, request: Any, **options: Any) -> AssembledContext:
        return self.assembler.assemble(request, **options)

    def close(self) -> None:
        self.executor.close()
        self.assembler.summaries.close()
        self.memory.close()
