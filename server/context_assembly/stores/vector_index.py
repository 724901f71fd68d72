"""The narrow interface a vector backend implements (`VectorIndex`), under `VectorCollections`.

Everything above it is backend-neutral (`stores.vector_collections`): collection settings,
validation, chunking, embedding, the search modes and hybrid fusion, the hit shape. A backend only
stores chunks with their embeddings and answers five questions: upsert, delete, nearest-k by
cosine, full-text-k, and chunks by id (plus the document listings the URI layer shows).

Chunk ids are integers that are never reused, so a ranked id list can be resolved later without
naming another chunk. Scores a backend returns: `nearest` the cosine in [-1, 1]; `full_text` any
positive relevance (higher is better), which the neutral part maps to [0, 1).
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol, runtime_checkable

from attrs import frozen

from .embedding import Matrix

Ranked = list[tuple[int, float]]  # (chunk id, score), best first


@frozen
class IndexedDoc:
    """One document ready to store: its chunks' texts in order, with one embedding row each."""

    doc_uri: str
    text: str
    metadata_json: str
    chunks: tuple[str, ...]
    vectors: Matrix  # (len(chunks), dimension) float32, unit rows


@frozen
class ChunkRow:
    collection: str
    doc_uri: str
    ord: int
    text: str
    metadata: dict[str, Any]


@runtime_checkable
class VectorIndex(Protocol):
    def claimed_model(self, collection: str) -> tuple[str, int] | None:
        """(embedding model, dimension) the collection was first written with; None when new."""
        ...

    def upsert(self, collection: str, model: str, dimension: int, docs: builtins.list[IndexedDoc]) -> None:
        """Replace each document and its chunks in one transaction; claims the collection's model on
        its first write and raises ConflictError when another model holds it."""
        ...

    def delete(self, collection: str, doc_uri: str) -> bool: ...

    def nearest(self, collection: str, query: Matrix, k: int, min_score: float) -> Ranked:
        """The k chunks of the collection with the highest cosine to the unit `query`, >= min_score."""
        ...

    def full_text(self, collection: str, terms: builtins.list[str], k: int) -> Ranked:
        """The k chunks best matching any of the (lower-cased, distinct) words, by the backend's rank."""
        ...

    def chunks(self, ids: builtins.list[int], *, text: bool = True) -> dict[int, ChunkRow]:
        """The chunks that still exist among `ids` (`text` False: each with an empty text, for a
        caller that only asks whose document they are)."""
        ...

    def document(self, collection: str, doc_uri: str) -> dict[str, Any] | None:
        """`{"collection", "doc_uri", "text", "metadata", "updated", "chunks"}`, or None."""
        ...

    def documents(self, collection: str) -> builtins.list[dict[str, Any]]:
        """`{"doc_uri", "metadata", "updated", "chars", "chunks"}` sorted by doc_uri."""
        ...

    def collections(self) -> builtins.list[dict[str, Any]]:
        """`{"collection", "embedding_model", "dimension", "documents", "chunks"}` of written collections."""
        ...

    def generation(self) -> int:
        """Counts writes to any collection, in any process."""
        ...

    def prepare(self, collection: str, keyword: bool) -> None:
        """Load what `nearest` (and with `keyword`, `full_text`) reads for the collection in this
        process, if anything: a backend that keeps nothing in memory does nothing."""
        ...
