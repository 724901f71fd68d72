"""A vector search right after another process wrote to the collection, on the full-size bench
workspace (100,000 chunks in `docs`).

    python bench/assemble/after_writes.py [--rounds 10]

In a swarm, sidecars write to collections they all search. Each process caches a collection's
float32 matrix; another process's write used to make the next search read it whole. Now the
cached matrix is caught up by chunk id (`stores/sqlite/vector.py` `_caught_up`; rows only added
go into room kept after it). Per round and case, with the catch-up (*caught up*) and with it
turned off (*read whole*, as before), alternating: a writer process adds a document (untimed:
the state the case leaves), adds another, then rewrites one (a delete and an add); this process
searches after each write. Reported: the median and worst
of the search after the write, and read whole ÷ caught up on the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import workspace  # the bench's generator, beside this file (the script's folder is on the path)
from context_assembly.cli.serve import keep_freed_memory, limit_malloc_arenas
from context_assembly.runtime import Runtime
from context_assembly.stores.sqlite import vector as sqlite_vector

HERE = Path(__file__).resolve().parent
CASES = ("caught up", "read whole")
KINDS = ("added", "rewritten")  # a new document; one replaced (its chunks deleted and added)
QUERY = "schema migration in the audit handler"
WRITER = """
import sys
from context_assembly.runtime import Runtime
runtime = Runtime(sys.argv[1])
for line in sys.stdin:
    uri = line.strip()
    runtime.memory.vectors.upsert("docs", uri, f"{uri}: a note another sidecar wrote about schema migrations", {})
    print("written", flush=True)
"""


def timed_search(vectors: Any) -> float:
    started = time.perf_counter()
    vectors.search("docs", QUERY, top_k=8, mode="vector")
    return (time.perf_counter() - started) * 1000


def write(writer: subprocess.Popen[str], uri: str) -> None:
    """The writer process upserts `uri` (new, or replacing the document of that uri) and commits."""
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdin.write(uri + "\n")
    writer.stdin.flush()
    assert writer.stdout.readline().strip() == "written"


def measure(root: Path, rounds: int) -> dict[str, list[float]]:
    runtime = Runtime(root)
    vectors = runtime.memory.vectors
    timed_search(vectors)  # the matrix loaded
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    catch_up = sqlite_vector._caught_up
    run = uuid.uuid4().hex[:8]  # new documents are new in every run (the workspace is reused)
    out: dict[str, list[float]] = {f"{case}, {kind}": [] for case in CASES for kind in KINDS}
    try:
        for n in range(rounds):
            for case in CASES:
                sqlite_vector._caught_up = catch_up if case == "caught up" else (lambda *args: None)  # type: ignore[assignment]
                write(writer, f"bench-after-writes-{run}-{case}-{n}-first")  # untimed: the state this case leaves
                timed_search(vectors)
                for kind, uri in zip(KINDS, (f"bench-after-writes-{run}-{case}-{n}", "bench-after-writes-rewritten"),
                                     strict=True):
                    write(writer, uri)
                    out[f"{case}, {kind}"].append(timed_search(vectors))
    finally:
        sqlite_vector._caught_up = catch_up  # type: ignore[assignment]
        writer.stdin.close()  # type: ignore[union-attr]
        writer.wait(60)
        runtime.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble", help="run.py's output folder")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    limit_malloc_arenas()  # the allocator as the sidecar sets it (`serve`)
    keep_freed_memory()
    root = args.out.resolve() / "ws" / "full"
    workspace.ensure(root, workspace.Sizes.full(), workspace.SEED)
    result = measure(root, args.rounds)
    print(f"a vector search after another process's write, 100,000 chunks, {args.rounds} rounds of an added and a "
          f"rewritten document (load {os.getloadavg()[0]:.2f})\n")
    print("| matrix, write | p50 ms | worst ms |\n| --- | ---: | ---: |")
    for row, times in result.items():
        print(f"| {row} | {statistics.median(times):.1f} | {max(times):.1f} |")
    for kind in KINDS:
        ratio = statistics.median(result[f"read whole, {kind}"]) / statistics.median(result[f"caught up, {kind}"])
        print(f"\n{kind}: read whole ÷ caught up {ratio:.1f}×", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
