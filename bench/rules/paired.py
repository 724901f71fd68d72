"""evaluateRules through the sidecar against json-rules-engine in alternating slices.

    python bench/rules/paired.py --workload bench/out/data/large [--slices 5] [--passes 5]

`run.py` times each implementation once, minutes apart; on this shared host the sidecar rows of
`large` moved by up to 2× within an hour, more than json-rules-engine did (bench/README.md), so a
ratio taken across minutes says as much about the host as about the code. Here each slice times
one json-rules-engine run of the workload (its own process, after its warm-up run, as `run.py`
runs it) and right after it, through one kept-alive sidecar, each mode's sequential round trips
over the same requests (the median of `--passes` passes); the ratio is taken per slice, the
verdict on the median of the slices. Timing starts once the sidecar is idle after the warm-up pass
(no CPU used for 2 s: what that pass left it to compile in the background is done), so the rows are
the steady state of a long-lived sidecar; the first answer has its own row (`sidecar.py
--first-only`). The goals are issue 14's (≥ 10× with a trace, ≥ 30× without).

Each mode also gets a *floor* row: the same round trips through the same client to
`replay_server.py`, which answers each request at once with the answer the sidecar gave it in
the warm-up pass (recorded then, as orjson writes it): no evaluation at all, no event loop, no
pygls. Its ratio is the most any server could reach for that answer over this pipe and client;
a goal its floor misses is out of reach of the server's code, whatever it does (`--no-floor`:
without; a mode whose recorded answers exceed `--floor-max-mb` in all has no floor row).

And a *matching floor* row: the same, through `replay_server.py --match`, which before replaying
does what every answer of the sidecar does before settling (parse and validate the request, see
the workspace is current, build the lookup, run the same generated matchers). Its ratio is the
most a server built on these matchers could reach, settling, the answer's JSON and the event loop
costing nothing (`--no-matching-floor`: without).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import peers
from sidecar import PARAMS, as_request, client_poll_option, cpu_s, workspace_for

from context_assembly.client import ContextAssemblyClient, run

HERE = Path(__file__).resolve().parent
# mode -> (row label, goal: minimum ratio to json-rules-engine)
MODES = {"all": ("full trace", 10.0), "compact": ("full trace compact, as received", 10.0),
         "none": ('explain="none"', 30.0), "none-compact": ('explain="none" compact, as received', 30.0)}


async def passes(client: ContextAssemblyClient, requests: list[dict[str, Any]], count: int) -> float:
    """The median over `count` sequential passes of the seconds per request."""
    seconds = []
    for _ in range(count):
        t0 = time.perf_counter()
        for request in requests:
            await client.evaluate_rules(request)
        seconds.append((time.perf_counter() - t0) / len(requests))
    return statistics.median(seconds)


async def until_idle(pid: int, quiet_s: float = 2.0, at_most_s: float = 600.0) -> float:
    """Wait until the sidecar has used no CPU for `quiet_s` (what the warm-up pass left it to do
    in the background, compiling generated matchers, trace programs and packers, is done); the
    seconds waited. Timed passes then measure the steady state a long-lived sidecar serves from."""
    t0 = time.monotonic()
    used, still_since = cpu_s(pid), time.monotonic()
    while time.monotonic() - t0 < at_most_s:
        await asyncio.sleep(0.25)
        now = cpu_s(pid)
        if now != used:
            used, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            break
    return time.monotonic() - t0


def jre_per_request(workload: Path, out: Path, modules: Path) -> float:
    stats = peers.run_json_rules_engine(workload, out / "paired.jre.json", out / "paired.jre.stats.json", 1, modules)
    return float(stats["median_s"]) / int(stats["requests"])


async def record(client: ContextAssemblyClient, batches: dict[str, list[dict[str, Any]]],
                 floor_max_mb: float | None, recording: Path) -> list[str]:
    """One untimed pass per mode (trace programs, layouts, bits made before anything is timed),
    each answer kept, as orjson writes it, for the replay server under its params (as
    `replay_server.py` keys them) and written to `recording`. The modes that have a floor row."""
    answers: dict[bytes, bytes] = {}
    floored = []
    for mode, requests in batches.items():
        kept = {}
        for request in requests:
            kept[orjson.dumps(request, option=orjson.OPT_SORT_KEYS)] = \
                orjson.dumps(await client.evaluate_rules(request))
        if floor_max_mb is not None and sum(map(len, kept.values())) <= floor_max_mb * 1e6:
            answers.update(kept)
            floored.append(mode)
    if floored:
        recording.write_bytes(pickle.dumps(answers))
    return floored


async def measure(workload: Path, out: Path, modes: list[str], slices: int, count: int,
                  floor_max_mb: float | None, matching_floor: bool = True) -> dict[str, Any]:
    modules = peers.ensure_node_peer(out / "peers-node")
    plain = [as_request(q) for q in json.loads((workload / "requests.json").read_text())]
    batches = {mode: [{**r, **PARAMS.get(mode, {})} for r in plain] for mode in modes}
    rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    workspace = workspace_for(workload, HERE.parent / "out" / "sidecar-ws")
    recording = out / f"{workload.name}.replay.pickle"
    with open(os.devnull, "w") as log:
        async with ContextAssemblyClient(workspace, stderr=log) as client, contextlib.AsyncExitStack() as stack:
            floored = await record(client, batches, floor_max_mb, recording)
            assert client.connection.process is not None
            idle_after = await until_idle(client.connection.process.pid)
            replay = matching = None
            if floored:
                command = [sys.executable, str(HERE / "replay_server.py"), str(recording)]
                replay = await stack.enter_async_context(ContextAssemblyClient(workspace, command=command, stderr=log))
                if matching_floor:
                    matching = await stack.enter_async_context(ContextAssemblyClient(
                        workspace, command=[*command, "--match", str(workspace.resolve())], stderr=log))
                recording.unlink()  # read by the replay servers as they started
                for mode in floored:  # they answer every request (an unrecorded one is an error)
                    await passes(replay, batches[mode], 1)
                    if matching is not None:  # its first answers evaluate (and compile) as the sidecar does
                        await passes(matching, batches[mode], 1)
                if matching is not None and matching.connection.process is not None:
                    await until_idle(matching.connection.process.pid)
            for _ in range(slices):
                jre = await asyncio.to_thread(jre_per_request, workload, out, modules)
                for mode in modes:
                    ours = await passes(client, batches[mode], count)
                    row = {"jre_ms": jre * 1000, "ours_ms": ours * 1000, "ratio": jre / ours}
                    if replay is not None and mode in floored:
                        floor = await passes(replay, batches[mode], count)
                        row.update(floor_ms=floor * 1000, floor_ratio=jre / floor)
                    if matching is not None and mode in floored:
                        least = await passes(matching, batches[mode], count)
                        row.update(matching_ms=least * 1000, matching_ratio=jre / least)
                    rows[mode].append(row)
    return {"workload": str(workload), "slices": slices, "passes": count, "rows": rows,
            "loadavg_1m": round(os.getloadavg()[0], 2), "idle_after_s": round(idle_after, 1)}


def report(size: str, result: dict[str, Any]) -> list[str]:
    lines = [f"{size}: {result['slices']} slices, each one json-rules-engine run then per mode the median "
             f"of {result['passes']} sequential passes through the sidecar (timed once it was idle, "
             f"{result['idle_after_s']} s after the warm-up pass); the client polls for each answer for up "
             f"to {result['client_poll_ms']:g} ms; load {result['loadavg_1m']}", "",
             "| mode | json-rules-engine ms per request (slices) | ours ms per request (slices) "
             "| ratio per slice | median ratio | goal |",
             "| --- | --- | --- | --- | ---: | --- |"]
    for mode, slices in result["rows"].items():
        label, goal = MODES[mode]
        ratio = statistics.median(s["ratio"] for s in slices)
        jre = ", ".join(f"{s['jre_ms']:.1f}" for s in slices)
        ours = ", ".join(f"{s['ours_ms']:.3f}" for s in slices)
        each = ", ".join(f"{s['ratio']:.1f}×" for s in slices)
        verdict = "PASS" if ratio >= goal else "MISS"
        lines.append(f"| {label} | {jre} | {ours} | {each} | {ratio:.1f}× | ≥ {goal:g}×: {verdict} |")
        for prefix, row, reachable in FLOORS:
            if all(f"{prefix}_ratio" in s for s in slices):
                lines.append(floor_line(prefix, row, reachable, slices, jre, goal))
    return lines


# the floor rows: (key prefix in a slice, row label, what a median at the goal says)
FLOORS = [("floor", "floor: the same answers replayed at once", "reachable"),
          ("matching", "matching floor: replayed after parsing, lookup and matching", "reachable with these matchers")]


def floor_line(prefix: str, label: str, reachable: str, slices: list[dict[str, float]], jre: str, goal: float) -> str:
    median = statistics.median(s[f"{prefix}_ratio"] for s in slices)
    times = ", ".join(f"{s[f'{prefix}_ms']:.3f}" for s in slices)
    each = ", ".join(f"{s[f'{prefix}_ratio']:.1f}×" for s in slices)
    verdict = reachable if median >= goal else reachable.replace("reachable", "out of reach")
    return f"| {label} | {jre} | {times} | {each} | {median:.1f}× | {verdict} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", type=Path, required=True, help="a generated workload (run.py makes them)")
    ap.add_argument("--slices", type=int, default=5)
    ap.add_argument("--passes", type=int, default=5, help="sequential passes per mode and slice (their median)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--out", type=Path, default=HERE.parent / "out")
    ap.add_argument("--no-floor", action="store_true", help="no replay-server floor rows")
    ap.add_argument("--no-matching-floor", action="store_true",
                    help="no matching-floor rows (replay_server.py --match)")
    ap.add_argument("--floor-max-mb", type=float, default=1000.0,
                    help="a mode's answers kept for its floor row at most (MB, all requests together)")
    client_poll_option(ap)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown mode(s) {', '.join(unknown)}")
    out = args.out.resolve()
    floor_max_mb = None if args.no_floor else args.floor_max_mb
    result = run(measure(args.workload.resolve(), out, modes, args.slices, args.passes, floor_max_mb,
                         not args.no_matching_floor), busy_poll_ms=args.client_poll_ms)
    result["client_poll_ms"] = args.client_poll_ms
    size = args.workload.name
    (out / f"{size}.paired.json").write_text(json.dumps(result, indent=2))
    print("\n".join(report(size, result)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    sys.exit(main())
