"""Memory and load time of what exact and approximate search keep per collection, across several
processes of one database: the saved file mapped (as the store loads it now) against a copy per
process (as it loaded it before), in the same run.

    python bench/assemble/sharing.py [--what ann|matrix|postings] [--processes 4] [--chunks N] [--queries 200]
                                     [--rounds 2] [--no-fold]

`--what ann` (default; 1M chunks): the ANN index of `search_scale.py`'s collection (generated
and built once, then reused); "before" is the same code with usearch's `Index.restore` made to
ignore `view=True`. `--what matrix` (100k chunks): the float32 matrix exact search streams, of
the same corpus at that size, saved once beside the database (`stores/sqlite/matrix.py`);
"before" is the same code with no file saved or mapped (`matrix.FILE_MIN_CHUNKS` out of reach,
`MatrixFiles.load` finding none), so each process reads the matrix from SQLite into memory of its
own, as it did before. `--what postings` (100k chunks): the keyword postings of the same corpus
(`stores/sqlite/postings_files.py`), searched by `full_text` with three of the 400 commonest
words; "before" is the same code with the mapped arrays copied into memory of the process's own and its
words into a dict, as the one-archive file of earlier versions was loaded.

Each round starts `--processes` processes per way, all at once, as a swarm's sidecars would be.
Each opens the store, loads the index or matrix (timed), runs `--queries` searches
(`SqliteVectorIndex.nearest`, top 10; random unit queries), then reports its memory from
`/proc/self/smaps_rollup` while every process of its way is still alive, so PSS shares the pages
they map in common between them. The ways take turns (copy first in round one), so both find the
files in the page cache.

Reported per way: load ms and search p50 (medians over the processes and rounds), and per
process RSS, PSS and private memory (MiB); the ratio copy ÷ view of the PSS summed over the
processes (the memory the machine gives them) and of the load time.

Then, for the ANN index, the fold, on a scratch copy of the database and its index: as many
one-chunk documents written by one process as make a fold due (1M chunks: ~20,400, 2% of the
index), timed from the write making it due until the process views the new file, with the
longest wait a thread sleeping 1 ms at a time saw meanwhile (what a sidecar's event loop would
wait); against, in the same run, what the store did before: the same chunks in a graph of its
own saved in the request's thread (usearch holds the GIL while it writes a graph).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

WAYS = ("copy", "view")

WORKER = r"""
import json, sys, time
from pathlib import Path
import numpy as np

what, way, db_path, queries = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
if what == "ann" and way == "copy":  # the store before: a graph of its own per process
    import usearch.index
    restore = usearch.index.Index.restore
    usearch.index.Index.restore = staticmethod(lambda path, view=False, **kw: restore(path, view=False, **kw))
if what == "matrix" and way == "copy":  # the store before: the matrix read from SQLite, per process
    from context_assembly.stores.sqlite import matrix
    matrix.FILE_MIN_CHUNKS = 10**12  # none saved,
    matrix.MatrixFiles.load = lambda self, *args, **kwargs: None  # none mapped
if what == "postings" and way == "copy":  # the store before: arrays and a dict of words per process
    from context_assembly.stores.sqlite import postings_files
    from context_assembly.stores.sqlite.postings import Postings
    mapped = postings_files._snapshot
    def copied(arrays, meta, file):
        s = mapped(arrays, meta, file)
        m, blob, starts = s.main, arrays["vocab"].tobytes(), arrays["starts"].tolist()
        words = {blob[a:b].decode(): n for n, (a, b) in enumerate(zip(starts, starts[1:]))}
        s.main = Postings(words, np.array(m.offsets), np.array(m.docs), np.array(m.freqs))  # (file None: a copy)
        s.ids, s.collections, s.lengths = np.array(s.ids), np.array(s.collections), np.array(s.lengths)
        return s
    postings_files._snapshot = copied
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.vector import SqliteVectorIndex

if what == "postings":
    index = SqliteVectorIndex(Database(db_path), ann_min_chunks=None)
    common = [str(r[0]) for r in index._db.connection().execute(
        "SELECT term FROM vector_chunks_vocab ORDER BY cnt DESC LIMIT 400")]
    t = time.perf_counter()
    loaded = index.postings.current()
    assert loaded is not None and (loaded.main.file is not None) == (way == "view"), "not loaded so"
elif what == "ann":
    index = SqliteVectorIndex(Database(db_path))
    t = time.perf_counter()
    loaded = index.ann.current("docs")
else:
    index = SqliteVectorIndex(Database(db_path), ann_min_chunks=None)
    t = time.perf_counter()
    loaded = index._index("docs")
    assert loaded is not None and (loaded.shared is not None) == (way == "view"), "not loaded as this way loads"
load_ms = (time.perf_counter() - t) * 1000
assert loaded is not None, "the collection has no index"
rng = np.random.default_rng(5)
if what == "postings":
    q = [list(rng.choice(common, 3, replace=False)) for _ in range(queries + 3)]
    search = lambda query: index.full_text("docs", query, 10)
else:
    q = rng.standard_normal((queries + 3, loaded.dimension)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    search = lambda query: index.nearest("docs", query, 10, -1.0)
samples = []
for i, query in enumerate(q):
    t = time.perf_counter()
    search(query)
    if i >= 3:  # the first three warm up
        samples.append((time.perf_counter() - t) * 1000)
memory = {}
for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
    key, value = line.split(":", 1)
    memory[key.strip()] = int(value.split()[0]) / 1024  # kB -> MiB
print(json.dumps({"load_ms": load_ms, "p50_ms": float(np.median(samples)), "rss": memory["Rss"],
                  "pss": memory["Pss"], "private": memory["Private_Clean"] + memory["Private_Dirty"]}), flush=True)
sys.stdin.readline()  # alive until every process of this way has reported
"""


def run_way(what: str, way: str, db_path: Path, processes: int, queries: int) -> list[dict[str, float]]:
    """Start `processes` workers at once; collect each one's report, then let them all go."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1] / "server"),
                                                         os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, what, way, str(db_path), str(queries)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(processes)]
    reports = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"a {way} worker ended without reporting (exit {proc.wait()})")
            reports.append(json.loads(line))
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
    return reports


@contextmanager
def sleeper() -> Iterator[Callable[[], float]]:
    """A thread sleeping 1 ms at a time; yields a function giving the longest wait it saw (ms) since
    the last call."""
    longest, stop = [0.0], threading.Event()

    def run() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            longest[0], last = max(longest[0], now - last), now

    def take() -> float:
        value, longest[0] = longest[0], 0.0
        return value * 1000

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield take
    finally:
        stop.set()
        thread.join()


def fold_rows(folder: Path, scratch: Path) -> list[str]:
    """The fold (now) and a graph of its own saved in the request's thread (before); see above."""
    import numpy as np
    import search_scale
    import usearch.index

    from context_assembly.stores.sqlite import vector_ann
    from context_assembly.stores.vector_index import IndexedDoc

    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(folder, scratch)
    index = search_scale.open_store(scratch).index
    ann = index.ann.current(search_scale.COLLECTION)
    assert ann is not None and ann.viewed and ann.file is not None
    claimed = index.claimed_model(search_scale.COLLECTION)
    assert claimed is not None
    model, dimension = claimed
    share, count = vector_ann.SAVE_SHARE, len(ann)
    changes = max(vector_ann.SAVE_MIN, int(share * count / (1 - share)) + 1)  # unsaved >= share x (count + unsaved)
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((changes, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = [IndexedDoc(f"fold-{i}", "t", "{}", ("t",), vectors[i:i + 1]) for i in range(changes)]
    with sleeper() as longest:
        index.upsert(search_scale.COLLECTION, model, dimension, docs[:-1])
        longest()
        t = time.perf_counter()
        index.upsert(search_scale.COLLECTION, model, dimension, docs[-1:])  # the write making the fold due
        index.ann.wait()
        folded = index.ann.current(search_scale.COLLECTION)
        now_s, now_gap = time.perf_counter() - t, longest()
        assert folded is not None and folded.file != ann.file and folded.delta is None, "no fold happened"
        # before: a graph of its own, holding the same chunks, saved where the write was made
        graph = usearch.index.Index.restore(str(scratch / "vector-ann" / str(folded.file)))
        longest()
        t = time.perf_counter()
        graph.save(str(scratch / "vector-ann" / "before.usearch"))
        before_s, before_gap = time.perf_counter() - t, longest()
    index._db.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return [f"\n{changes:,} chunks written by one process into the index of {count:,} (a fold due):\n",
            "| way | from the write making it due to the new file, s | longest wait of a 1 ms sleeper, ms |",
            "| --- | ---: | ---: |",
            f"| saved in the request's thread (before) | {before_s:.2f} | {before_gap:.0f} |",
            f"| folded by a child process (now) | {now_s:.2f} | {now_gap:.0f} |"]


def prepare(what: str, folder: Path) -> None:
    """The collection's ANN index built, or its matrix saved (once; persisted beside the database)."""
    import search_scale

    if what == "ann":
        index = search_scale.open_store(folder).index
        if index.ann.current(search_scale.COLLECTION) is None:
            search_scale.log("building the ANN index (once; persisted beside the database) ...")
            assert index.build_ann(search_scale.COLLECTION), "usearch is not installed"
    elif what == "postings":
        index = search_scale.open_store(folder).index
        index.postings.background = False
        if index.postings.current() is None:  # none saved (or not of this version): read and saved
            assert index.build_postings(), "the keyword postings could not be read"
    else:
        index = search_scale.open_store(folder, ann_min_chunks=10**12).index
        index._index(search_scale.COLLECTION)  # read, then saved in the background (or the saved one mapped)
        index.wait_for_saves()
    index._db.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--what", choices=("ann", "matrix", "postings"), default="ann")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--chunks", type=int, help="default: 1,000,000 (ann), 100,000 (matrix, postings)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-fold", action="store_true", help="without the fold rows")
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble" / "search")
    args = ap.parse_args()
    import search_scale

    args.chunks = args.chunks or (1_000_000 if args.what == "ann" else 100_000)
    folder = search_scale.ensure(args.out, "assemble", args.chunks)
    prepare(args.what, folder)
    load = [os.getloadavg()[0]]
    reports: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
    totals: dict[str, list[float]] = {way: [] for way in WAYS}
    for round_ in range(args.rounds):
        for way in WAYS if round_ % 2 == 0 else reversed(WAYS):
            got = run_way(args.what, way, folder / "project.db", args.processes, args.queries)
            reports[way] += got
            totals[way].append(sum(r["pss"] for r in got))
    load.append(os.getloadavg()[0])

    def med(way: str, key: str) -> float:
        return statistics.median(r[key] for r in reports[way])

    print(f"{args.what}: {args.chunks:,} chunks, {args.processes} processes a way, {args.rounds} rounds; "
          f"load {load[0]:.2f} → {load[1]:.2f} on {os.cpu_count()} CPUs\n")
    print("| way | load ms | search p50 ms | RSS MiB a process | PSS MiB a process | private MiB a process "
          f"| PSS MiB, all {args.processes} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for way in WAYS:
        label = "view of the saved file (now)" if way == "view" else "a copy per process (before)"
        print(f"| {label} | {med(way, 'load_ms'):.0f} | {med(way, 'p50_ms'):.2f} | {med(way, 'rss'):.0f} "
              f"| {med(way, 'pss'):.0f} | {med(way, 'private'):.0f} | {statistics.median(totals[way]):.0f} |")
    pss = statistics.median(totals["copy"]) / statistics.median(totals["view"])
    faster = med("copy", "load_ms") / med("view", "load_ms")
    print(f"\ncopy ÷ view: PSS of all processes {pss:.2f}×, load {faster:.2f}×")
    if args.what == "ann" and not args.no_fold:
        print("\n".join(fold_rows(folder, args.out / "fold-scratch")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
