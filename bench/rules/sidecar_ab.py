"""Two source trees side by side through the sidecar: sequential round trips of
`contextAssembly/evaluateRules` with `"explain": "none"` (`--method all`: the full trace;
`compact`: the full trace with `"trace_format": "compact"`, the answer as received;
`none-compact`: `"explain": "none"` with `"trace_format": "compact"`, as received; `floor`:
`contextAssembly/memoryTypes`, the protocol's floor), alternated in short slices so that both see
the same machine load.

    mkdir -p bench/out/before && git archive <commit> server | tar -x -C bench/out/before
    python bench/rules/sidecar_ab.py --base bench/out/before/server --workload bench/out/data/medium

Each tree runs its own client and server (`PYTHONPATH` = that tree) on its own copy of the
workspace (`bench/out/sidecar-ws/ab-base|ab-this/`), both kept alive; slice i runs
one then the other (the order alternates), `--seconds` each. Per tree: the median over slices of
the p10 and p50 round trip, the wall time per request, and the user / system CPU per request of
the server (`/proc`) and of the client; then in how many slices the current tree's p50 (with
`--in-flight` N > 1: its wall time per request) was the lower.
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
REPO = HERE.parents[1]

DRIVER = r'''
import asyncio, json, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from sidecar import PARAMS, as_request, workspace_for
from context_assembly.client import ContextAssemblyClient

def times(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])

async def main(workload, method):
    options = PARAMS.get(method, {})  # "all" and "floor": none
    requests = [{**as_request(q), **options} for q in json.loads((workload / "requests.json").read_text())]
    workspace = workspace_for(workload, Path(sys.argv[4]))
    loop = asyncio.get_running_loop()
    hz = os.sysconf("SC_CLK_TCK")
    with open(os.devnull, "w") as log:
        async with ContextAssemblyClient(workspace, stderr=log) as client:
            for request in requests[:50]:
                await client.evaluate_rules(request)
            print("ready", flush=True)
            n = 0

            async def one(seconds, t0, latencies):
                nonlocal n
                while time.perf_counter() - t0 < seconds:
                    start, n = time.perf_counter(), n + 1
                    if method != "floor":
                        await client.evaluate_rules(requests[n % len(requests)])
                    else:
                        await client.request("contextAssembly/memoryTypes", {})
                    latencies.append(time.perf_counter() - start)

            while (line := (await loop.run_in_executor(None, sys.stdin.readline)).strip()):
                seconds, latencies = float(line), []
                t0, (u0, s0), mine = time.perf_counter(), times(client.pid), os.times()
                await asyncio.gather(*(one(seconds, t0, latencies) for _ in range(int(sys.argv[5]))))
                elapsed = time.perf_counter() - t0
                (u1, s1), now, k = times(client.pid), os.times(), len(latencies)
                latencies.sort()
                print(json.dumps({"n": k, "p10": latencies[k // 10] * 1000, "p50": latencies[k // 2] * 1000,
                                  "per_request": elapsed / k * 1000,
                                  "server_user": (u1 - u0) / hz / k * 1000, "server_sys": (s1 - s0) / hz / k * 1000,
                                  "client_user": (now.user - mine.user) / k * 1000,
                                  "client_sys": (now.system - mine.system) / k * 1000}), flush=True)

asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
'''


def start(tree: Path, workload: Path, method: str, root: Path, in_flight: int) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", DRIVER, str(workload), method, str(HERE), str(root),
                                str(in_flight)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(tree)})
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the `server` folder of the tree to compare with")
    ap.add_argument("--workload", type=Path, required=True)
    ap.add_argument("--method", choices=("none", "all", "compact", "none-compact", "floor"), default="none")
    ap.add_argument("--slices", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--root", type=Path, default=HERE.parent / "out" / "sidecar-ws")
    ap.add_argument("--in-flight", type=int, default=1, help="requests in flight (1: sequential round trips)")
    args = ap.parse_args()
    trees = {"base": args.base.resolve(), "this tree": REPO / "server"}
    from as_installed import compile_package  # (bench/ is put on the path below, before main runs)

    compile_package(trees["base"])
    # each its own workspace copy: two servers on one workspace would share its stores and watches
    processes = {name: start(tree, args.workload, args.method, args.root / folder, args.in_flight)
                 for (name, tree), folder in zip(trees.items(), ("ab-base", "ab-this"), strict=True)}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    loads = [os.getloadavg()[0]]
    for i in range(args.slices):
        for name in (list(trees) if i % 2 == 0 else list(reversed(trees))):
            process = processes[name]
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(f"{args.seconds}\n")
            process.stdin.flush()
            rows[name].append(json.loads(process.stdout.readline()))
        loads.append(os.getloadavg()[0])
    for process in processes.values():
        assert process.stdin is not None
        process.stdin.write("\n")
        process.stdin.flush()
        process.wait()
    what = {"none": 'evaluateRules, "explain": "none"', "all": "evaluateRules, full trace",
            "compact": 'evaluateRules, full trace, "trace_format": "compact"',
            "none-compact": 'evaluateRules, "explain": "none", "trace_format": "compact"'}.get(
        args.method, "memoryTypes (the floor)")
    print(f"{args.workload.name}, {what}, {args.in_flight} in flight: {args.slices} slices of {args.seconds:g} s "
          f"per tree, load average {min(loads):.1f}–{max(loads):.1f}")
    print("| tree | p10 ms | p50 ms | wall ms per request | server user / sys CPU ms | client user / sys CPU ms "
          "| requests |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, found in rows.items():
        def med(key: str, found: list[dict[str, Any]] = found) -> float:
            return statistics.median(r[key] for r in found)
        print(f"| {name} | {med('p10'):.3f} | {med('p50'):.3f} | {med('per_request'):.3f} "
              f"| {med('server_user'):.3f} / {med('server_sys'):.3f} "
              f"| {med('client_user'):.3f} / {med('client_sys'):.3f} | {sum(r['n'] for r in found):,} |")
    key = "p50" if args.in_flight == 1 else "per_request"
    wins = sum(b[key] < a[key] for a, b in zip(rows["base"], rows["this tree"], strict=True))
    ratio = statistics.median(a[key] / b[key] for a, b in zip(rows["base"], rows["this tree"], strict=True))
    print(f"this tree's {key} lower in {wins} of {args.slices} slices; "
          f"base ÷ this tree, median of the slices: {ratio:.2f}×")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    main()
