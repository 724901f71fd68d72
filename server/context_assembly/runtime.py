"""One workspace, wired: the loader, the stores, the pipeline executor and the assembler.

The CLI and the sidecar both build a `Runtime`; neither wires stores by hand. Everything is
created lazily and embedded: opening a workspace starts nothing and downloads nothing.
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
from .stores.kuzu.graph import KuzuGraph
from .stores.memory import MemoryRouter
from .stores.sqlite.database import Database
from .stores.sqlite.vector import SqliteVectorStore
from .workspace.loader import Workspace, WorkspaceLoader


class Runtime:
    def __init__(self, root: Path | str) -> None:
        self.loader = WorkspaceLoader(root)
        self.layout = self.loader.layout
        self._lock = threading.Lock()
        self._workspace: Workspace | None = None
        self.database = Database(self.layout.db_path)
        self.vectors = SqliteVectorStore(self.database, self.layout.vectordb_dir)
        self.graph = KuzuGraph(self.layout)
        self.memory = MemoryRouter(self.layout, vectors=self.vectors, graph=self.graph, database=self.database)
        self.stores = StoreBundleView(self.memory)
        self.cache = ResultCache()
        self.executor = Executor(self.memory, self.stores, self.cache)
        self.assembler = Assembler(self.workspace, self.memory, self.stores, self.executor)

    @property
    def root(self) -> Path:
        return self.loader.root

    def workspace(self) -> Workspace:
        """The workspace as on disk now (files re-read only when they changed)."""
        with self._lock:
            self._workspace = self.loader.load()
            self.cache.ttl_s = self._workspace.settings.cache_ttl_s
            return self._workspace

    def assemble(self, request: Any, **options: Any) -> AssembledContext:
        return self.assembler.assemble(request, **options)

    def close(self) -> None:
        self.executor.close()
        self.graph.close()
        self.memory.close()
