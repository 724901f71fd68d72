"""A new sidecar's first assemblies, with and without the keyword postings a build saved.

    python bench/assemble/first_turns.py [--requests 60] [--rounds 3]

An agent starts its sidecar and sends its first turns at once. On the full-size bench workspace
(100,000 chunks in `docs`, searched hybrid) the keyword leg answers from postings held in memory,
which a process used to read from the FTS index itself (seconds), FTS5 answering meanwhile (~100
ms a query holding common words). Now a build saves them (`stores/sqlite/postings_files.py`) and a
new process loads them. Per round, two new sidecars one after the other, each sent the same
`--requests` assemblies back to back from its first (`--pause-ms` after `initialize`; meanwhile
the sidecar's warm-up prepares the searches its memories make, `Runtime.prepare_searches`):

- *read anew*: the saved postings deleted before it starts, as before they were saved (it reads
  them, and saves them again, while it answers);
- *saved*: started with the file that the first one saved (or, when it exited before it had read
  them, that this script then saved by reading them once).

Reported per case: the first answer (spawn excluded: after `initialize`), the round trips' median,
90th percentile and worst, and the time to answer all of them; the ratio is read anew ÷ saved.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import workspace  # the bench's generator, beside this file (the script's folder is on the path)
from context_assembly.client import ContextAssemblyClient, run
from context_assembly.stores.sqlite.postings_files import FOLDER
from context_assembly.stores.sqlite.vector import SqliteVectorStore
from context_assembly.workspace.layout import WorkspaceLayout

HERE = Path(__file__).resolve().parent
CASES = ("read anew", "saved")


async def first_turns(root: Path, requests: list[dict[str, Any]], pause_s: float) -> list[float]:
    """A new sidecar, `pause_s` after `initialize` its first request, then each request as soon
    as the previous answer came: round trips in ms."""
    trips = []
    with open(os.devnull, "w") as log:
        async with ContextAssemblyClient(root, stderr=log) as client:
            await asyncio.sleep(pause_s)
            for request in requests:
                started = time.perf_counter()
                await client.assemble(request)
                trips.append((time.perf_counter() - started) * 1000)
    return trips


def save_postings(root: Path) -> None:
    """Read the keyword postings of the workspace's database once, which saves them."""
    store = SqliteVectorStore.for_workspace(WorkspaceLayout(root))
    try:
        if not store.index.build_postings():
            raise SystemExit("the keyword postings could not be read: see the log")
    finally:
        store.index._db.close()


async def measure(root: Path, count: int, rounds: int, pause_s: float) -> dict[str, list[list[float]]]:
    requests = workspace.requests(count, workspace.Sizes.full(), workspace.SEED)
    saved = WorkspaceLayout(root).db_path.parent / FOLDER
    out: dict[str, list[list[float]]] = {case: [] for case in CASES}
    for _ in range(rounds):
        shutil.rmtree(saved, ignore_errors=True)
        out["read anew"].append(await first_turns(root, requests, pause_s))
        if not saved.is_dir():  # the sidecar exited before it had read them: read (and saved) here
            save_postings(root)
        out["saved"].append(await first_turns(root, requests, pause_s))
    return out


def report(result: dict[str, list[list[float]]], count: int, rounds: int, pause_ms: float) -> list[str]:
    lines = [f"a new sidecar's first {count} assemblies back to back, the first {pause_ms:g} ms after `initialize`, "
             f"full-size bench workspace, {rounds} rounds (load {os.getloadavg()[0]:.2f})", "",
             "| postings | first answer ms | p50 ms | p90 ms | worst ms | all answered s |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    totals = {}
    for case in CASES:
        runs = result[case]
        trips = sorted(t for run_ in runs for t in run_)
        totals[case] = statistics.median(sum(run_) for run_ in runs) / 1000
        lines.append(f"| {case} | {statistics.median(run_[0] for run_ in runs):.1f} | {statistics.median(trips):.2f} "
                     f"| {trips[int(0.9 * (len(trips) - 1))]:.2f} | {trips[-1]:.1f} | {totals[case]:.2f} |")
    lines += ["", f"read anew ÷ saved, all answered: {totals['read anew'] / totals['saved']:.2f}×"]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble", help="run.py's output folder")
    ap.add_argument("--requests", type=int, default=60, help="assemblies per sidecar")
    ap.add_argument("--rounds", type=int, default=3, help="pairs of sidecars")
    ap.add_argument("--pause-ms", type=float, default=0.0,
                    help="between `initialize` answered and the first request (an agent's user typing)")
    args = ap.parse_args()
    root = workspace.full_size(args.out)
    result = run(measure(root, args.requests, args.rounds, args.pause_ms / 1000))
    print("\n".join(report(result, args.requests, args.rounds, args.pause_ms)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    sys.exit(main())
