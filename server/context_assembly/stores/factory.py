"""The one place that turns the settings' `stores.backend` into a `StoreSet`.

Nothing outside `stores/` names a backend: the runtime, the CLI and the tests ask this factory.
Every backend opens lazily (no connection until the first call), so a workspace opens at once
even when its database server is away; a call then fails with a clear StorageError.
"""

from __future__ import annotations

from ..workspace.layout import WorkspaceLayout
from ..workspace.settings import StoreSettings
from .files.notes import MarkdownNotes
from .files.workspace_files import WorkspaceFiles
from .kuzu.graph import KuzuGraph
from .sqlite.blobs import SqliteBlobStore
from .sqlite.database import Database
from .sqlite.episodic import SqliteEpisodicStore
from .sqlite.events import SqliteEventLog
from .sqlite.json_docs import SqliteJsonStore
from .sqlite.kv import SqliteKVStore
from .sqlite.vector import SqliteVectorStore
from .sqlite.working import SqliteWorkingMemory
from .store_set import StoreSet

BACKENDS = ("embedded", "postgres")
# The schemes whose embedded stores live in the one SQLite database (one `StoreSet.batch()`).
EMBEDDED_BATCHED = frozenset({"kv", "json", "log", "episodic", "working", "blob", "vector"})


def open_stores(layout: WorkspaceLayout, settings: StoreSettings | None = None) -> StoreSet:
    settings = settings if settings is not None else StoreSettings()
    if settings.backend == "postgres":
        from .postgres.stores import open_postgres_stores  # late: psycopg loads only when chosen

        return open_postgres_stores(layout, settings)
    return open_embedded_stores(layout)


def open_embedded_stores(layout: WorkspaceLayout, database: Database | None = None, *,
                         components: bool = True) -> StoreSet:
    """The embedded stores; `components=False` leaves out the vector store and the graph (callers that
    bring their own, or need neither)."""
    db = database if database is not None else Database(layout.db_path)
    graph = KuzuGraph(layout) if components else None
    return StoreSet(kv=SqliteKVStore(db), json_docs=SqliteJsonStore(db), events=SqliteEventLog(db),
                    episodic=SqliteEpisodicStore(db), working=SqliteWorkingMemory(db), blobs=SqliteBlobStore(db),
                    notes=MarkdownNotes(layout.memory_dir, layout.locks_dir), files=WorkspaceFiles(layout.root),
                    vectors=SqliteVectorStore(db, layout.vectordb_dir) if components else None, graph=graph,
                    backend="embedded", closers=[*([graph.close] if graph else []), db.close],
                    database=db,  # without components, a caller's vector store may sit elsewhere
                    batched=EMBEDDED_BATCHED if components else EMBEDDED_BATCHED - {"vector"})
