"""A swarm's sidecars needing a large collection's keyword postings or exact-search matrix at once,
with none saved yet: read once by one of them (a lock across processes) against once by each (as
before), in the same run.

    python bench/assemble/swarm_build.py [--what postings|matrix|matrix-ann] [--processes 4]
                                         [--chunks 100000] [--rounds 2]

`--what postings` (default): per round and way, the saved postings of `search_scale.py`'s corpus
are deleted, then `--processes` processes start at once; each opens the store and runs keyword
searches (`full_text`, top 10, three common words; FTS5 answers until the postings are there, 10
ms apart) until its own postings are ready, then reports how long that took, whether it read the
FTS index itself, and its CPU time. "Before" is the same code with the build lock left out
(`stores/sqlite/postings_keeper.py`), so every process reads the postings itself.

`--what matrix`: on a scratch copy of the database, per round and way, the saved matrices and the
database's token are deleted (as in a new database, whose first save makes the token), then the
processes start at once; each runs one vector search (`nearest`, top 10, exact: no ANN index) and reports how long it
took, whether it read the matrix from the database whole, and its CPU time once its save (if it
made one) is done. "Before" is the same code without the first-read lock
(`stores/sqlite/matrix.py`), so every process reads the matrix itself and the first to finish
saves it.

`--what matrix-ann`: the same, on a collection the size of an ANN index (`ann_min_chunks` half
the collection) whose index is deleted too: each process reports its memory of its own (`RssAnon`)
once its first search is answered and its save (if any) done, then waits for the ANN index (one of
them builds it, the others view its file) and searches again (`--no-build-wait`: it exits instead,
a build running then stopped). "Before" is the same code with the
old rule: no matrix file for such a collection (nor the first-read lock), and a process whose
searches moved to an index another one built held on to its matrix.

The ways take turns. Reported per way: the time until the last process had its postings (its
first search answered), the CPU of all of them together, and how many read the index or matrix.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # bench/

from as_installed import compile_package  # noqa: E402
from swarm import alternated, at_once  # noqa: E402

WAYS = ("each", "once")

WORKER = r"""
import contextlib, json, resource, sys, time
from pathlib import Path
import numpy as np
from context_assembly.stores.sqlite import postings_keeper, vector
from context_assembly.stores.sqlite.database import Database

what, way, db_path = sys.argv[1], sys.argv[2], Path(sys.argv[3])
if way == "each" and what == "postings":  # before: no build lock, every process reads the postings
    postings_keeper.PostingsKeeper._exclusive = lambda self: contextlib.nullcontext()
if way == "each" and what == "matrix":  # before: no first-read lock, every process reads the matrix
    vector.SqliteVectorIndex._claim_first_read = lambda self, conn, collection: False
if way == "each" and what == "matrix-ann":  # before: the matrix of a collection the size of an ANN index
    # was never saved (nor read under the first-read lock), and held on once another process's index served
    vector.SqliteVectorIndex._ann_serves = lambda self, c, size: size >= self.ann_min_chunks
    vector.SqliteVectorIndex._ann_serving = lambda self, c: self.ann.current(c)
reads, builds = [], []
if what == "matrix-ann":
    from context_assembly.stores.sqlite import vector_ann
    build = vector_ann.AnnSearch._build_locked
    vector_ann.AnnSearch._build_locked = lambda self, *args: (builds.append(1), build(self, *args))[1]
if what == "postings":
    read = postings_keeper.PostingsKeeper._read
    postings_keeper.PostingsKeeper._read = lambda self: (reads.append(1), read(self))[1]
else:
    whole = vector.read_embeddings
    vector.read_embeddings = lambda conn, c, d, **kw: (kw or reads.append(1), whole(conn, c, d, **kw))[1]
index = vector.SqliteVectorIndex(Database(db_path), ann_min_chunks=int(sys.argv[4]) if what == "matrix-ann" else None)


def anon_mib():  # this process's memory of its own (not mapped from files)
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("RssAnon:"))
    return int(line.split()[1]) / 1024


query = np.random.default_rng(5).standard_normal(256).astype(np.float32)
query /= np.linalg.norm(query)
sys.stdin.readline()  # every process started: go
t = time.perf_counter()
searches = 0
if what == "postings":
    while index.postings.current() is None:
        index.full_text("docs", ["the", "for", "data"], 10)  # FTS5 answers meanwhile
        searches += 1
        time.sleep(0.01)
else:
    index.nearest("docs", query, 10, -1.0)
    searches = 1
ready_s = time.perf_counter() - t
index.postings.wait()  # its read and save, when it made them
index.wait_for_saves()
usage = resource.getrusage(resource.RUSAGE_SELF)
report = {"ready_s": ready_s, "read": len(reads), "cpu_s": usage.ru_utime + usage.ru_stime, "searches": searches}
if what == "matrix-ann":
    report["anon_mib"] = anon_mib()  # its first search answered, its save (if any) done, the build going on
if what == "matrix-ann" and sys.argv[5] == "wait":
    while index.ann.current("docs") is None:  # built here, or by another process and viewed
        time.sleep(0.2)
    index.nearest("docs", query, 10, -1.0)
    report.update(built_s=time.perf_counter() - t, anon_after_mib=anon_mib(), builds=len(builds))
print(json.dumps(report), flush=True)
"""


def run_way(what: str, way: str, db_path: Path, processes: int, chunks: int, wait: bool) -> list[dict[str, Any]]:
    shutil.rmtree(db_path.parent / ("keyword-postings" if what == "postings" else "vector-matrix"), ignore_errors=True)
    if what == "matrix-ann":
        shutil.rmtree(db_path.parent / "vector-ann", ignore_errors=True)
    if what != "postings":  # (on the scratch copy) as a new database: no token, made by the first save
        with sqlite3.connect(db_path) as conn:
            conn.execute("DELETE FROM vector_postings WHERE id = 1")
    return at_once(WORKER, [what, way, str(db_path), str(chunks // 2), "wait" if wait else "no-wait"], processes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--what", choices=("postings", "matrix", "matrix-ann"), default="postings")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-build-wait", action="store_true",
                    help="matrix-ann: each process exits after its first search, not waiting for the ANN index "
                         "(minutes at 1M chunks)")
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble" / "search")
    args = ap.parse_args()
    import search_scale

    folder = search_scale.ensure(args.out, "assemble", args.chunks)
    if args.what != "postings":  # a scratch copy, as each run makes it a new database
        scratch = args.out / f"swarm-matrix-{args.chunks}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        with sqlite3.connect(folder / "project.db") as source, sqlite3.connect(scratch / "project.db") as copy:
            source.backup(copy)
        folder = scratch
    load = [os.getloadavg()[0]]
    rows = alternated(WAYS, args.rounds, lambda way: run_way(args.what, way, folder / "project.db", args.processes,
                                                                  args.chunks, not args.no_build_wait))
    load.append(os.getloadavg()[0])
    print(f"{args.chunks:,} chunks, {args.processes} processes at once, {args.rounds} rounds; "
          f"load {load[0]:.2f} → {load[1]:.2f} on {os.cpu_count()} CPUs\n")
    if args.what == "postings":
        print("| way | until the last has them, s (rounds) | CPU of all, s (rounds) | FTS index read by "
              "| keyword searches answered by FTS5 meanwhile |")
    else:
        print("| way | until the last has its first search answered, s (rounds) | CPU of all, s (rounds) "
              "| matrix read whole by | first search, median of the processes, s (rounds) |"
              + (" own memory of all, first search answered, MiB (rounds) | the same once the ANN index "
                 "serves, MiB (rounds) | index built by, until it served all, s (rounds) |"
                 if args.what == "matrix-ann" else ""))
    print("| --- | --- | --- | ---: | ---: |" + (" ---: | ---: | --- |" if args.what == "matrix-ann" else ""))
    for way in WAYS:
        label = "each reads them (before)" if way == "each" else "one reads them, the others map its file (now)"
        last = [max(r["ready_s"] for r in run) for run in rows[way]]
        cpu = [sum(r["cpu_s"] for r in run) for run in rows[way]]
        readers = statistics.median(sum(r["read"] for r in run) for run in rows[way])
        if args.what == "postings":
            extra = f"{statistics.median(sum(r['searches'] for r in run) for run in rows[way]):.0f}"
        else:
            extra = ", ".join(f"{statistics.median(r['ready_s'] for r in run):.2f}" for run in rows[way])
        if args.what == "matrix-ann":
            label = "each reads it, holds it on (before)" if way == "each" else "one reads it, the others map it (now)"
            extra += " | " + ", ".join(f"{sum(r['anon_mib'] for r in run):.0f}" for run in rows[way])
            if args.no_build_wait:
                extra += " | not waited for | not waited for"
            else:
                extra += " | " + ", ".join(f"{sum(r['anon_after_mib'] for r in run):.0f}" for run in rows[way])
                extra += " | " + ", ".join(f"{sum(r['builds'] for r in run)}, {max(r['built_s'] for r in run):.0f}"
                                           for run in rows[way])
        print(f"| {label} | {', '.join(f'{s:.2f}' for s in last)} | {', '.join(f'{s:.1f}' for s in cpu)} "
              f"| {readers:.0f} of {args.processes} | {extra} |")
    return 0


if __name__ == "__main__":
    compile_package()  # the workers import bytecode, as an installed package does
    sys.exit(main())
