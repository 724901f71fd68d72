"""The JSON-RPC sidecar over stdio, in one command: start-up, round trips and memory.

    python bench/rpc/run.py [--out bench/out/rpc] [--spawns 5] [--round-trips 1000] [--requests 10000]

1. Seeds a copy of examples/quickstart (its seed.json imported) under `<out>/ws/`.
2. Start-up: `--spawns` times, spawn `python -m context_assembly serve` → `initialize` answered, and
   → the first `contextAssembly/assemble` answered (cold: imports, loading, compiling, the stores).
3. Round trips, sequential, after 50 warm-up calls, each `--round-trips` times:
   `contextAssembly/evaluateRules`; `contextAssembly/assemble` of the example request (pipeline
   results cached, the steady state of an agent asking again within the cache TTL); the same with a
   different task text per call (every pipeline runs); and `memory/read` (the protocol's floor).
   Also the throughput of evaluateRules with 8 requests in flight.
4. Memory: `--requests` more requests (evaluateRules and assemble alternately), sampling the
   server's resident set (VmRSS in /proc/<pid>/status) every 1,000; reports the growth.

Prints one table (also `<out>/summary.md`; raw numbers in `<out>/results.json`). Timed through the
project's Python client (`context_assembly.client`), so a round trip includes framing, JSON and
dispatch on both sides.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "quickstart"
sys.path.insert(0, str(REPO / "server"))

from context_assembly.client import ContextAssemblyClient  # noqa: E402
from context_assembly.runtime import Runtime  # noqa: E402
from context_assembly.stores.importer import import_file  # noqa: E402

WARM_UP = 50
RSS_EVERY = 1000


def seed(target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks"))
    runtime = Runtime(target)
    try:
        import_file(runtime.memory, target / "seed.json", runtime.layout.codebolt)
    finally:
        runtime.close()
    return target


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def quiet() -> Any:
    return open(os.devnull, "w")  # noqa: SIM115 - the sidecar's log, for the client's lifetime


FLOOR = Path(__file__).resolve().parent / "floor_server.py"
INIT_RATIO_TARGET = 1.3  # ours ÷ the floor, spawn → initialize answered


async def raw_initialize(command: list[str], root: Path) -> float:
    """Spawn `command`, send `initialize` with LSP framing, and time until its answer is read (then exit)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                env=env)
    assert proc.stdin is not None and proc.stdout is not None
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {}}}).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await proc.stdin.drain()
    length = 0
    while True:
        line = await proc.stdout.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    answer = json.loads(await proc.stdout.readexactly(length))
    elapsed = time.perf_counter() - started
    assert answer.get("id") == 1 and "result" in answer, answer
    proc.kill()
    await proc.wait()
    return elapsed


async def startup(workspace: Path, request: dict[str, Any], spawns: int) -> dict[str, list[float]]:
    init, first, floor, ours_raw = [], [], [], []
    for _ in range(spawns):  # the floor and ours alternately, through the same raw client
        floor.append(await raw_initialize([sys.executable, str(FLOOR)], workspace))
        ours_raw.append(await raw_initialize([sys.executable, "-m", "context_assembly", "serve"], workspace))
    for _ in range(spawns):
        with quiet() as log:
            client = ContextAssemblyClient(workspace, stderr=log)
            started = time.perf_counter()
            await client.start()
            init.append(time.perf_counter() - started)
            await client.assemble(request)
            first.append(time.perf_counter() - started)
            await client.close()
    return {"initialize": init, "first_assemble": first, "floor_initialize": floor, "ours_raw_initialize": ours_raw}


async def timed(call: Any, count: int) -> list[float]:
    for _ in range(WARM_UP):
        await call(0)
    samples = []
    for i in range(count):
        started = time.perf_counter()
        await call(i + 1)
        samples.append(time.perf_counter() - started)
    return samples


async def steady(workspace: Path, request: dict[str, Any], round_trips: int, requests: int) -> dict[str, Any]:
    text = request["input"]["text"]
    out: dict[str, Any] = {}
    with quiet() as log:
        async with ContextAssemblyClient(workspace, stderr=log) as client:
            assert client.pid is not None
            out["rss_start_kib"] = rss_kib(client.pid)
            out["evaluateRules"] = await timed(lambda i: client.evaluate_rules(request), round_trips)
            out["assemble (cached pipelines)"] = await timed(lambda i: client.assemble(request), round_trips)
            out["assemble (every pipeline runs)"] = await timed(
                lambda i: client.assemble({**request, "input": {"text": f"{text} #{time.perf_counter_ns()}"}}),
                round_trips)
            out["memory/read"] = await timed(lambda i: client.memory.read("kv://users/u-ada"), round_trips)

            started = time.perf_counter()
            batch = 8
            rounds = max(1, round_trips // batch)
            for _ in range(rounds):
                await asyncio.gather(*(client.evaluate_rules(request) for _ in range(batch)))
            out["evaluateRules_concurrent_per_s"] = rounds * batch / (time.perf_counter() - started)

            samples = [(0, rss_kib(client.pid))]
            every = max(1, min(RSS_EVERY, requests // 5))  # a short run still gets a curve
            for i in range(1, requests + 1):
                if i % 2:
                    await client.evaluate_rules(request)
                else:
                    await client.assemble(request)
                if i % every == 0:
                    samples.append((i, rss_kib(client.pid)))
            out["rss_samples_kib"] = samples
    return out


def ms(value: float) -> str:
    return f"{value * 1000:.2f}"


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"{platform.system()} — stdio, the seeded examples/quickstart workspace.", "",
             "| measure | p50 ms | p99 ms | mean ms | n |", "| --- | --- | --- | --- | --- |"]
    for name in ("initialize", "first_assemble"):
        values = results["startup"][name]
        label = "spawn → initialize answered" if name == "initialize" else "spawn → first assemble answered"
        lines.append(f"| {label} | {ms(statistics.median(values))} | {ms(max(values))} (max) | "
                     f"{ms(statistics.fmean(values))} | {len(values)} |")
    startup = results["startup"]
    for name, label in (("floor_initialize", "floor: minimal pygls server, spawn → initialize answered (raw client)"),
                        ("ours_raw_initialize", "ours, spawn → initialize answered (raw client)")):
        values = startup[name]
        lines.append(f"| {label} | {ms(statistics.median(values))} | {ms(max(values))} (max) | "
                     f"{ms(statistics.fmean(values))} | {len(values)} |")
    for name in ("evaluateRules", "assemble (cached pipelines)", "assemble (every pipeline runs)", "memory/read"):
        values = results["steady"][name]
        lines.append(f"| {name} round trip | {ms(percentile(values, 50))} | {ms(percentile(values, 99))} | "
                     f"{ms(statistics.fmean(values))} | {len(values)} |")
    steady = results["steady"]
    ratio = statistics.median(startup["ours_raw_initialize"]) / statistics.median(startup["floor_initialize"])
    lines += ["", f"Start-up, ours ÷ floor (p50): {ratio:.2f}× (target ≤ {INIT_RATIO_TARGET}×) "
              f"{'PASS' if ratio <= INIT_RATIO_TARGET else 'MISS'}; load average {os.getloadavg()[0]:.2f}."]
    lines += ["", f"evaluateRules with 8 in flight: {steady['evaluateRules_concurrent_per_s']:.0f} requests/s.", "",
              f"Resident memory of the server over {args.requests} more requests (evaluateRules and assemble "
              "alternately):", "", "| after requests | RSS MiB |", "| --- | --- |"]
    samples = steady["rss_samples_kib"]
    lines += [f"| {n} | {kib / 1024:.1f} |" for n, kib in samples]
    first, last = samples[0][1], samples[-1][1]
    middle = samples[len(samples) // 2][1]
    lines += ["", f"Growth: {(last - first) / 1024:+.1f} MiB over {samples[-1][0]} requests "
              f"({(last - middle) / 1024:+.1f} MiB over the second half); RSS after start-up "
              f"{steady['rss_start_kib'] / 1024:.1f} MiB."]
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "rpc")
    parser.add_argument("--spawns", type=int, default=5)
    parser.add_argument("--round-trips", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=10000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    workspace = seed(args.out / "ws" / "quickstart")
    request = json.loads((workspace / "request.json").read_text())
    results = {"startup": await startup(workspace, request, args.spawns),
               "steady": await steady(workspace, request, args.round_trips, args.requests)}
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    table = report(results, args)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    sys.exit(asyncio.run(main()))
