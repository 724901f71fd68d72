"""Folding a viewed ANN index's changes into a new index file, in a process of its own.

A process views the saved index file (`ann.Ann`); the chunks written since go beside the view.
Once they are a share of it, a new file is written: a copy of the graph with the chunks deleted
since removed and the ones added since added. usearch holds the GIL while it reads or writes a
whole graph (~0.6 s and ~0.4 s at 1M chunks, measured), which a sidecar's event loop would wait
out, and the copy is as large as the file; so the parent hands the changes over in a file and
this module, run as `python -m context_assembly.stores.sqlite.ann_fold <spec.npz>`, does the work
and saves through `AnnFiles.save`, holding the collection's lock from before it reads the
hand-over file (which it then deletes) until the new file is named, even if its parent exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..embedding import Matrix
from .ann import Ann, AnnFiles, Ids

TIMEOUT_S = 3_600  # a fold of a very large index on a slow disk; a hung one is given up, never waited on forever
BUSY = 3  # the child's exit status when another process holds the collection's lock
PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding `context_assembly`


def fold(files: AnnFiles, collection: str, ann: Ann, generation: int, max_id: int, hidden: Ids, ids: Ids,
         matrix: Matrix) -> bool:
    """Write the file `ann` views with `hidden` removed and (`ids`, `matrix`) added, as the
    collection's index at `generation`, in a child process (see above). False when another
    process held the collection's lock: its file comes instead; True when done (saved, or the
    file viewed is gone: a newer one is there to view). Raises when the child failed."""
    meta = {"collection": collection, "file": ann.file, "count": len(ann.index), "model": ann.model,
            "dimension": ann.dimension, "token": ann.token, "generation": generation, "max_id": max_id}
    files.folder.mkdir(parents=True, exist_ok=True)
    spec = files.folder / f".fold-{uuid.uuid4().hex[:12]}.npz"
    try:
        with spec.open("wb") as out:
            np.savez(out, meta=np.frombuffer(orjson.dumps(meta), dtype=np.uint8), hidden=hidden, ids=ids,
                     matrix=matrix)
        done = subprocess.run(_command(spec), cwd=files.folder, env=_environment(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    finally:
        spec.unlink(missing_ok=True)
    if done.returncode == BUSY:
        return False
    if done.returncode != 0:
        raise RuntimeError(f"the fold process ended with {done.returncode}: {done.stderr.strip()[-2000:]}")
    return True


def _command(spec: Path) -> list[str]:
    # -P: nothing from the working folder (the user's project) is imported in place of a module
    return [sys.executable, "-P", "-m", __name__, str(spec)]


def _environment() -> dict[str, str]:
    """The parent's environment, with the folder this package is imported from first on the path,
    so the child runs the same code however the parent found it."""
    paths = [str(PACKAGE_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def apply(spec_path: Path) -> int:
    """The child's side: take the lock, read and delete the spec, copy the graph, apply, save."""
    from filelock import Timeout

    with np.load(spec_path) as spec:
        meta = orjson.loads(spec["meta"].tobytes())
    files = AnnFiles(spec_path.parent)
    try:
        with files.lock(str(meta["collection"])).acquire(timeout=0):
            with np.load(spec_path) as spec:
                hidden, ids, matrix = spec["hidden"], spec["ids"], spec["matrix"]
            spec_path.unlink(missing_ok=True)
            _apply(files, meta, hidden, ids, matrix)
    except Timeout:
        return BUSY
    return 0


def _apply(files: AnnFiles, meta: dict[str, Any], hidden: Ids, ids: Ids, matrix: Matrix) -> None:
    graph = files.copy_of(str(meta["file"]), int(meta["count"]))
    if graph is None:
        return  # the file is gone (a newer one was saved): the parent views that one instead
    if len(hidden):
        graph.remove(hidden.astype(np.uint64))
    if len(ids):
        graph.add(ids.astype(np.uint64), matrix, threads=1)
    files.save(str(meta["collection"]), Ann(graph, str(meta["model"]), int(meta["dimension"]), str(meta["token"]),
                                           int(meta["generation"]), int(meta["max_id"])))


if __name__ == "__main__":
    sys.exit(apply(Path(sys.argv[1])))
