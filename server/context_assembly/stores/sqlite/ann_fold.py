"""Folding a viewed ANN index's changes into a new index file, in a process of its own.

A process views the saved index file (`ann.Ann`); the chunks written since go beside the view.
Once they are a share of it, a new file is written: a copy of the graph with the chunks deleted
since removed and the ones added since added. usearch holds the GIL while it reads or writes a
whole graph (~0.6 s and ~0.4 s at 1M chunks, measured), which a sidecar's event loop would wait
out, and the copy is as large as the file; so the parent hands the changes over in a file and
this module, run as `python -m context_assembly.stores.sqlite.ann_fold <spec.npz>`, does the work
and saves through `AnnFiles.save` (a new name, then the JSON replaced atomically).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import orjson
from filelock import FileLock, Timeout

from ..embedding import Matrix
from .ann import Ann, AnnFiles, Ids

TIMEOUT_S = 3_600  # a fold of a very large index on a slow disk; a hung one is given up, never waited on forever


def fold(files: AnnFiles, collection: str, ann: Ann, generation: int, max_id: int, hidden: Ids, ids: Ids,
         matrix: Matrix) -> bool:
    """Write the file `ann` views with `hidden` removed and (`ids`, `matrix`) added, as the
    collection's index at `generation`, in a child process (see above). False when another
    process is folding the collection right now: its file comes instead; True when done (saved,
    or the file viewed is gone: a newer one is there to view)."""
    files.folder.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(files.folder / f".{collection}.fold-lock"), timeout=0):
            return _run_child(files, collection, ann, generation, max_id, hidden, ids, matrix)
    except Timeout:
        return False


def _run_child(files: AnnFiles, collection: str, ann: Ann, generation: int, max_id: int, hidden: Ids, ids: Ids,
               matrix: Matrix) -> bool:
    meta = {"collection": collection, "file": ann.file, "count": len(ann.index), "model": ann.model,
            "dimension": ann.dimension, "token": ann.token, "generation": generation, "max_id": max_id}
    spec = files.folder / f".fold-{uuid.uuid4().hex[:12]}.npz"
    try:
        with spec.open("wb") as out:
            np.savez(out, meta=np.frombuffer(orjson.dumps(meta), dtype=np.uint8), hidden=hidden, ids=ids,
                     matrix=matrix)
        done = subprocess.run([sys.executable, "-m", __name__, str(spec)], capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    finally:
        spec.unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"the fold process ended with {done.returncode}: {done.stderr.strip()[-2000:]}")
    return True


def apply(spec_path: Path) -> None:
    """The child's side: read the spec, copy the graph, apply the changes, save."""
    with np.load(spec_path) as spec:
        meta = orjson.loads(spec["meta"].tobytes())
        hidden, ids, matrix = spec["hidden"], spec["ids"], spec["matrix"]
    files = AnnFiles(spec_path.parent)
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
    apply(Path(sys.argv[1]))
