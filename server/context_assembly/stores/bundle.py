"""The embedded stores as pipelines see them (`pipelines.context.Stores`).

Pipelines want plain values (`None` when missing); the stores answer richer records (a KV entry
with its timestamps, a JSON read as `(exists, value)`). These adapters translate, so neither side
bends to the other.
"""

from __future__ import annotations

from typing import Any

from .memory import MemoryRouter


class _KV:
    def __init__(self, memory: MemoryRouter) -> None:
        self._memory = memory

    def get(self, instance: str, namespace: str, key: str) -> Any:
        entry = self._memory.kv.get(instance, namespace, key)
        return None if entry is None else entry.value

    def keys(self, instance: str, namespace: str) -> list[str]:
        return [entry.key for entry in self._memory.kv.list(instance, namespace, values=False)]


class _JsonDocs:
    def __init__(self, memory: MemoryRouter) -> None:
        self._memory = memory

    def get(self, doc: str, pointer: str | None = None) -> Any | None:
        exists, value = self._memory.json_docs.get(doc, pointer or "")
        return value if exists else None


class StoreBundleView:
    """A `Stores` over one workspace's MemoryRouter (vector and graph as configured there)."""

    def __init__(self, memory: MemoryRouter) -> None:
        self.memory = memory
        self.kv = _KV(memory)
        self.json_docs = _JsonDocs(memory)

    @property
    def notes(self) -> Any:
        return self.memory.notes

    @property
    def events(self) -> Any:
        return self.memory.events

    @property
    def episodic(self) -> Any:
        return self.memory.episodic

    @property
    def files(self) -> Any:
        return self.memory.files

    @property
    def vectors(self) -> Any:
        return self.memory.vectors

    @property
    def graph(self) -> Any:
        return self.memory.graph
