"""What the caches saved beside the database (ANN indexes, matrices, keyword postings) share: a lock
per collection across processes, block writes and flushing, the atomic replace of the JSON naming a
file, and the age of leftovers.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from ...workspace.atomic import fsync_directory

if TYPE_CHECKING:
    from filelock import FileLock

STALE_S = 3_600  # a temp file older than this was left by an interrupted process
WRITE_BLOCK = 8 << 20  # bytes a write: each lets go of the interpreter's lock while the OS copies


def file_stem(collection: str) -> str:
    """The collection's name in file names, with a hash of it: names differing only in case stay
    apart on file systems that ignore case ("~" is never in either)."""
    return f"{collection}-{hashlib.blake2b(collection.encode(), digest_size=4).hexdigest()}"


def read_meta(path: Path) -> dict[str, Any]:
    """The description of a saved file (a JSON object). OSError when it cannot be read, ValueError
    when it is not a JSON object (orjson's decode error is one)."""
    meta = orjson.loads(path.read_bytes())
    if not isinstance(meta, dict):
        raise ValueError("the description is not a JSON object")
    return meta


def current_meta(path: Path) -> dict[str, Any]:
    """`read_meta`, read once more when the file it names is gone: a save named a newer one and
    tidied that one away meanwhile."""
    meta = read_meta(path)
    return meta if (path.parent / str(meta.get("file"))).is_file() else read_meta(path)


class CollectionLocks:
    """One file lock per collection in `folder`, `.<stem><suffix>`: every process's saves of a
    collection's file take it. One object per collection, so a holder may take it again.
    `thread_local=False`: a lock one thread takes and another lets go (held across a hand-off)."""

    def __init__(self, folder: Path, suffix: str, thread_local: bool = True) -> None:
        self.folder = folder
        self.suffix = suffix
        self.thread_local = thread_local
        self._locks: dict[str, FileLock] = {}
        self._guard = threading.Lock()

    def __call__(self, collection: str) -> FileLock:
        from filelock import FileLock  # here: ~35 ms of imports a server without a large collection never pays

        with self._guard:
            if collection not in self._locks:
                self.folder.mkdir(parents=True, exist_ok=True)
                self._locks[collection] = FileLock(str(self.folder / f".{file_stem(collection)}{self.suffix}"),
                                                   thread_local=self.thread_local)
            return self._locks[collection]


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDWR)  # Windows refuses to flush a file opened read-only
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_flushed(path: Path, data: bytes) -> None:
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def write_arrays(path: Path, arrays: list[np.ndarray]) -> None:
    """The arrays' bytes one after the other, as they are in memory, in blocks, flushed; a
    part-written file is removed."""
    try:
        with path.open("wb") as out:
            for array in arrays:
                data = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))  # type: ignore[arg-type]
                for start in range(0, len(data), WRITE_BLOCK):
                    out.write(data[start:start + WRITE_BLOCK])
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def replace(source: Path, target: Path, tries: int = 20) -> None:
    """os.replace, tried again for a while where a reader has the target open (Windows)."""
    for attempt in range(tries):
        try:
            os.replace(source, target)
            return
        except PermissionError:
            if attempt == tries - 1:
                raise
            time.sleep(0.01)


def name_file(description: Path, meta: dict[str, Any]) -> None:
    """Make `description` name `meta["file"]`: the JSON written flushed beside it under a temporary
    name, then put in its place (a reader sees the old one or the new one), the folder flushed."""
    tmp = description.parent / f".{meta['file']}.json.tmp"
    write_flushed(tmp, orjson.dumps(meta))
    replace(tmp, description)
    fsync_directory(description.parent)


def stale_temps(folder: Path) -> list[Path]:
    """The temporary descriptions in `folder` an interrupted save left over `STALE_S` ago."""
    return [old for old in folder.glob(".*.json.tmp") if stale(old)]


def stale(path: Path) -> bool:
    """Whether `path` was last written over `STALE_S` ago (one gone meanwhile is not)."""
    try:
        return path.stat().st_mtime < time.time() - STALE_S
    except OSError:
        return False
