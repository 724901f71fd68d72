"""`contextAssembly/assemble` through the sidecar as an agent's turns send it: seconds apart.

    python bench/assemble/turns.py [--gaps 0,500] [--requests 60] [--rounds 2]

`run.py` times `Runtime.assemble` in process, back to back. An agent sends one assembly per turn,
then waits for its model; meanwhile the sidecar is idle. Here the full-size bench workspace
(`workspace.py`; `run.py` builds it the first time) is served over stdio, per gap and per round,
by two new sidecars one after the other, each warmed up by 20 other requests and then sent the
same `--requests` requests, each `gap` ms after the previous answer:

- *ours*: `python -m context_assembly serve` as shipped;
- *baseline*: the same server with the graph database closed whenever it has been idle for 0.2 s,
  whether or not another process waits for it (`turns_server.py`), as before the database was
  kept open between uses. It has to reopen it (and its lock) on every turn that reads the graph.

Reported per gap: the round trip's median and 90th percentile, the answer's `meta.duration_ms`
median (the server's own time), and baseline ÷ ours on the medians. The result cache is on, as
agents run it; the requests differ from each other, so their pipelines run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import workspace  # the bench's generator, beside this file (the script's folder is on the path)
from context_assembly.client import ContextAssemblyClient, run

HERE = Path(__file__).resolve().parent
WARM_UP = 20
SERVERS = {"ours": None, "baseline": [sys.executable, str(HERE / "turns_server.py")]}


async def block(root: Path, command: list[str] | None, requests: list[dict[str, Any]],
                warm_up: list[dict[str, Any]], gap_s: float) -> list[tuple[float, float]]:
    """One new sidecar: warmed up, then each request `gap_s` after the previous answer. Per request:
    (round trip ms, meta.duration_ms)."""
    rows = []
    with open(os.devnull, "w") as log:
        async with ContextAssemblyClient(root, command=command, stderr=log) as client:
            for request in warm_up:
                await client.assemble(request)
            for request in requests:
                await asyncio.sleep(gap_s)
                started = time.perf_counter()
                answer = await client.assemble(request)
                rows.append(((time.perf_counter() - started) * 1000, answer["meta"]["duration_ms"]))
    return rows


async def measure(root: Path, gaps: list[float], count: int, rounds: int) -> list[dict[str, Any]]:
    every = workspace.requests(count + WARM_UP, workspace.Sizes.full(), workspace.SEED)
    requests, warm_up = every[:count], every[count:]
    out = []
    for gap in gaps:
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in SERVERS}
        for _ in range(rounds):
            for name, command in SERVERS.items():
                samples[name] += await block(root, command, requests, warm_up, gap / 1000)
        out.append({"gap_ms": gap, "load": os.getloadavg()[0],
                    **{name: summary(rows) for name, rows in samples.items()}})
    return out


def summary(rows: list[tuple[float, float]]) -> dict[str, float]:
    trips = sorted(trip for trip, _ in rows)
    return {"p50": statistics.median(trips), "p90": trips[int(0.9 * (len(trips) - 1))],
            "server_p50": statistics.median(duration for _, duration in rows)}


def report(rows: list[dict[str, Any]], count: int, rounds: int) -> list[str]:
    lines = [f"assemble over stdio, full-size bench workspace: {count} requests × {rounds} rounds per sidecar "
             "and gap (a new sidecar per block, ours and the baseline alternating)", "",
             "| gap ms | ours p50 ms | ours p90 ms | ours server p50 ms | baseline p50 ms | baseline p90 ms "
             "| baseline server p50 ms | baseline ÷ ours (p50) | load 1m |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        ours, base = row["ours"], row["baseline"]
        lines.append(f"| {row['gap_ms']:g} | {ours['p50']:.2f} | {ours['p90']:.2f} | {ours['server_p50']:.2f} "
                     f"| {base['p50']:.2f} | {base['p90']:.2f} | {base['server_p50']:.2f} "
                     f"| {base['p50'] / ours['p50']:.2f}× | {row['load']:.2f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble", help="run.py's output folder")
    ap.add_argument("--gaps", default="0,500", help="comma-separated idle gaps before each request, ms")
    ap.add_argument("--requests", type=int, default=60, help="timed requests per sidecar and gap")
    ap.add_argument("--rounds", type=int, default=2, help="blocks per sidecar and gap")
    args = ap.parse_args()
    root = workspace.full_size(args.out)
    gaps = [float(g) for g in args.gaps.split(",") if g]
    rows = run(measure(root, gaps, args.requests, args.rounds))
    print("\n".join(report(rows, args.requests, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    sys.exit(main())
