"""Connections that come and go, through `serve --tcp`, in one command:

    python bench/rpc/churn.py [--out bench/out/churn] [--connections 300]

Each connection: `initialize` (with a token), `initialized`, one `memory/read`, `shutdown`,
`exit`, close; one after another. Two rows: every connection the only one (the workspace's runtime
is built when it opens and closed when it ends), and the same beside a connection held open the
whole run (the runtime stays: the baseline). Per row: connections a second and the server's
resident memory growth from after the first 50 connections to the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(REPO / "bench" / "rpc"))

from backlog import READ, client, serving  # noqa: E402
from run import rss_kib, seed  # noqa: E402

WARM = 50


async def one(port: int) -> None:
    connection = await client(port)
    connection.notify("initialized", {})
    await connection.request("memory/read", READ)
    await connection.close()


async def churn(workspace: Path, connections: int, held: bool) -> dict[str, float]:
    async with serving(workspace) as (process, port):
        keeper = await client(port) if held else None
        if keeper is not None:
            await keeper.request("memory/read", READ)  # its session, and the runtime, built
        for _ in range(WARM):
            await one(port)
        await asyncio.sleep(0.5)
        before, started = rss_kib(process.pid), time.perf_counter()
        for _ in range(connections):
            await one(port)
        elapsed = time.perf_counter() - started
        await asyncio.sleep(0.5)
        growth = rss_kib(process.pid) - before
        if keeper is not None:
            await keeper.close()
        return {"per_s": connections / elapsed, "growth_mib": growth / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "churn")
    parser.add_argument("--connections", type=int, default=300)
    args = parser.parse_args()
    workspace = seed(args.out / "ws")
    load = os.getloadavg()[0]
    alone = asyncio.run(churn(workspace, args.connections, held=False))
    beside = asyncio.run(churn(workspace, args.connections, held=True))
    print(f"{args.connections} connections one after another through serve --tcp; load {load:.2f}\n")
    print("| each connection | connections/s | server growth MiB |")
    print("| --- | ---: | ---: |")
    print(f"| the only one: its runtime built and closed | {alone['per_s']:.1f} | {alone['growth_mib']:.1f} |")
    print(f"| beside one held open (baseline) | {beside['per_s']:.1f} | {beside['growth_mib']:.1f} |")


if __name__ == "__main__":
    main()
