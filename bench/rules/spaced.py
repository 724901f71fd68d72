"""evaluateRules round trips with the sidecar left idle between requests, as an agent sends them.

    python bench/rules/spaced.py --workload bench/out/data/medium [--gaps 0,1,10,100] [--requests 100]

`paired.py` times requests sent back to back, the sidecar's steady state. An agent sends one
request, then waits for its model for seconds; meanwhile the machine runs other things and the
caches forget the sidecar's working set (the generated matchers, the rules' pieces). Here, per
gap, each request is sent `gap` ms after the previous answer arrived, through the same client, to
the sidecar (`--busy-poll-ms` as it ships) and to the replay floor (`replay_server.py`: the same
answers at once, no evaluation), interleaved request by request so that both see the same
moments of the host. Reported: the round trip's median and 90th percentile, and the sidecar's
CPU time per request (`/proc`, which includes what busy polling spends waiting for the next one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from paired import HERE, record, until_idle
from sidecar import PARAMS, as_request, client_poll_option, cpu_s, workspace_for

from context_assembly.client import ContextAssemblyClient, run


async def round_trip(client: ContextAssemblyClient, request: dict[str, Any]) -> float:
    started = time.perf_counter()
    await client.evaluate_rules(request)
    return time.perf_counter() - started


async def measure(workload: Path, mode: str, gaps: list[float], count: int) -> list[dict[str, Any]]:
    plain = [as_request(q) for q in json.loads((workload / "requests.json").read_text())]
    requests = [{**r, **PARAMS.get(mode, {})} for r in plain][:count]
    workspace = workspace_for(workload, HERE.parent / "out" / "sidecar-ws")
    recording = HERE.parent / "out" / f"{workload.name}.spaced.pickle"
    rows = []
    with open(os.devnull, "w") as log:
        async with ContextAssemblyClient(workspace, stderr=log) as ours:
            await record(ours, {mode: requests}, 1e9, recording)  # a warm-up pass, its answers kept for the floor
            assert ours.connection.process is not None
            pid = ours.connection.process.pid
            await until_idle(pid)
            command = [sys.executable, str(HERE / "replay_server.py"), str(recording)]
            async with ContextAssemblyClient(workspace, command=command, stderr=log) as floor:
                recording.unlink()
                for request in requests:
                    await floor.evaluate_rules(request)
                for gap in gaps:
                    times: dict[str, list[float]] = {"ours": [], "floor": []}
                    used = cpu_s(pid)
                    for request in requests:
                        for name, client in (("ours", ours), ("floor", floor)):
                            await asyncio.sleep(gap / 1000)
                            times[name].append(await round_trip(client, request))
                    cpu_ms = (cpu_s(pid) - used) * 1000 / len(requests)
                    rows.append({"gap_ms": gap, "cpu_ms": cpu_ms, "load": os.getloadavg()[0],
                                 **{f"{name}_{stat}": value for name, each in times.items()
                                    for stat, value in percentiles(each).items()}})
    return rows


def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"p50_ms": statistics.median(ordered) * 1000, "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1000}


def report(size: str, mode: str, count: int, rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"{size}, {mode!r}: {count} requests per gap, each sent that long after the previous answer "
             "(ours and the replay floor interleaved)", "",
             "| gap ms | ours p50 ms | ours p90 ms | floor p50 ms | floor p90 ms | ours − floor, p50 ms "
             "| sidecar CPU ms per request | load 1m |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        lines.append(f"| {row['gap_ms']:g} | {row['ours_p50_ms']:.3f} | {row['ours_p90_ms']:.3f} "
                     f"| {row['floor_p50_ms']:.3f} | {row['floor_p90_ms']:.3f} "
                     f"| {row['ours_p50_ms'] - row['floor_p50_ms']:.3f} | {row['cpu_ms']:.3f} | {row['load']:.2f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", type=Path, required=True, help="a generated workload (run.py makes them)")
    ap.add_argument("--mode", default="none", choices=("all", "none", "compact", "none-compact"))
    ap.add_argument("--gaps", default="0,1,10,100", help="comma-separated idle gaps before each request, ms")
    ap.add_argument("--requests", type=int, default=100, help="requests per gap (the workload's first ones)")
    client_poll_option(ap)
    args = ap.parse_args()
    gaps = [float(g) for g in args.gaps.split(",") if g]
    rows = run(measure(args.workload.resolve(), args.mode, gaps, args.requests), busy_poll_ms=args.client_poll_ms)
    print("\n".join(report(args.workload.name, args.mode, args.requests, rows)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    sys.exit(main())
