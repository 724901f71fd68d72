"""What the caches saved beside the database (ANN indexes, matrices) share: a lock per collection
across processes, flushing, the atomic replace of the JSON naming a file, and the age of leftovers.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from filelock import FileLock

STALE_S = 3_600  # a temp file older than this was left by an interrupted process


def file_stem(collection: str) -> str:
    """The collection's name in file names, with a hash of it: names differing only in case stay
    apart on file systems that ignore case ("~" is never in either)."""
    return f"{collection}-{hashlib.blake2b(collection.encode(), digest_size=4).hexdigest()}"


class CollectionLocks:
    """One file lock per collection in `folder` (the file named at first use): every process's
    saves of a collection's file take it. One object per collection, so a holder may take it again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._locks: dict[str, FileLock] = {}
        self._guard = threading.Lock()

    def __call__(self, collection: str, file_name: str) -> FileLock:
        from filelock import FileLock  # here: ~35 ms of imports a server without a large collection never pays

        with self._guard:
            if collection not in self._locks:
                self.folder.mkdir(parents=True, exist_ok=True)
                self._locks[collection] = FileLock(str(self.folder / file_name))
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


def stale(path: Path) -> bool:
    """Whether `path` was last written over `STALE_S` ago (one gone meanwhile is not)."""
    try:
        return path.stat().st_mtime < time.time() - STALE_S
    except OSError:
        return False
