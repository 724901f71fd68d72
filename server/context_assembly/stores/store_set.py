"""One workspace's stores: one per kind, typed by the interfaces, whichever backend built them.

`stores.factory.open_stores` builds a `StoreSet` from the settings' `stores.backend`; the URI layer
(`MemoryRouter`), the pipelines and the cache only ever see these interfaces. Each store reports
its own write generation, so a cache asks the store it read, never a backend's database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from attrs import define, field

from ..errors import StorageError
from .graph import GraphStore
from .interfaces import (
    Batching,
    BlobStore,
    EpisodicStore,
    EventLog,
    FileReader,
    JsonStore,
    KVStore,
    NoteStore,
    WorkingMemory,
)
from .vector import VectorStore

# URI scheme -> the StoreSet attribute holding its store.
SCHEME_STORES = {"kv": "kv", "json": "json_docs", "log": "events", "episodic": "episodic", "working": "working",
                 "blob": "blobs", "markdown": "notes", "file": "files", "vector": "vectors", "graph": "graph"}


@define
class StoreSet:
    kv: KVStore
    json_docs: JsonStore
    events: EventLog
    episodic: EpisodicStore
    working: WorkingMemory
    blobs: BlobStore
    notes: NoteStore
    files: FileReader
    vectors: VectorStore | None
    graph: GraphStore | None
    backend: str = "embedded"
    closers: list[Callable[[], None]] = field(factory=list)
    migrator: Callable[[], dict[str, Any]] | None = None  # a server backend's schema migrations
    database: Batching | None = None  # the database the `batched` schemes' stores share
    batched: frozenset[str] = frozenset()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The writes to the `batched` schemes' stores on this thread, until the block ends, as one
        transaction of their database (see `Batching`); other stores write as they go."""
        if self.database is None:
            yield
            return
        with self.database.batch():
            yield

    def migrate(self) -> dict[str, Any]:
        """Bring the backend's schema up to date (embedded stores create their tables on first use)."""
        if self.migrator is None:
            return {"backend": self.backend, "applied": [], "note": "embedded stores create their tables on use"}
        return self.migrator()

    def store(self, scheme: str) -> object:
        found = getattr(self, SCHEME_STORES[scheme])
        if found is None:
            name = "vector store" if scheme == "vector" else "knowledge graph"
            raise StorageError(f"the {name} is not configured")
        return found

    def generation(self, scheme: str) -> int:
        """The write generation of the store behind a URI scheme (0 for one not configured)."""
        found = getattr(self, SCHEME_STORES[scheme])
        return 0 if found is None else int(found.generation())

    def close(self) -> None:
        for close in self.closers:
            close()
