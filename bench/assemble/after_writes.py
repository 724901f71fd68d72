"""A vector search right after another process wrote to the collection, on the full-size bench
workspace (100,000 chunks in `docs`).

    python bench/assemble/after_writes.py [--rounds 10]

In a swarm, sidecars write to collections they all search. Each process caches a collection's
float32 matrix; another process's write used to make the next search read it whole. Now the
cached matrix is caught up by chunk id (`stores/sqlite/vector.py` `_caught_up`). Per round, a
writer process adds a new document, then rewrites one (a delete and an add), and after each
write this process searches once with the catch-up (*caught up*) and once, after the same kind of
write, with it turned off (*read whole*, as before), alternating. Reported: the median and worst
of the search after the write, and read whole ÷ caught up on the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import workspace  # the bench's generator, beside this file (the script's folder is on the path)
from context_assembly.cli.serve import keep_freed_memory, limit_malloc_arenas
from context_assembly.runtime import Runtime
from context_assembly.stores.sqlite import vector as sqlite_vector

HERE = Path(__file__).resolve().parent
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


def measure(root: Path, rounds: int) -> dict[str, list[float]]:
    runtime = Runtime(root)
    vectors = runtime.memory.vectors
    timed_search(vectors)  # the matrix loaded
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    catch_up = sqlite_vector._caught_up
    out: dict[str, list[float]] = {"caught up": [], "read whole": []}
    try:
        for n in range(rounds):
            for case in out:
                sqlite_vector._caught_up = catch_up if case == "caught up" else (lambda *args: None)  # type: ignore[assignment]
                for uri in (f"bench-after-writes-{case}-{n}", "bench-after-writes-rewritten"):  # added, rewritten
                    assert writer.stdin is not None and writer.stdout is not None
                    writer.stdin.write(uri + "\n")
                    writer.stdin.flush()
                    assert writer.stdout.readline().strip() == "written"
                    out[case].append(timed_search(vectors))
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
    print("| matrix | p50 ms | worst ms |\n| --- | ---: | ---: |")
    for case, times in result.items():
        print(f"| {case} | {statistics.median(times):.1f} | {max(times):.1f} |")
    ratio = statistics.median(result["read whole"]) / statistics.median(result["caught up"])
    print(f"\nread whole ÷ caught up: {ratio:.1f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
