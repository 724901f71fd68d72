"""A collection's stored embeddings read as one float32 matrix, in id order.

Read row by row, 100,000 chunks of 256 dimensions cost ~160 ms, and far more while another thread
runs Python: `sqlite3` lets go of the interpreter around every row it steps, and a busy thread
then keeps it for up to the switch interval (5 ms) each time. Measured beside a thread counting in
a loop, one such read took over a minute. So SQLite concatenates the rows itself, a block of
`BLOCK_BYTES` per statement (`group_concat`, a few steps in all): ~110 ms alone, ~0.3 s beside the
busy thread. Both aggregates of a block see its rows in the same order, so each id stays with its
vector whatever order that is; blocks follow one another by id (ids only grow).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import StorageError
from ..embedding import Matrix
from .many_rows import ids_of, in_lists

BLOB = np.dtype("<f4")
BLOCK_BYTES = 8 << 20  # per statement (the vectors; their ids as text add up to 20 bytes a row)
# The ids as decimal text ("1,2,3"), the vectors' bytes as they are.
_BLOCK = ("SELECT group_concat(id), CAST(group_concat(embedding, '') AS BLOB) FROM "
          "(SELECT id, embedding FROM vector_chunks WHERE collection = ? AND id >= ? ORDER BY id LIMIT ?)")
LOWEST, HIGHEST = -(1 << 63), (1 << 63) - 1  # SQLite's ids


def rows_matrix(rows: list[Any], dimension: int) -> tuple[NDArray[np.int64], Matrix]:
    """(ids, float32 matrix) of (id, embedding BLOB) rows."""
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return ids, as_matrix(b"".join(r[1] for r in rows), len(rows), dimension)


def as_matrix(blob: bytes, rows: int, dimension: int) -> Matrix:
    if len(blob) != rows * dimension * BLOB.itemsize:
        raise StorageError(f"stored embeddings do not have {dimension} dimensions: {len(blob)} bytes for {rows} "
                           "chunks (the database was written by something else, or is damaged)")
    return np.frombuffer(blob, dtype=BLOB).astype(np.float32, copy=False).reshape(rows, dimension)


def read_embeddings(conn: sqlite3.Connection, collection: str, dimension: int, after: int | None = None,
                    limit: int | None = None) -> tuple[NDArray[np.int64], Matrix]:
    """(ids, matrix) of the collection's chunks, or of those with ids above `after`, in id order
    (at most `limit`, the lowest ids), inside the caller's read transaction (the count and the
    blocks must see one state)."""
    if after is not None and after >= HIGHEST:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32)
    low = LOWEST if after is None else after + 1
    total = int(conn.execute("SELECT count(*) FROM vector_chunks WHERE collection = ? AND id >= ?",
                             (collection, low)).fetchone()[0])
    if limit is not None:
        total = min(total, limit)
    if str(conn.execute("PRAGMA encoding").fetchone()[0]) != "UTF-8":
        # group_concat takes a BLOB for text in the database's encoding: transcoded, not kept
        return rows_matrix(conn.execute(
            "SELECT id, embedding FROM vector_chunks WHERE collection = ? AND id >= ? ORDER BY id LIMIT ?",
            (collection, low, total)).fetchall(), dimension)
    ids, matrix = np.empty(total, dtype=np.int64), np.empty((total, dimension), dtype=np.float32)
    # A block is a value, so SQLite's limit on a value's length bounds it too (a build may lower it;
    # half of it: the concatenation may reach the limit before it ends)
    room = min(BLOCK_BYTES, conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) // 2)
    per_block = max(1, room // (dimension * BLOB.itemsize))
    done = 0
    while done < total:
        text_ids, blob = conn.execute(_BLOCK, (collection, low, min(per_block, total - done))).fetchone()
        if text_ids is None:
            break
        block = ids_of(text_ids)
        vectors = as_matrix(blob, len(block), dimension)
        if len(block) > 1 and not bool(np.all(block[1:] > block[:-1])):  # (an aggregate's order is SQLite's)
            order = np.argsort(block)
            block, vectors = block[order], vectors[order]
        end = done + len(block)
        ids[done:end], matrix[done:end] = block, vectors
        done = end
        if block[-1] == HIGHEST:
            break
        low = int(block[-1]) + 1
    if done < total:
        raise StorageError(f"collection {collection!r} changed while its embeddings were read")
    return ids, matrix


def embeddings_of(conn: sqlite3.Connection, collection: str, wanted: Sequence[int],
                  dimension: int) -> tuple[NDArray[np.int64], Matrix]:
    """(ids, matrix) of the chunks among `wanted` that the collection holds, in no set order: a
    statement per list of 500 ids (an ANN search re-scores its 100 candidates: 0.18-0.46 → 0.09-0.11 ms)."""
    utf8 = str(conn.execute("PRAGMA encoding").fetchone()[0]) == "UTF-8"
    parts = []
    for marks, part in in_lists(list(dict.fromkeys(wanted))):  # (an id in two lists would come twice)
        if not utf8:
            parts.append(rows_matrix(conn.execute(f"SELECT id, embedding FROM vector_chunks WHERE id IN ({marks}) "
                                                  "AND collection = ?", (*part, collection)).fetchall(), dimension))
            continue
        text_ids, blob = conn.execute(f"SELECT group_concat(id), CAST(group_concat(embedding, '') AS BLOB) "
                                      f"FROM vector_chunks WHERE id IN ({marks}) AND collection = ?",
                                      (*part, collection)).fetchone()
        if text_ids is not None:
            block = ids_of(text_ids)
            parts.append((block, as_matrix(blob, len(block), dimension)))
    if len(parts) == 1:
        return parts[0]
    return (np.concatenate([ids for ids, _ in parts] or [np.zeros(0, dtype=np.int64)]),
            np.concatenate([matrix for _, matrix in parts] or [np.zeros((0, dimension), dtype=np.float32)]))


def stored_ids(conn: sqlite3.Connection, collection: str, up_to: int = HIGHEST) -> NDArray[np.int64]:
    """The ids of the collection's chunks up to `up_to`, ascending (one statement, as above)."""
    text = conn.execute("SELECT group_concat(id) FROM vector_chunks INDEXED BY vector_chunks_by_collection "
                        "WHERE collection = ? AND id <= ?", (collection, up_to)).fetchone()[0]
    ids = ids_of(text or "")
    return ids if bool(np.all(ids[1:] > ids[:-1])) else np.sort(ids)  # (the index's order, as a rule)


def newest_embeddings(conn: sqlite3.Connection, collection: str, up_to: int, dimension: int,
                      sample: int = 16) -> tuple[NDArray[np.int64], Matrix] | None:
    """(ids, matrix) of the collection's newest `sample` chunks up to id `up_to`, ascending; None
    when an embedding is not of `dimension`. What a saved matrix or ANN index must hold as the
    table does to be of this database's history: a database restored from an older copy and
    written again reuses the ids above the copy's, with other embeddings, and can reach a saved
    file's generation."""
    rows = conn.execute("SELECT id, embedding FROM vector_chunks INDEXED BY vector_chunks_by_collection "
                        "WHERE collection = ? AND id <= ? ORDER BY id DESC LIMIT ?",
                        (collection, up_to, sample)).fetchall()
    try:
        return rows_matrix(rows[::-1], dimension)
    except StorageError:
        return None


def newest_rows_agree(conn: sqlite3.Connection, collection: str, ids: NDArray[np.int64], matrix: Matrix) -> bool:
    """Whether the collection's newest chunks up to the highest of `ids` (ascending) are among
    them, with their stored embeddings bit for bit in `matrix` (`newest_embeddings`)."""
    if not len(ids):
        return True
    newest = newest_embeddings(conn, collection, int(ids[-1]), matrix.shape[1])
    if newest is None:
        return False
    held, stored = newest
    at = np.searchsorted(ids, held)  # (each below len(ids): none is above the highest)
    return bool(np.array_equal(ids[at], held) and np.array_equal(_bits(matrix[at]), _bits(stored)))


def _bits(matrix: Matrix) -> NDArray[np.uint32]:
    """The floats' bits (NaN equal to itself: a NaN in a row must not make its own file refused)."""
    return np.ascontiguousarray(matrix, dtype="<f4").view("<u4")
