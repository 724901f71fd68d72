"""A collection's embedding matrix as exact search holds it: rows of its own, and rows mapped from
a saved file that every process of the database shares.

Exact search streams the whole matrix per query, so each process used to hold a copy of it
(~100 MB at 100k chunks of 256 floats) and read it from SQLite first (~110 ms alone, 0.2-0.3 s
beside a first request's own work). A collection of `FILE_MIN_CHUNKS` chunks or more is saved
once read, as one file in `<database folder>/vector-matrix/` (`<stem>~<random>.f32`: the ids as
int64, then the rows as float32, little-endian; `<stem>.json` names it and records the collection,
the database's token, the model, dimension and generation and the row count; the stem is the
collection's name and a hash of it, `file_stem`). A new process maps
the file read-only (`SharedRows`), so the pages are shared and there is nothing to read, and
catches it up from the table like any cached matrix: chunks added since become rows of its own,
chunks deleted since are masked out of the mapped rows (`gone`). Once the rows of its own or the
masked ones are a share of the file, the process saves a new file and maps it instead (a
collection shrunk below `FILE_MIN_CHUNKS` keeps the file it has until it grows again). Where no
file is there yet, one process at a time reads the matrix whole to save it (`first_read_lock`);
the others wait for its file and map it.

Files are written once under a new name and never changed (a mapping stays valid; on POSIX even
after the file is unlinked), saved under a lock per collection that every save holds, never
named when older than the file already named, and trusted only with the database's token and
when the newest chunks it holds have their stored embeddings (`SqliteVectorIndex` checks that with
`stored_embeddings.newest_rows_agree`: a database restored from an older copy and written again
reuses chunk ids).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from attrs import field, frozen
from numpy.typing import NDArray

from ..embedding import Matrix
from .saved_files import (
    CollectionLocks,
    current_meta,
    file_stem,
    name_file,
    stale_temps,
    write_arrays,
)

if TYPE_CHECKING:
    from filelock import FileLock

log = logging.getLogger(__name__)

FILE_MIN_CHUNKS = 20_000  # smaller collections read from SQLite in ~20 ms and hold ~20 MB: no file
FIRST_READ_WAIT_S = 10.0  # another process reading the matrix whole: its file waited for at most this long,
FIRST_READ_WAIT_PER_CHUNK_S = 20e-6  # and this much more per chunk (1M: read ~7-10 s, then ~1 GB written)
RESAVE_SHARE = 0.1  # rows of its own or masked past this share of the file's: a new file
FORMAT = 1
SAVE_WAIT_S = 10.0  # another process saving the collection: its save (~0.3 s at 100k chunks) is waited for

Ids = NDArray[np.int64]


def first_read_wait_s(count: int) -> float:
    """How long a process waits for another's first read and save of a matrix of `count` chunks."""
    return FIRST_READ_WAIT_S + FIRST_READ_WAIT_PER_CHUNK_S * count


def cosine_scores(matrix: Matrix, query: Matrix, out: Matrix | None = None) -> Matrix:
    """matrix @ query for unit rows, i.e. the cosines (into `out` when given).

    numpy's einsum loop, not BLAS gemv: measured on a 2-core machine it streams a 100k x 256 matrix
    in ~5 ms, while OpenBLAS's threaded gemv took 10-20 ms (its threads fight for the two cores).
    """
    return np.einsum("ij,j->i", matrix, query, out=out)


@frozen
class SharedRows:
    """The rows of a saved matrix file, mapped read-only; `gone`: those deleted since (None: none)."""

    file: str
    ids: Ids
    matrix: Matrix
    gone: NDArray[np.bool_] | None = None

    def masked(self, positions: Ids) -> SharedRows:
        """These rows with the ones at `positions` deleted as well."""
        gone = np.zeros(len(self.ids), dtype=bool) if self.gone is None else self.gone.copy()
        gone[positions] = True
        return SharedRows(self.file, self.ids, self.matrix, gone)

    @property
    def live(self) -> int:
        return len(self.ids) - (int(np.count_nonzero(self.gone)) if self.gone is not None else 0)


@frozen
class MatrixIndex:
    """One collection's embeddings as of `generation`: the `shared` rows mapped from a saved file
    (if any) followed by the rows of its own, `ids` and `matrix` (row i is chunk `ids[i]`). Row
    positions run over both (`every_id`), the masked shared rows included: they never score."""

    generation: int
    model: str
    ids: Ids
    matrix: Matrix
    shared: SharedRows | None = None
    every_id: Ids = field(init=False)
    size: int = field(init=False)  # the live rows

    def __attrs_post_init__(self) -> None:
        shared = self.shared
        every = self.ids if shared is None or not len(shared.ids) else np.concatenate((shared.ids, self.ids))
        object.__setattr__(self, "every_id", every)
        object.__setattr__(self, "size", len(self.ids) + (shared.live if shared is not None else 0))

    @classmethod
    def mapped(cls, generation: int, model: str, shared: SharedRows) -> MatrixIndex:
        """The rows of a saved file alone, none of its own."""
        empty = np.empty((0, shared.matrix.shape[1]), dtype=np.float32)
        return cls(generation, model, np.empty(0, dtype=np.int64), empty, shared)

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def highest(self) -> int:
        """The highest chunk id it holds rows for (ids only grow: the last)."""
        return int(self.every_id[-1]) if len(self.every_id) else 0

    def scores(self, query: Matrix) -> Matrix:
        """The cosine of every row position with the unit `query` (-inf for the masked ones)."""
        shared = self.shared
        if shared is None:
            return cosine_scores(self.matrix, query)
        n = len(shared.ids)
        out = np.empty(n + len(self.ids), dtype=np.result_type(self.matrix.dtype, query.dtype))
        cosine_scores(shared.matrix, query, out[:n])
        cosine_scores(self.matrix, query, out[n:])
        if shared.gone is not None:
            out[:n][shared.gone] = -np.inf
        return out

    def rows(self) -> tuple[Ids, Matrix]:
        """Every live row (an ANN build, a new file): the mapped file's rows themselves when they
        are all there is (an ANN build at 1M chunks then holds no 1 GB copy for its minutes), else
        arrays of their own."""
        shared = self.shared
        if shared is None:
            return self.ids, self.matrix
        if shared.gone is None and not len(self.ids):
            return shared.ids, shared.matrix
        keep = slice(None) if shared.gone is None else ~shared.gone
        return (np.concatenate((shared.ids[keep], self.ids)),
                np.concatenate((shared.matrix[keep], self.matrix)))

    def wants_new_file(self) -> bool:
        """Whether it is large enough to save (`FILE_MIN_CHUNKS`) and, mapped from a file, its rows
        of its own or masked ones are past `RESAVE_SHARE` of the file's."""
        shared = self.shared
        if self.size < FILE_MIN_CHUNKS:
            return False  # a collection shrunk since its file was saved keeps it (masked) until it grows again
        if shared is None:
            return True
        changed = len(self.ids) + len(shared.ids) - shared.live
        return changed > RESAVE_SHARE * len(shared.ids)

    def rebased(self, saved: MatrixIndex) -> MatrixIndex | None:
        """This index over `saved`'s mapped rows (a file of an earlier generation that holds no
        chunk above its highest that this one lacks): the saved rows this one no longer holds
        masked, its rows above the file's highest id kept as its own. None when they do not add up."""
        if saved.shared is None or saved.generation > self.generation:
            return None
        every, live = self.every_id, np.ones(len(self.every_id), dtype=bool)
        if self.shared is not None and self.shared.gone is not None:
            live[:len(self.shared.ids)] = ~self.shared.gone
        held = every[live]
        gone = ~np.isin(saved.shared.ids, held, assume_unique=True)
        above = np.flatnonzero(self.ids > saved.highest)
        shared = SharedRows(saved.shared.file, saved.shared.ids, saved.shared.matrix, gone if gone.any() else None)
        rebased = MatrixIndex(self.generation, self.model, self.ids[above], self.matrix[above], shared)
        # equal sizes: every chunk it holds up to the file's highest id is in the file, every one above is its own
        return rebased if rebased.size == self.size else None


class MatrixFiles:
    """The saved matrices of one database's collections (see the module's doc)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._locks = CollectionLocks(folder, ".lock")
        self._first_reads = CollectionLocks(folder, ".first-read", thread_local=False)

    def _meta_path(self, collection: str) -> Path:
        return self.folder / f"{file_stem(collection)}.json"

    def load(self, collection: str, token: str | None, model: str, dimension: int,
             generation: int | None = None, tries: int = 3) -> MatrixIndex | None:
        """The saved matrix mapped, when it is this database's, of `model` and `dimension`, and not
        ahead of `generation`; None otherwise (or when it cannot be read: logged). A file named but
        gone by the time it is mapped (saves replaced the description and tidied it away meanwhile)
        sends it back to the description, `tries` times in all."""
        if token is None:
            return None
        for _ in range(tries):
            try:
                meta = current_meta(self._meta_path(collection))
                if (meta.get("format"), meta.get("collection"), meta.get("token"), meta.get("model"),
                        meta.get("dimension")) != (FORMAT, collection, token, model, dimension) or (
                        generation is not None and int(meta["generation"]) > generation):
                    return None
                shared = _mapped(self.folder / str(meta["file"]), int(meta["count"]), dimension)
                return MatrixIndex.mapped(int(meta["generation"]), model, shared)
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("the saved matrix of collection %r cannot be used (%s): it is read from the database",
                            collection, exc)
                return None
        return None

    def lock(self, collection: str) -> FileLock:
        return self._locks(collection)

    def first_read_lock(self, collection: str) -> FileLock:
        """Held by the process reading the collection's matrix from the database whole, from before
        its read until its save has named the file (or failed): a swarm's sidecars starting at once
        on a collection without a file wait for that one file and map it instead of each reading
        the matrix (~0.1 s alone at 100k chunks, over a second each with eight at once on two
        cores). Not thread-local: the thread that read takes it, the save's thread lets it go."""
        return self._first_reads(collection)

    def wait_for_first_read(self, collection: str, timeout: float) -> None:
        """Until no process holds the collection's first-read lock (at most `timeout` seconds; a
        holder that exits lets go at once)."""
        from filelock import Timeout

        with contextlib.suppress(Timeout, OSError), self.first_read_lock(collection).acquire(
                timeout=timeout, poll_interval=0.01):
            pass

    def save(self, collection: str, token: str, index: MatrixIndex, wait: float | None = None,
             agrees: Callable[[MatrixIndex], bool] | None = None) -> MatrixIndex | None:
        """The collection's saved matrix as named once this returns, mapped: `index`'s live rows
        written as a new file and named (see the module's doc), or, when the file named already is
        usable, of `index`'s generation or newer and `agrees` with the database (its history: a
        database restored from an older copy and written again reuses chunk ids), that one
        (nothing to add). Holds the collection's lock, waited for while another process saves
        (`wait` seconds at most, `SAVE_WAIT_S` by default: None past that)."""
        from filelock import Timeout

        try:
            with self.lock(collection).acquire(timeout=SAVE_WAIT_S if wait is None else wait):
                named = self.load(collection, token, index.model, index.dimension)
                if named is not None and named.generation >= index.generation and (agrees is None or agrees(named)):
                    return named
                ids, matrix = index.rows()
                name = f"{file_stem(collection)}~{uuid.uuid4().hex[:12]}.f32"
                write_arrays(self.folder / name, [ids.astype("<i8", copy=False), matrix.astype("<f4", copy=False)])
                meta = {"format": FORMAT, "collection": collection, "file": name, "token": token, "model": index.model,
                        "dimension": index.dimension, "generation": index.generation, "count": len(ids)}
                name_file(self._meta_path(collection), meta)
                self._tidy(collection, name)
                return MatrixIndex.mapped(index.generation, index.model,
                                          _mapped(self.folder / name, len(ids), index.dimension))
        except Timeout:
            return None

    def discard(self, collection: str, wait: float = SAVE_WAIT_S) -> None:
        """Remove the collection's saved matrix (its ANN index serves it now); quietly, as a cache,
        waiting at most `wait` seconds for another process's save of it."""
        from filelock import Timeout

        if not self._meta_path(collection).exists() and not any(self.folder.glob(f"{file_stem(collection)}~*.f32")):
            return  # (a file and no description: a save killed before naming it, ~1 GB at 1M chunks)
        with contextlib.suppress(Timeout, OSError), self.lock(collection).acquire(timeout=wait):
            self._meta_path(collection).unlink(missing_ok=True)
            self._tidy(collection, "")

    def _tidy(self, collection: str, kept: str) -> None:
        leftovers = [old for old in self.folder.glob(f"{file_stem(collection)}~*.f32") if old.name != kept]
        leftovers += stale_temps(self.folder)
        for old in leftovers:
            with contextlib.suppress(OSError):  # a file mapped elsewhere on Windows: a later save
                old.unlink(missing_ok=True)


def _mapped(path: Path, count: int, dimension: int) -> SharedRows:
    expected = count * (8 + 4 * dimension)
    if path.stat().st_size != expected:
        raise ValueError(f"{path.name} holds {path.stat().st_size} bytes, not the {expected} of {count} rows")
    if not count:
        return SharedRows(path.name, np.empty(0, dtype=np.int64), np.empty((0, dimension), dtype=np.float32))
    ids = np.memmap(path, dtype="<i8", mode="r", shape=(count,))
    matrix = np.memmap(path, dtype="<f4", mode="r", offset=8 * count, shape=(count, dimension))
    return SharedRows(path.name, ids, matrix)
