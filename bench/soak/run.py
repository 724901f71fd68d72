"""Soak: the sidecar's resident memory under a mixed load, over minutes (bounded by --minutes).

    python bench/soak/run.py [--minutes 3] [--clients 3] [--sample-s 10] [--out bench/out/soak]
    python bench/soak/run.py --trace [--minutes 1]   # the same load in this process, with tracemalloc

The server (`serve --tcp`, a seeded copy of examples/quickstart) gets `--clients` TCP connections,
each looping over: an assembly (a different task text each time), `contextAssembly/evaluateRules`,
a `memory/write` (a new key each time, so the stores' write generations keep moving and cached
pipeline results go stale), a `memory/read`, and an editor edit (`didOpen` once, then `didChange`
of a rule file, whose diagnostics are pushed). The server's RSS (VmRSS of /proc/<pid>/status) is
sampled every --sample-s seconds, with its anonymous and file-backed parts, its threads and its
SQLite connections (descriptors on project.db: one per thread that touched the database); the
table shows them over time, with the RSS growth per minute in the first and the second half (a
plateau: the second half's growth near zero). `--env NAME=VALUE` passes a variable to the server
(e.g. MALLOC_ARENA_MAX=2, to tell allocator arenas apart from what the program keeps).

`--trace` runs the same calls in this process (one session, no transport) under tracemalloc and
prints the lines whose allocations grew most between one third of the run and its end: what a
cache holds stops growing at its bound, a leak keeps going.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "server"))

from context_assembly.client.connection import Connection  # noqa: E402
from context_assembly.runtime import Runtime  # noqa: E402
from context_assembly.stores.importer import import_file  # noqa: E402

EXAMPLE = REPO / "examples" / "quickstart"
REQUEST: dict[str, Any] = json.loads((EXAMPLE / "request.json").read_text())
WORDS = ["login", "timeout", "refactor", "session", "auth", "cache", "docs", "billing", "retry", "index"]


def seeded(out: Path) -> Path:
    root = out / "ws"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks"))
    runtime = Runtime(root)
    try:
        import_file(runtime.memory, root / "seed.json", runtime.layout.codebolt)
    finally:
        runtime.close()
    return root


def calls(n: int, client: int) -> list[tuple[str, Any]]:
    """The n-th round of one client's mixed load."""
    text = " ".join(WORDS[(n * 7 + i * 3 + client) % len(WORDS)] for i in range(4)) + f" #{n}"
    request = {**REQUEST, "input": {"text": text}, "additional_variables": {
        **REQUEST["additional_variables"], "files_changed": n % 9}}
    return [("contextAssembly/assemble", request), ("contextAssembly/evaluateRules", request),
            ("memory/write", {"uri": f"kv://soak/c{client}-{n}", "value": {"n": n, "text": text}}),
            ("memory/read", {"uri": f"kv://soak/c{client}-{max(0, n - 1)}"})]


def rss_mb(pid: int) -> float:
    return status(pid)["VmRSS"]


def status(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile (MB) and Threads of a process, from /proc/<pid>/status."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
        elif key == "Threads":
            out[key] = int(value)
    return out


def db_handles(pid: int) -> int:
    """Open file descriptors on the SQLite database: one per connection (WAL and shm files apart)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(fd).endswith("project.db")
    return count


async def client_loop(port: int, root: Path, index: int, until: float, done: list[int], editor: bool = True) -> None:
    connection = Connection()
    await connection.connect_tcp("127.0.0.1", port)
    await connection.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    connection.notify("initialized", {})
    rule_file = root / ".codebolt" / "context-rule-engines" / "planning.json"
    uri, text = rule_file.as_uri(), rule_file.read_text()
    connection.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "json", "version": 1,
                                                                "text": text}})
    for n in itertools.count():
        if time.monotonic() >= until:
            break
        for method, params in calls(n, index):
            await connection.request(method, params)
        edited = text.replace('"planning"', f'"planning-{n % 5}"', 1)
        if editor:
                connection.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": n + 2},
                                                         "contentChanges": [{"text": edited}]})
        done[index] += 1
    await connection.close()


class Sample(NamedTuple):
    seconds: float
    rss: float  # MB
    anon: float  # MB: the heap, allocator arenas, the graph database's buffer pool
    file: float  # MB: mapped libraries and files
    threads: int
    db: int  # SQLite connections (file descriptors on project.db)
    rounds: int


def sample(pid: int, seconds: float, rounds: int) -> Sample:
    now = status(pid)
    return Sample(seconds, now["VmRSS"], now["RssAnon"], now["RssFile"], int(now["Threads"]), db_handles(pid),
                  rounds)


async def soak(args: argparse.Namespace) -> list[Sample]:
    root = seeded(args.out)
    env = {**os.environ, "PYTHONPATH": str(REPO / "server") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update(item.split("=", 1) for item in args.env)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "context_assembly", "serve", "--tcp", "127.0.0.1:0", "--workspace", str(root),
        stdin=subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env)
    assert process.stderr is not None
    while "listening on" not in (line := (await process.stderr.readline()).decode()):
        if not line:
            raise SystemExit("the server exited before listening")
    port = int(line.rsplit(":", 1)[1])
    started = time.monotonic()
    until = started + args.minutes * 60
    done = [0] * args.clients
    loops = [asyncio.ensure_future(client_loop(port, root, i, until, done, not args.no_editor))
             for i in range(args.clients)]
    samples = [sample(process.pid, 0.0, 0)]
    while not all(loop.done() for loop in loops):
        await asyncio.sleep(args.sample_s)
        samples.append(sample(process.pid, time.monotonic() - started, sum(done)))
        if args.verbose:
            print(samples[-1], flush=True)
    await asyncio.gather(*loops)
    process.terminate()
    await process.wait()
    return samples


def growth(samples: list[Sample]) -> tuple[float, float]:
    """MB per minute over the first and the second half of the samples."""
    half = len(samples) // 2

    def slope(part: list[Sample]) -> float:
        return (part[-1].rss - part[0].rss) / max((part[-1].seconds - part[0].seconds) / 60, 1e-9)

    return slope(samples[: half + 1]), slope(samples[half:])


def trace(args: argparse.Namespace) -> None:
    from context_assembly.methods import Session, call

    root = seeded(args.out)
    session = Session(root)
    until = time.monotonic() + args.minutes * 60
    third = time.monotonic() + args.minutes * 20
    tracemalloc.start(10)
    first = None
    rounds = 0
    for n in itertools.count():
        if time.monotonic() >= until:
            break
        if first is None and time.monotonic() >= third:
            first = tracemalloc.take_snapshot()
        for method, params in calls(n, 0):
            call(session, method, params)
        rounds += 1
    last = tracemalloc.take_snapshot()
    assert first is not None
    print(f"{rounds} rounds; cache entries {len(session.runtime.cache)}")
    for stat in last.compare_to(first, "traceback")[:10]:
        print(f"{stat.size_diff / 1024:+.0f} KiB ({stat.count_diff:+d} blocks)", stat.traceback.format()[-1].strip())
    session.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the server (e.g. MALLOC_ARENA_MAX=2)")
    parser.add_argument("--no-editor", action="store_true", help="leave the editor edits out of the load")
    parser.add_argument("--verbose", action="store_true", help="print each sample as it is taken")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "soak")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.trace:
        trace(args)
        return 0
    samples = asyncio.run(soak(args))
    first, second = growth(samples)
    rows = [f"| {s.seconds:.0f} | {s.rss:.0f} | {s.anon:.0f} | {s.file:.0f} | {s.threads} | {s.db} | {s.rounds} |"
            for s in samples]
    table = ("| s | RSS MB | anon MB | file MB | threads | SQLite connections | rounds |\n"
             "| --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows))
    peak, median = max(s.rss for s in samples), statistics.median(s.rss for s in samples)
    summary = (f"{table}\n\nRSS growth: {first:+.1f} MB/min in the first half, {second:+.1f} MB/min in the "
               f"second; peak {peak:.0f} MB, median {median:.0f} MB; load average "
               f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(summary)
    (args.out / "summary.md").write_text(summary + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    sys.exit(main())
