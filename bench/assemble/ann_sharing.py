"""Memory and load time of the 1M-chunk ANN index across several processes of one database: the
saved file viewed (memory-mapped, as the store loads it now) against a copy per process (as it
loaded it before), in the same run.

    python bench/assemble/ann_sharing.py [--processes 4] [--chunks 1000000] [--queries 200] [--rounds 2]

The collection and its index are `search_scale.py`'s (generated and built once, then reused).
Each round starts `--processes` processes per way, all at once, as a swarm's sidecars would be.
Each opens the store, loads the index (`AnnSearch.current`, timed), runs `--queries` searches
(`SqliteVectorIndex.nearest`, top 10 re-scored exactly; random unit queries), then reports
its memory from `/proc/self/smaps_rollup` while every process of its way is still alive, so
PSS shares the pages they map in common between them. The "copy" way is the same code with
usearch's `Index.restore` made to ignore `view=True`: the store as it was before it viewed the
file. The ways take turns (copy first in round one), so both find the file in the page cache.

Reported per way: load ms and search p50 (medians over the processes and rounds), and per
process RSS, PSS and private memory (MiB); the ratio copy ÷ view of the PSS summed over the
processes (the memory the machine gives them) and of the load time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

WAYS = ("copy", "view")

WORKER = r"""
import json, sys, time
from pathlib import Path
import numpy as np

way, db_path, queries = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
if way == "copy":  # the store before: a graph of its own per process
    import usearch.index
    restore = usearch.index.Index.restore
    usearch.index.Index.restore = staticmethod(lambda path, view=False, **kw: restore(path, view=False, **kw))
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.vector import SqliteVectorIndex

index = SqliteVectorIndex(Database(db_path))
t = time.perf_counter()
ann = index.ann.current("docs")
load_ms = (time.perf_counter() - t) * 1000
assert ann is not None, "the collection has no ANN index"
rng = np.random.default_rng(5)
q = rng.standard_normal((queries + 3, ann.dimension)).astype(np.float32)
q /= np.linalg.norm(q, axis=1, keepdims=True)
samples = []
for i, query in enumerate(q):
    t = time.perf_counter()
    index.nearest("docs", query, 10, -1.0)
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


def run_way(way: str, db_path: Path, processes: int, queries: int) -> list[dict[str, float]]:
    """Start `processes` workers at once; collect each one's report, then let them all go."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1] / "server"),
                                                         os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, way, str(db_path), str(queries)],
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble" / "search")
    args = ap.parse_args()
    import search_scale

    folder = search_scale.ensure(args.out, "assemble", args.chunks)
    index = search_scale.open_store(folder).index
    if index.ann.current(search_scale.COLLECTION) is None:
        search_scale.log("building the ANN index (once; persisted beside the database) ...")
        assert index.build_ann(search_scale.COLLECTION), "usearch is not installed"
    index._db.close()
    load = [os.getloadavg()[0]]
    reports: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
    totals: dict[str, list[float]] = {way: [] for way in WAYS}
    for round_ in range(args.rounds):
        for way in WAYS if round_ % 2 == 0 else reversed(WAYS):
            got = run_way(way, folder / "project.db", args.processes, args.queries)
            reports[way] += got
            totals[way].append(sum(r["pss"] for r in got))
    load.append(os.getloadavg()[0])

    def med(way: str, key: str) -> float:
        return statistics.median(r[key] for r in reports[way])

    print(f"{args.chunks:,} chunks, {args.processes} processes a way, {args.rounds} rounds; "
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
