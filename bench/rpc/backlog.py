"""One client's backlog beside another client, through `serve --tcp`, in one command:

    python bench/rpc/backlog.py [--out bench/out/backlog] [--pipelined 100000] [--probes 20]

A greedy client sends `--pipelined` `memory/read` requests at once (reading its answers as they
come); meanwhile a second client sends `--probes` reads one after another. Per server setting, the
table gives the second client's round trip (median and slowest), the greedy client's reads per
second, and the server's resident memory growth (peak over its size before). Run against the
default `--max-in-flight` (64) and, as the baseline in the same run, a cap no client reaches
(the server before the cap: it read every request at once). A quiet row times the probes alone;
a last row times them beside a client that connects with a wrong token, is refused and reconnects,
as fast as it can (every connection costs the event loop a server of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(REPO / "bench" / "rpc"))

from run import rss_kib, seed  # noqa: E402

from context_assembly.client.connection import Connection  # noqa: E402

TOKEN = "bench-token"
READ = {"uri": "kv://users/u-ada"}
INITIALIZE: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {},
                              "initializationOptions": {"token": TOKEN}}
UNCAPPED = 1 << 30


@contextlib.asynccontextmanager
async def serving(workspace: Path, *args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    """`serve --tcp` with a token over `workspace`: (the process, its port), stopped on leaving."""
    env = {**os.environ, "CONTEXT_ASSEMBLY_TOKEN": TOKEN, "PYTHONPATH": str(REPO / "server")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "context_assembly", "serve", "--tcp", "127.0.0.1:0", "--workspace", str(workspace),
        *args, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        assert process.stderr is not None
        while line := (await process.stderr.readline()).decode():
            if match := re.search(r"listening on tcp://[^:]+:(\d+)", line):
                yield process, int(match.group(1))
                return
        raise RuntimeError("the server exited before listening")
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def timed_reads(probe: Connection, count: int, gap_s: float = 0.0) -> list[float]:
    """Milliseconds of `count` reads one after another (`gap_s` apart)."""
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        await probe.request("memory/read", READ)
        times.append((time.perf_counter() - t0) * 1000)
        if gap_s:
            await asyncio.sleep(gap_s)
    return times


async def client(port: int) -> Connection:
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", port)
    await connection.request("initialize", INITIALIZE)
    return connection


async def peak_rss(pid: int, until: asyncio.Future[Any]) -> int:
    peak = 0
    while not until.done():
        peak = max(peak, rss_kib(pid))
        await asyncio.sleep(0.05)
    return peak


async def bad_tokens(port: int, stop: asyncio.Event) -> int:
    """Connect, `initialize` with a wrong token, disconnect: as fast as one client can, until `stop`."""
    count = 0
    while not stop.is_set():
        connection = Connection()
        await connection.connect_tcp("127.0.0.1", port)
        with contextlib.suppress(Exception):  # -32004: refused, as meant
            await connection.request("initialize", {**INITIALIZE, "initializationOptions": {"token": "wrong"}})
        await connection.close(timeout=1)
        count += 1
    return count


async def flooded(workspace: Path, probes: int) -> dict[str, float]:
    async with serving(workspace) as (_, port):
        probe = await client(port)
        await timed_reads(probe, 50)  # warm
        stop = asyncio.Event()
        flood = asyncio.ensure_future(bad_tokens(port, stop))
        await asyncio.sleep(1)
        started = time.perf_counter()
        times = await timed_reads(probe, probes, gap_s=0.05)  # spread over the flood
        stop.set()
        count = await flood
        return {"p50": statistics.median(times), "max": max(times),
                "throughput": count / (time.perf_counter() - started + 1), "growth_mib": 0.0}


async def scenario(workspace: Path, pipelined: int, probes: int, cap: int | None) -> dict[str, float]:
    async with serving(workspace, *([] if cap is None else ["--max-in-flight", str(cap)])) as (process, port):
        probe = await client(port)
        await timed_reads(probe, 50)  # warm: the stores open, the code paths run
        before = rss_kib(process.pid)
        reads: list[asyncio.Future[Any]] = []
        started = time.perf_counter()
        if pipelined:
            greedy = await client(port)
            started = time.perf_counter()
            reads = [asyncio.ensure_future(greedy.request("memory/read", READ)) for _ in range(pipelined)]
            await asyncio.sleep(0.2)
        everything = asyncio.ensure_future(asyncio.gather(*reads))
        peak = asyncio.ensure_future(peak_rss(process.pid, everything))
        times = await timed_reads(probe, probes)
        await everything
        elapsed = time.perf_counter() - started
        growth = (await peak) - before
        return {"p50": statistics.median(times), "max": max(times),
                "throughput": pipelined / elapsed if pipelined else 0.0, "growth_mib": max(growth, 0) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "backlog")
    parser.add_argument("--pipelined", type=int, default=100_000)
    parser.add_argument("--probes", type=int, default=20)
    args = parser.parse_args()
    workspace = seed(args.out / "ws")
    load = os.getloadavg()[0]
    rows = [("probes alone", asyncio.run(scenario(workspace, 0, args.probes, None))),
            (f"beside {args.pipelined:,} pipelined reads, --max-in-flight 64 (default)",
             asyncio.run(scenario(workspace, args.pipelined, args.probes, None))),
            (f"beside {args.pipelined:,} pipelined reads, no cap reached (baseline)",
             asyncio.run(scenario(workspace, args.pipelined, args.probes, UNCAPPED))),
            ("beside a client connecting with a wrong token as fast as it can (reads/s: its connections/s)",
             asyncio.run(flooded(workspace, args.probes)))]
    print(f"memory/read through serve --tcp; load {load:.2f}\n")
    print("| scenario | the other client's read p50 ms | slowest ms | greedy reads/s | server growth MiB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, row in rows:
        throughput = f"{row['throughput']:,.0f}" if row["throughput"] else "-"
        print(f"| {name} | {row['p50']:.2f} | {row['max']:.2f} | {throughput} | {row['growth_mib']:.1f} |")
    capped, uncapped = rows[1][1], rows[2][1]
    print(f"\nbaseline ÷ capped: other's p50 {uncapped['p50'] / capped['p50']:.1f}×, growth "
          f"{uncapped['growth_mib'] / max(capped['growth_mib'], 0.1):.1f}×, greedy throughput "
          f"{capped['throughput'] / uncapped['throughput']:.2f}× (capped ÷ baseline)")


if __name__ == "__main__":
    main()
