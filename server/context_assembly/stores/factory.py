"""The one place that turns the settings' `stores.backend` into a `StoreSet`.

Nothing outside `stores/` names a backend: the runtime, the CLI and the tests ask this factory.
Every backend opens lazily (no connection until the first call), so a workspace opens at once
even when its database server is away; a call then fails with a clear StorageError.

Settings the schema refuses under `stores` (a typo like `"dns"` for `"dsn"`) open no backend at
all: falling back to the embedded stores would split a swarm's memory without a word. Every store
call then fails with the problems and their key paths; notes and workspace files, which live in
the checkout whatever the backend, keep working.
"""

from __future__ import annotations

from typing import Any

from ..errors import StorageError
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


def open_stores(layout: WorkspaceLayout, settings: StoreSettings | None = None,
                refused: list[str] | None = None) -> StoreSet:
    """The stores the settings name; `refused`: the settings' problems under `stores` (path: message),
    which open none."""
    if refused:
        return refused_stores(layout, refused)
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


class RefusedStore:
    """Stands for a store the settings did not allow to open: every call fails with why."""

    def __init__(self, message: str) -> None:
        self._message = message

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def refuse(*_args: Any, **_kwargs: Any) -> Any:
            raise StorageError(self._message, {"settings": SETTINGS_FILE})
        return refuse


SETTINGS_FILE = ".codebolt/context-assembly.json"


def refused_message(problems: list[str]) -> str:
    return (f"the stores are not opened: {SETTINGS_FILE} has {len(problems)} "
            f"error{'s' if len(problems) > 1 else ''} under stores ({'; '.join(problems)}); fix the file and "
            "restart the sidecar")


def refused_stores(layout: WorkspaceLayout, problems: list[str]) -> StoreSet:
    store: Any = RefusedStore(refused_message(problems))
    return StoreSet(kv=store, json_docs=store, events=store, episodic=store, working=store, blobs=store,
                    notes=MarkdownNotes(layout.memory_dir, layout.locks_dir), files=WorkspaceFiles(layout.root),
                    vectors=store, graph=store, backend="refused", migrator=store.migrate)
