"""One interface per store kind (SPEC §5.3), and the records they return.

The embedded implementations (SQLite in `sqlite/`, files in `files/`) are the default; a shared
server database can later implement the same protocols so a swarm spanning machines works alike.
Every store exposes `generation()`: a number that changes with every write, whichever process made
it, so caches can tell that what they hold is stale. Values of KV, JSON and working memory are any
JSON value (null included): `get` returns None for a missing entry and an entry for a present one.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from attrs import frozen


@frozen
class KVEntry:
    instance: str
    namespace: str
    key: str
    value: Any
    updated_at: float


@frozen
class JsonDocument:
    name: str
    value: Any
    updated_at: float
    size: int  # bytes of the stored JSON text


@frozen
class WorkingEntry:
    thread_id: str
    key: str
    value: Any
    updated_at: float


@frozen
class BlobInfo:
    bucket: str
    key: str
    size: int
    sha256: str
    updated_at: float


@frozen
class ThreadInfo:
    """An episodic thread or an event-log instance: a name, how many records, the newest time."""

    name: str
    count: int
    last_ts: float


@frozen
class NoteInfo:
    name: str  # relative path under .codebolt/memory/, without ".md"
    size: int
    modified: float


@frozen
class FileInfo:
    path: str  # workspace-relative, "/" separators
    is_dir: bool
    size: int
    modified: float


@runtime_checkable
class Generational(Protocol):
    def generation(self) -> int: ...


@runtime_checkable
class Batching(Protocol):
    """The database several stores share (`StoreSet.database`): many writes as one transaction."""

    def batch(self) -> AbstractContextManager[None]:
        """Every write this thread makes through the stores on this database, until the block ends,
        commits at its end or not at all (an exception inside rolls all of them back). Reads inside
        see the batch's own writes; other connections see none of them until it commits."""
        ...

    def in_batch(self) -> bool: ...


@runtime_checkable
class StagedWrites(Protocol):
    """Writes prepared beside their targets, applied by `commit` (all, or none: a failure puts back
    what it had applied) or dropped by `discard`."""

    def commit(self) -> int: ...

    def discard(self) -> None: ...


@runtime_checkable
class KVStore(Protocol):
    def get(self, instance: str, namespace: str, key: str) -> KVEntry | None: ...

    def set(self, instance: str, namespace: str, key: str, value: Any) -> KVEntry: ...

    def set_many(self, entries: Sequence[tuple[str, str, str, Any]]) -> int:
        """(instance, namespace, key, value) rows in one transaction; the number written."""
        ...

    def delete(self, instance: str, namespace: str, key: str) -> bool: ...

    def list(self, instance: str | None = None, namespace: str | None = None, key_prefix: str = "",
             *, values: bool = True) -> list[KVEntry]:
        """Entries sorted by (instance, namespace, key); `values=False` leaves `value` None (cheaper)."""
        ...

    def generation(self) -> int: ...


@runtime_checkable
class JsonStore(Protocol):
    def get(self, name: str, pointer: str = "") -> tuple[bool, Any]:
        """(found, value): the document, or the part a JSON pointer names; (False, None) when missing."""
        ...

    def put(self, name: str, value: Any, pointer: str = "") -> JsonDocument:
        """Replace the document, or (with a pointer) the part it names inside an existing document."""
        ...

    def delete(self, name: str, pointer: str = "") -> bool: ...

    def list(self, prefix: str = "") -> list[JsonDocument]:
        """Documents sorted by name, `value` None."""
        ...

    def generation(self) -> int: ...


@runtime_checkable
class EventLog(Protocol):
    """Append-only: there is no update and no delete."""

    def append(self, instance: str, event_type: str, payload: dict[str, Any], ts: float | None = None,
               *, key: str | None = None) -> dict[str, Any]:
        """The stored event `{id, instance, event_type, payload, ts}`. With an idempotency `key` that
        an event of this instance already has: that event plus `duplicate: true`, nothing appended."""
        ...

    def keyed(self, instance: str, key: str) -> dict[str, Any] | None:
        """The event appended with this idempotency key, if any."""
        ...

    def search(self, instance: str, event_type: str | Sequence[str] | None = None, since: float | None = None,
               fields: Sequence[str] | Mapping[str, Any] | None = None, limit: int = 20,
               before: int | None = None) -> list[dict[str, Any]]:
        """Events newest first. `fields` as a list keeps only those payload fields; as a mapping
        (the log_search step's `fields`) keeps only events whose payload fields equal its values.
        `before`: an event id of this instance; only events older than it (paging back)."""
        ...

    def get(self, instance: str, event_id: int) -> dict[str, Any] | None: ...

    def instances(self) -> list[ThreadInfo]: ...

    def generation(self) -> int: ...


@runtime_checkable
class EpisodicStore(Protocol):
    def append(self, thread_id: str, turn: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        """The stored turn: the given `{role, content, …}` plus `seq` and `ts`. With an idempotency
        `key` that a turn of this thread already has: that turn plus `duplicate: true`, nothing appended."""
        ...

    def keyed(self, thread_id: str, key: str) -> dict[str, Any] | None:
        """The turn appended with this idempotency key, if any (clearing the thread forgets them)."""
        ...

    def recent(self, thread_id: str, limit: int = 10, before: int | None = None) -> list[dict[str, Any]]:
        """The last `limit` turns, oldest first (`before`: of those whose seq is below it)."""
        ...

    def count(self, thread_id: str) -> int: ...

    def clear(self, thread_id: str) -> int: ...

    def threads(self) -> list[ThreadInfo]: ...

    def generation(self) -> int: ...


@runtime_checkable
class WorkingMemory(Protocol):
    def get(self, thread_id: str, key: str) -> WorkingEntry | None: ...

    def set(self, thread_id: str, key: str, value: Any) -> WorkingEntry: ...

    def delete(self, thread_id: str, key: str) -> bool: ...

    def list(self, thread_id: str) -> dict[str, Any]:
        """The thread's scratchpad, key → value."""
        ...

    def entries(self, thread_id: str | None = None) -> builtins.list[WorkingEntry]:
        """Every entry (of one thread or all), sorted, `value` None."""
        ...

    def clear(self, thread_id: str) -> int: ...

    def generation(self) -> int: ...


@runtime_checkable
class BlobStore(Protocol):
    def get(self, bucket: str, key: str) -> bytes | None: ...

    def put(self, bucket: str, key: str, data: bytes) -> BlobInfo: ...

    def delete(self, bucket: str, key: str) -> bool: ...

    def list(self, bucket: str | None = None, key_prefix: str = "") -> list[BlobInfo]: ...

    def generation(self) -> int: ...


@runtime_checkable
class NoteStore(Protocol):
    def read(self, name: str) -> str | None: ...

    def write(self, name: str, text: str) -> NoteInfo: ...

    def delete(self, name: str) -> bool: ...

    def list(self, prefix: str = "") -> list[NoteInfo]: ...

    def stage(self, notes: Sequence[tuple[str, str]]) -> StagedWrites:
        """(name, text) notes written to temporaries beside their files, checked as `write` checks;
        nothing is visible until `commit()` renames them into place."""
        ...

    def stamp(self, names: builtins.list[str]) -> tuple[tuple[str, int, int], ...]:
        """A cheap fingerprint of just these notes (a cache key for a pipeline that names its notes)."""
        ...

    def read_stamped(self, name: str) -> tuple[str | None, tuple[str, int, int]]:
        """`read` and this note's `stamp`, the stamp taken before the read."""
        ...

    def watch(self, on: bool = True) -> None:
        """A file watcher reports every change to `changed` from now on (generation may trust it)."""
        ...

    def changed(self) -> None:
        """A watcher saw a change under the notes folder."""
        ...

    def generation(self) -> int: ...


@runtime_checkable
class FileReader(Protocol):
    def read(self, path: str) -> str | None:
        """The text of a workspace file; None when it does not exist."""
        ...

    def list(self, directory: str = "", name_prefix: str = "") -> list[FileInfo]:
        """The entries of one workspace directory whose names start with `name_prefix` (not
        recursive; the first 1,000 by path)."""
        ...

    def generation(self) -> int: ...
