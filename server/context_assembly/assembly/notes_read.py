"""The notes a pipeline run read, for checking a cached result instead of keying it on every note.

A pipeline whose note names are templates (`markdown://${scope.project.module}`) reads notes that
only the run knows. Rather than fingerprint the whole notes folder for its cache key (a `stat` per
note, on every assembly), the run records the stamp (mtime, size) of each note it reads, taken
before the read, and a cached result holds while those notes keep their stamps: a run that read the
same notes would read the same text, take the same branches, and so read nothing else. A note that
did not exist is recorded too (a stamp of -1s), so creating it misses. Anything else a run asks of
the notes store (a listing) could depend on notes it never read: such a run is not cached.

Graph views are workspace files too (`knowledgegraph/views/<id>.json`), read by the graph store
when a step runs one: each view a run runs is recorded the same way, so an edited view misses
(it was served from the cache, stale, until the entry expired).
"""

from __future__ import annotations

import os
from typing import Any

Stamp = tuple[str, int, int]  # (note, mtime_ns, size), -1s when missing: NoteStore.stamp
ViewStamp = tuple[str, int, int, int]  # (view id, mtime_ns, size, inode), -1s when missing or unnamed


class RecordingStores:
    """The stores as one pipeline run sees them, its note reads recorded."""

    def __init__(self, stores: Any) -> None:
        self._stores = stores
        self.reads: dict[str, Stamp] = {}
        self.exact = True  # False: the run used the notes store otherwise than by reading notes
        self.views: dict[str, ViewStamp] = {}
        notes = getattr(stores, "notes", None)
        self.notes = _RecordingNotes(notes, self) if notes is not None else None
        graph = getattr(stores, "graph", None)
        self.graph = _RecordingGraph(graph, self) if graph is not None else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stores, name)

    @property
    def stamps(self) -> tuple[Stamp, ...]:
        return tuple(self.reads.values())

    @property
    def view_stamps(self) -> tuple[ViewStamp, ...]:
        return tuple(self.views.values())


class _RecordingNotes:
    def __init__(self, notes: Any, record: RecordingStores) -> None:
        self._notes = notes
        self._record = record

    def read(self, name: str) -> str | None:
        text, stamp = self._notes.read_stamped(name)  # the stamp before the read: a later edit shows
        self._record.reads.setdefault(name, stamp)
        return text if isinstance(text, str) else None

    def __getattr__(self, name: str) -> Any:
        self._record.exact = False
        return getattr(self._notes, name)


def still_holds(notes: Any, stamps: tuple[Stamp, ...]) -> bool:
    """Do the notes a cached run read still have the stamps it recorded?"""
    return not stamps or notes.stamp([name for name, _, _ in stamps]) == stamps


class _RecordingGraph:
    def __init__(self, graph: Any, record: RecordingStores) -> None:
        self._graph = graph
        self._record = record

    def run_view(self, view_id: str, *args: Any, **kwargs: Any) -> Any:
        self._record.views.setdefault(view_id, view_stamp(self._graph.layout, view_id))  # before the read
        return self._graph.run_view(view_id, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)


def view_stamp(layout: Any, view_id: str) -> ViewStamp:
    from ..stores.kuzu.views import view_path  # (the graph's own module: loaded once a view runs)

    try:
        stat = os.stat(view_path(layout, view_id))
    except Exception:  # noqa: BLE001 (no such view, a bad id: the run says why; creating it must miss)
        return (view_id, -1, -1, -1)
    return (view_id, stat.st_mtime_ns, stat.st_size, stat.st_ino)


def views_hold(layout: Any, stamps: tuple[ViewStamp, ...]) -> bool:
    """Do the views a cached run ran still have the stamps it recorded?"""
    return all(view_stamp(layout, stamp[0]) == stamp for stamp in stamps)
