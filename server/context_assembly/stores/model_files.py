"""An embedding model's float16 token vectors as a float32 file that every process maps.

WordLlama's vectors ship as float16 in the `wordllama` wheel (32,000 × 256, 16 MB); the model
runs on float32 rows. A float32 copy per process is 32 MB private to each sidecar, and mapping the
float16 file instead, widening the rows each embedding gathers, cost 27-57 % more per bulk
embedding (bench/README.md). So the float32 rows are written once into the user's cache folder
(`models/` beside the compiled rules, under `platformdirs.user_cache_dir("context-assembly")`, or
`$CONTEXT_ASSEMBLY_MODEL_CACHE`; `0`, `off`, `false`, `no` or empty: none) and every process maps
that file read-only: one copy for all the sidecars of an environment, shared pages.

The file's name holds the model's name, a digest of where the source file is (its resolved path:
each virtual environment's wheel its own file) and one of which file is there (size, modification
time, inode), so a reinstalled wheel gets a new file. A file is written under a temporary name
and renamed into place, never changed afterwards; processes missing it at once each write the
same bytes. Every load compares the whole file with the source's rows widened, bit for bit (~20
ms: what making a copy took) and touches it; a file that differs is written again, once, and if
it still differs, or the folder cannot be read or written, the caller keeps a copy of its own as
before. Writing a file removes its install's earlier ones, any file no process loaded for 30 days
(an environment since removed) and temporary files a killed writer left. The folder is trusted as
the compile cache's is (rules/cache.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from ..cache_folders import cache_folder
from .sqlite.saved_files import replace, stale, write_arrays

log = logging.getLogger(__name__)

ENV = "CONTEXT_ASSEMBLY_MODEL_CACHE"
CHECK_BLOCK = 4096  # rows widened at a time to compare (4 MB)
UNUSED_S = 30 * 86_400  # a file no process loaded for this long (another environment, gone): removed


def shared_vectors(source: Path, model: str, tensor: str) -> NDArray[Any] | None:
    """The float16 matrix `tensor` of the safetensors file `source` as float32 rows mapped from
    the cache folder's file, written there first when missing; None where that cannot be (no
    folder, another layout of the source, a file that fails its check: logged)."""
    folder = cache_folder(ENV, "models")
    if folder is None:
        return None
    try:
        half = float16_tensor(source, tensor)
        path = folder / f"{model}-{_source_digest(source)}.f32"  # (model-where-which.f32)
        if not path.exists():
            _write(path, half, model)
        rows = _checked(path, half)
        if rows is None:  # damaged (a crash, a full disk, a bad sector): written again, once
            path.unlink(missing_ok=True)
            _write(path, half, model)
            rows = _checked(path, half)
        if rows is None:
            raise ValueError(f"{path.name} does not hold the rows of {source.name}")
        with contextlib.suppress(OSError):  # in use: a write of another install's file keeps it
            os.utime(path)
        return rows
    except (OSError, ValueError) as exc:
        log.warning("the float32 vectors of %s are not shared through the cache folder (%s): this "
                    "process keeps a copy of its own", model, exc)
        return None


def _checked(path: Path, half: NDArray[Any]) -> NDArray[Any] | None:
    """The file's rows mapped, when they are `half`'s widened, every one bit for bit (compared
    block by block: ~20 ms, what a copy of its own took to make); None otherwise."""
    if path.stat().st_size != half.size * 4:
        return None
    rows = np.memmap(path, dtype="<f4", mode="r", shape=half.shape).view(np.ndarray)
    for start in range(0, len(half), CHECK_BLOCK):
        if not np.array_equal(rows[start:start + CHECK_BLOCK], half[start:start + CHECK_BLOCK].astype(np.float32)):
            return None
    return rows


def _source_digest(source: Path) -> str:
    """Where the source is (its resolved path) and which file is there (size, modification time,
    inode: a reinstall writes a new file), each as a digest: `<where>-<which>`."""
    stat = source.stat()
    where = hashlib.blake2b(str(source.resolve()).encode(), digest_size=6).hexdigest()
    which = hashlib.blake2b(f"{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ino}".encode(), digest_size=6).hexdigest()
    return f"{where}-{which}"


def _write(path: Path, half: NDArray[Any], model: str) -> None:
    """`half` widened as the file `path`, written flushed under a temporary name of its own (several
    processes may write at once), then put in place; then the leftovers of earlier ones removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write_arrays(tmp, [half.astype("<f4")])  # (a part-written file is removed)
        replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        if not path.exists():  # (Windows: another process's file, mapped, is not replaced: that one serves)
            raise
    _tidy(path, model)


def _tidy(kept: Path, model: str) -> None:
    """Remove this install's earlier files, any install's not used for `UNUSED_S`, and temporary
    files a killed writer left (`saved_files.stale`); quietly: a file mapped elsewhere on Windows
    stays until a later write."""
    where = kept.name.rsplit("-", 1)[0]
    unused = time.time() - UNUSED_S
    for old in kept.parent.iterdir():
        name = old.name
        try:
            ours = name.startswith(f"{model}-") and name.endswith(".f32") and old != kept
            gone = ours and (name.startswith(f"{where}-") or old.stat().st_mtime < unused)
            left = name.startswith(f".{model}-") and name.endswith(".tmp")  # (only its own: the folder may be shared)
            if gone or (left and stale(old)):
                old.unlink()
        except OSError:
            continue


def float16_tensor(path: Path, name: str) -> NDArray[Any]:
    """A 2-D float16 tensor of a safetensors file, mapped read-only (the format: 8 bytes of header
    length, the JSON header, then the data, each tensor at its offsets after the header).
    ValueError when the file does not hold it so."""
    size = path.stat().st_size
    with path.open("rb") as file:
        length = int.from_bytes(file.read(8), "little")
        if not 2 <= length <= size - 8:
            raise ValueError(f"{path.name} is not a safetensors file")
        header = orjson.loads(file.read(length))
    entry = header.get(name) if isinstance(header, dict) else None
    if not isinstance(entry, dict) or entry.get("dtype") != "F16":
        raise ValueError(f"{path.name} holds no float16 tensor {name!r}")
    shape, offsets = _pair(entry.get("shape"), 1), _pair(entry.get("data_offsets"), 0)
    if shape is None or offsets is None:
        raise ValueError(f"{path.name}: tensor {name!r} is not a matrix")
    start, end = offsets
    if end - start != shape[0] * shape[1] * 2 or end > size - 8 - length:
        raise ValueError(f"{path.name}: tensor {name!r} does not fit the file")
    return np.memmap(path, dtype=np.dtype("<f2"), mode="r", offset=8 + length + start, shape=shape).view(np.ndarray)


def _pair(value: Any, least: int) -> tuple[int, int] | None:
    """`value` when it is a JSON list of two integers (not booleans), each at least `least`."""
    if isinstance(value, list) and len(value) == 2 and all(type(n) is int and n >= least for n in value):
        return value[0], value[1]
    return None
