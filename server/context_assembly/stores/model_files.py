"""An embedding model's float16 token vectors as a float32 file that every process maps.

WordLlama's vectors ship as float16 in the `wordllama` wheel (32,000 × 256, 16 MB); the model
runs on float32 rows. A float32 copy per process is 32 MB private to each sidecar, and mapping the
float16 file instead, widening the rows each embedding gathers, cost 27-57 % more per bulk
embedding (bench/README.md). So the float32 rows are written once into the user's cache folder
(`models/` beside the compiled rules, under `platformdirs.user_cache_dir("context-assembly")`, or
`$CONTEXT_ASSEMBLY_MODEL_CACHE`; `0`, `off` or empty: none) and every process maps that file
read-only: one copy for all of a machine's sidecars, shared pages.

The file's name holds the model's name, a digest of where the source file is (its resolved path)
and one of which file is there (size, modification time, inode), so a reinstalled wheel gets a new
file and removes its install's older ones when it writes it, while another environment's wheel
(another virtual environment of the machine) keeps files of its own. A file is written under a
temporary name and renamed into place, never changed afterwards; processes missing it at once
each write the same bytes. Every load checks the size and compares 64 rows spread over the file
with the source's rows widened, bit for bit: a damaged file is written again, once; a file that
still differs, or a folder that cannot be read or written, is not used, and the caller keeps a
copy of its own as before. The folder is trusted as the compile cache's is (rules/cache.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

log = logging.getLogger(__name__)

ENV = "CONTEXT_ASSEMBLY_MODEL_CACHE"
OFF = ("", "0", "off", "false", "no")
CHECKED_ROWS = 64  # rows compared with the source at every load


def cache_dir() -> Path | None:
    """The folder the environment asks for; None when it asks for none."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in OFF else Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("context-assembly", appauthor=False)) / "models"


def shared_vectors(source: Path, model: str, tensor: str) -> NDArray[Any] | None:
    """The float16 matrix `tensor` of the safetensors file `source` as float32 rows mapped from
    the cache folder's file, written there first when missing; None where that cannot be (no
    folder, another layout of the source, a file that fails its check: logged)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        half = float16_tensor(source, tensor)
        path = folder / f"{model}-{_source_digest(source)}.f32"  # (model-where-which.f32)
        if not path.exists():
            _write(path, np.ascontiguousarray(half.astype(np.float32)), model)
        rows = _checked(path, half)
        if rows is None:  # damaged (a crash, a full disk): written again, once
            path.unlink(missing_ok=True)
            _write(path, np.ascontiguousarray(half.astype(np.float32)), model)
            rows = _checked(path, half)
        if rows is None:
            raise ValueError(f"{path.name} does not hold the rows of {source.name}")
        return rows
    except (OSError, ValueError) as exc:
        log.warning("the float32 vectors of %s are not shared through the cache folder (%s): this "
                    "process keeps a copy of its own", model, exc)
        return None


def _checked(path: Path, half: NDArray[Any]) -> NDArray[Any] | None:
    """The file's rows mapped, when it holds as many as `half` and the checked ones equal its rows
    widened; None otherwise."""
    rows = np.memmap(path, dtype="<f4", mode="r").view(np.ndarray) if path.stat().st_size else np.zeros(0)
    if rows.size != half.size:
        return None
    rows = rows.reshape(half.shape)
    checked = np.linspace(0, len(half) - 1, min(CHECKED_ROWS, len(half))).astype(np.int64)
    return rows if np.array_equal(rows[checked], half[checked].astype(np.float32)) else None


def _source_digest(source: Path) -> str:
    """Where the source is (its resolved path) and which file is there (size, modification time,
    inode: a reinstall writes a new file), each as a digest: `<where>-<which>`."""
    stat = source.stat()
    where = hashlib.blake2b(str(source.resolve()).encode(), digest_size=6).hexdigest()
    which = hashlib.blake2b(f"{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ino}".encode(), digest_size=6).hexdigest()
    return f"{where}-{which}"


def _write(path: Path, rows: NDArray[Any], model: str) -> None:
    """`rows` as the file `path`, flushed under a temporary name and renamed into place; the
    model's other files removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(np.ascontiguousarray(rows, dtype="<f4").data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if not path.exists():  # (Windows: another process's file, mapped, is not replaced: that one serves)
            raise
        return
    where = path.name.rsplit("-", 1)[0]  # the same install's earlier files (another install keeps its own)
    for old in path.parent.glob(f"{where}-*.f32"):
        if old != path:
            with contextlib.suppress(OSError):  # mapped elsewhere on Windows: removed by a later write
                old.unlink()


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
