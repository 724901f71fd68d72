"""Build the PostgreSQL `StoreSet` from the settings: DSN, project key, and what stays in the checkout.

`CONTEXT_ASSEMBLY_DSN` overrides `stores.dsn` (so passwords stay out of files under version
control); the project key is `stores.project`, else the workspace folder's name. Markdown notes
and workspace files stay in the checkout (they are files an editor shows), as do the definition
files and collection settings; the knowledge graph and every other kind live in the database.
"""

from __future__ import annotations

import os

from ...workspace.layout import WorkspaceLayout
from ...workspace.settings import StoreSettings
from ..files.notes import MarkdownNotes
from ..files.workspace_files import WorkspaceFiles
from ..store_set import StoreSet
from .blobs import PgBlobStore
from .database import PgDatabase
from .documents import PgJsonStore
from .graph import PgGraph
from .kv import PgKVStore, PgWorkingMemory
from .records import PgEpisodicStore, PgEventLog
from .vector import PgVectorStore

DSN_VARIABLE = "CONTEXT_ASSEMBLY_DSN"
# Every kind in the database, the graph included (one `StoreSet.batch()`); notes stay files.
POSTGRES_BATCHED = frozenset({"kv", "json", "log", "episodic", "working", "blob", "vector", "graph"})


MISSING_DSN = (f'stores.backend is "postgres" but no DSN is set: set stores.dsn in .codebolt/context-assembly.json '
               f"or the environment variable {DSN_VARIABLE}")


def resolve_dsn(settings: StoreSettings) -> str | None:
    return os.environ.get(DSN_VARIABLE) or settings.dsn or None


def project_key(layout: WorkspaceLayout, settings: StoreSettings) -> str:
    return settings.project or layout.root.resolve().name


def open_postgres_stores(layout: WorkspaceLayout, settings: StoreSettings) -> StoreSet:
    db = PgDatabase(resolve_dsn(settings), project_key(layout, settings), missing_dsn=MISSING_DSN,
                    invalidation=settings.invalidation)
    return StoreSet(kv=PgKVStore(db), json_docs=PgJsonStore(db), events=PgEventLog(db),
                    episodic=PgEpisodicStore(db), working=PgWorkingMemory(db), blobs=PgBlobStore(db),
                    notes=MarkdownNotes(layout.memory_dir, layout.locks_dir), files=WorkspaceFiles(layout.root),
                    vectors=PgVectorStore(db, layout.vectordb_dir, ef_search=settings.ef_search),
                    graph=PgGraph(db, layout), backend="postgres", closers=[db.close], migrator=db.migrate,
                    database=db, batched=POSTGRES_BATCHED)
