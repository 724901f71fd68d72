"""evaluateRules through the sidecar over stdio, on a bench workload; writes stats like ours.py.

    python bench/rules/sidecar.py --workload bench/out/data/medium --stats bench/out/medium.sidecar.stats.json

The workload's engines become `.codebolt/context-rule-engines/<id>.json` of a workspace under
`bench/out/sidecar-ws/<size>/` (rewritten only when they changed); a server is spawned through
the project's client (`python -m context_assembly serve`). Timed per run: every request of the
workload as `contextAssembly/evaluateRules`, sequential round trips (JSON encoding, the pipe and
the client's decoding included), once with the full trace (`explain` absent: "all"), once
with `"explain": "none"`, once with `"trace_format": "compact"` (the answer as received) and once
with that answer expanded by the client into the full one (`evaluate_rules(compact_trace=True)`;
its bytes are the compact answer's; the expansion alone is also timed), and the same two for
`"explain": "none"` with `"trace_format": "compact"` (the matched rules as layout indexes); then
the same requests
with `--in-flight` N (default 8) sent before their answers arrive (throughput: the server's work
overlaps the pipe and the client's decoding).
Per mode also the CPU time per sequential request of the server process (`/proc`) and of this
client, the answer's size and orjson's encode / decode cost per MB of it. Also: spawn →
`initialize` answered → first evaluateRules answered (the workspace loaded and compiled, the
trace program built), and after a rule file is edited, the next answer (one engine recompiled).
First of all, spawn → first answer per `explain` mode (and the compact trace) with the compile
cache cold and warm, each in a new server, with the answer's size and what orjson's encoding and
decoding of it alone cost (`--first-only`: only these).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from context_assembly.client import ContextAssemblyClient, run
from context_assembly.lsp.polling import DEFAULT_MS

ROWS = {"all": "ours via sidecar, full trace", "none": 'ours via sidecar, explain="none"',
        "compact": "ours via sidecar, full trace compact",  # trace_format "compact", the answer as received
        "expanded": "ours via sidecar, full trace compact, expanded by the client",  # into the "all" answer
        "none-compact": 'ours via sidecar, explain="none" compact',  # as received: rules as layout indexes
        "none-expanded": 'ours via sidecar, explain="none" compact, expanded by the client'}  # the "none" answer
PARAMS = {"none": {"explain": "none"}, "compact": {"trace_format": "compact"},  # added to each request
          "none-compact": {"explain": "none", "trace_format": "compact"}, "none-expanded": {"explain": "none"}}
EXPANDED = {"expanded", "none-expanded"}  # answers the client expands (`evaluate_rules(compact_trace=True)`)
# spawn → first answer, each cold and warm: the request's options per mode
FIRST_MODES = {"none": {"explain": "none"}, "matched": {"explain": "matched"}, "all": {},
               "compact": {"trace_format": "compact"}}
CACHE_ENV = "CONTEXT_ASSEMBLY_RULE_CACHE"  # the compile cache's folder (rules/cache.py)
SERVER = Path(__file__).resolve().parents[2] / "server"
PIPELINED = " ({n} in flight)"  # the row of the same mode, several requests sent before the answers


def workspace_for(workload: Path, root: Path) -> Path:
    target = root / workload.name / ".codebolt" / "context-rule-engines"
    target.mkdir(parents=True, exist_ok=True)
    for source in sorted((workload / "engines").glob("*.json")):
        dest = target / source.name
        if not dest.exists() or dest.read_bytes() != source.read_bytes():
            dest.write_bytes(source.read_bytes())
    return root / workload.name


def as_request(q: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"scope_variables": q.get("scope") or {},
                            "additional_variables": q.get("additional_variables") or {}}
    if q.get("input") is not None:
        data["input"] = q["input"]
    return data


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux `/proc`; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def codec_ms_per_mb(answer: Any) -> dict[str, float]:
    """orjson's encoding (what the server does) and decoding (what the client does) of one answer."""
    body = orjson.dumps(answer)
    rounds = max(3, int(20_000_000 / max(len(body), 1)) // 10)
    t0 = time.perf_counter()
    for _ in range(rounds):
        orjson.dumps(answer)
    t1 = time.perf_counter()
    for _ in range(rounds):
        orjson.loads(body)
    t2 = time.perf_counter()
    mb = len(body) / 1e6
    return {"bytes": len(body), "encode_ms_per_mb": (t1 - t0) / rounds * 1000 / mb,
            "decode_ms_per_mb": (t2 - t1) / rounds * 1000 / mb}


async def timed(client: ContextAssemblyClient, requests: list[dict[str, Any]], in_flight: int,
                expand: bool = False) -> float:
    """Seconds for every request, `in_flight` at a time (1: sequential round trips)."""
    t0 = time.perf_counter()
    if in_flight == 1:
        for request in requests:
            await client.evaluate_rules(request, compact_trace=expand)
    else:
        gate = asyncio.Semaphore(in_flight)

        async def one(request: dict[str, Any]) -> None:
            async with gate:
                await client.evaluate_rules(request, compact_trace=expand)

        await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - t0


async def after_edit_s(client: ContextAssemblyClient, workspace: Path, request: dict[str, Any]) -> float:
    """The next answer after one rule file was edited (that engine alone is recompiled); the file is
    put back afterwards."""
    engine_file = sorted((workspace / ".codebolt" / "context-rule-engines").glob("*.json"))[0]
    original = engine_file.read_text()
    doc = json.loads(original)
    doc["rules"][0]["name"] = f"{doc['rules'][0].get('name')} (edited)"
    try:
        engine_file.write_text(json.dumps(doc, indent=2))
        t0 = time.perf_counter()
        await client.evaluate_rules(request)
        return time.perf_counter() - t0
    finally:
        engine_file.write_text(original)


def engine_entries(cache: Path, workspace: Path) -> list[Path]:
    """Where the compile cache in `cache` keeps each rule file's engine (rules/cache.py; the trace
    programs' entries beside them are not counted). The key is the one the server computes: the
    bench imports the same package."""
    from context_assembly.rules.cache import CompileCache

    store = CompileCache(cache)
    folder = workspace / ".codebolt" / "context-rule-engines"
    return [store.path(store.key(path.read_bytes(), path.stem)) for path in sorted(folder.glob("*.json"))]


async def all_entries_s(paths: list[Path], started: float, limit_s: float = 120.0) -> float:
    """Spawn → the compile cache holding an entry per rule file (`paths`): a cold server answers
    through interpreted matchers and compiles the generated ones (and writes their entries) in the
    background (rules/background.py); polled every 10 ms."""
    while not all(path.exists() for path in paths) and time.perf_counter() - started < limit_s:
        await asyncio.sleep(0.01)
    return time.perf_counter() - started


async def first_answer(workspace: Path, request: dict[str, Any], mode: str, env: dict[str, str],
                       edit: bool, cold: bool = False) -> dict[str, float]:
    """Spawn → first answer in `mode` (a new server; `env`: its compile-cache folder, .pyc or not);
    with `edit`, also the next answer after one rule file was edited (that engine alone recompiled);
    without (a cold start), also the second answer and spawn → every engine's entry written."""
    out: dict[str, float] = {}
    request = {**request, **FIRST_MODES[mode]}
    paths = engine_entries(Path(env[CACHE_ENV]), workspace) if cold else []  # (keys computed before the clock)
    with open(os.devnull, "w") as log:
        started = time.perf_counter()
        async with ContextAssemblyClient(workspace, stderr=log, env=env) as client:
            out["initialize_s"] = time.perf_counter() - started
            out["initialize_cpu_s"] = cpu_s(client.pid or 0)
            answer = await client.evaluate_rules(request)
            out["first_s"] = time.perf_counter() - started
            out["server_cpu_s"] = cpu_s(client.pid or 0)  # load-independent: the server's own CPU
            codec = codec_ms_per_mb(answer)  # what the answer's size alone costs (orjson, both ends)
            mb = codec["bytes"] / 1e6
            out.update(answer_bytes=codec["bytes"], encode_s=codec["encode_ms_per_mb"] * mb / 1000,
                       decode_s=codec["decode_ms_per_mb"] * mb / 1000)
            if edit:
                out["after_edit_s"] = await after_edit_s(client, workspace, request)
            if cold:
                t0 = time.perf_counter()
                await client.evaluate_rules(request)
                out["second_s"] = time.perf_counter() - t0
                out["entries_s"] = await all_entries_s(paths, started)
    return out


async def first_answers(workspace: Path, request: dict[str, Any], cache: Path) -> dict[str, dict[str, float]]:
    """Per mode: cold (an empty compile cache) and warm (the cache the cold start left, a new
    process), then after one rule file edit (warm). The server's modules load from .pyc files, as
    an installed package's do (a folder under bench/out, made by a first spawn); the last row
    without them, as `PYTHONDONTWRITEBYTECODE=1` would."""
    installed = {CACHE_ENV: str(cache), "PYTHONDONTWRITEBYTECODE": "",
                 "PYTHONPYCACHEPREFIX": str(cache.parent / "pycache")}
    out = {}
    for mode in FIRST_MODES:
        shutil.rmtree(cache, ignore_errors=True)
        out[f"{mode}:cold"] = await first_answer(workspace, request, mode, installed, edit=False, cold=True)
        out[f"{mode}:warm"] = await first_answer(workspace, request, mode, installed, edit=True)
    with tempfile.TemporaryDirectory() as bare:  # the package without its bytecode (other benches compile
        shutil.copytree(SERVER / "context_assembly", Path(bare) / "context_assembly",  # it in the tree)
                        ignore=shutil.ignore_patterns("__pycache__"))
        no_pyc = {**installed, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "", "PYTHONPATH": bare}
        out["none:warm, no .pyc"] = await first_answer(workspace, request, "none", no_pyc, edit=False)
    return out


async def expand_ms(client: ContextAssemblyClient, request: dict[str, Any]) -> float:
    """The client's expansion of one compact answer into the full one (layouts cached), ms."""
    answer = await client.request("contextAssembly/evaluateRules", {**request, "trace_format": "compact"})
    await client.expand_trace(answer)
    rounds = 5
    t0 = time.perf_counter()
    for _ in range(rounds):
        client.trace_layouts.expand(answer)
    return (time.perf_counter() - t0) / rounds * 1000


async def measure(workspace: Path, requests: list[dict[str, Any]], runs: int, in_flight: int) -> dict[str, Any]:
    out: dict[str, Any] = {mode: [] for mode in ROWS}
    with open(os.devnull, "w") as log:
        started = time.perf_counter()
        async with ContextAssemblyClient(workspace, stderr=log) as client:
            out["initialize_s"] = time.perf_counter() - started
            first = await client.evaluate_rules(requests[0])
            out["first_s"] = time.perf_counter() - started
            out["first_after_initialize_s"] = out["first_s"] - out["initialize_s"]
            out["enabled_engines"] = len(first["engine_results"])
            out["rules_per_request"] = sum(len(e["rules"]) for e in first["engine_results"])
            out["after_edit_s"] = await after_edit_s(client, workspace, requests[0])
            await client.evaluate_rules(requests[0])
    for mode in ROWS:
        await measure_mode(workspace, requests, runs, in_flight, mode, out)
    return out


async def measure_mode(workspace: Path, requests: list[dict[str, Any]], runs: int, in_flight: int, mode: str,
                       out: dict[str, Any]) -> None:
    """One mode's rows, each on a server and client of its own, asked in that mode only: an agent
    asking for `"none"` never carries the heap of the full-trace answers another mode's client
    decoded before it, nor a server that built the trace programs for them."""
    with open(os.devnull, "w") as log:
        async with ContextAssemblyClient(workspace, stderr=log) as client:
            pid = client.pid or 0
            batch = [{**request, **PARAMS.get(mode, {})} for request in requests]
            expand = mode in EXPANDED
            # the first answer in the mode's own options: a `"none"` agent never builds the trace programs
            await client.evaluate_rules(batch[0], compact_trace=expand)
            out[f"{mode}:codec"] = codec_ms_per_mb(await client.evaluate_rules(
                {**batch[0], "trace_format": "compact"} if expand else batch[0]))
            await timed(client, batch, 1, expand)  # warm-up
            if expand:
                out[f"{mode}:codec"]["expand_ms"] = await expand_ms(client, batch[0])
            server, mine = cpu_s(pid), time.process_time()
            for _ in range(runs):
                out[mode].append(await timed(client, batch, 1, expand))
            calls = runs * len(batch)
            out[f"{mode}:cpu_ms"] = {"server": (cpu_s(pid) - server) / calls * 1000,
                                     "client": (time.process_time() - mine) / calls * 1000}
            if in_flight > 1:
                out[f"{mode}:pipelined"] = [await timed(client, batch, in_flight, expand) for _ in range(runs)]


def client_poll_option(ap: argparse.ArgumentParser) -> None:
    """`--client-poll-ms`: the client's event loop, as an agent runs it (`context_assembly.client.run`)."""
    ap.add_argument("--client-poll-ms", type=float, default=DEFAULT_MS, metavar="MS",
                    help="the client's event loop polls for each answer for up to MS ms before it blocks, as "
                         f"`context_assembly.client.run` does by default ({DEFAULT_MS:g}); 0: asyncio's default loop")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", type=Path, required=True)
    ap.add_argument("--stats", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=0, help="only the first N requests (default: all)")
    ap.add_argument("--in-flight", type=int, default=8, help="also time N requests in flight (1: sequential only)")
    ap.add_argument("--first-only", action="store_true", help="only spawn → first answer, cold and warm")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent / "out" / "sidecar-ws")
    client_poll_option(ap)
    args = ap.parse_args()
    requests = [as_request(q) for q in json.loads((args.workload / "requests.json").read_text())]
    requests = requests[:args.requests] if args.requests else requests
    workspace = workspace_for(args.workload, args.root)
    cache = args.root / f"rule-cache-{args.workload.name}"  # the bench's own, never the user's
    firsts = run(first_answers(workspace, requests[0], cache), busy_poll_ms=args.client_poll_ms)
    if args.first_only:
        return report_first(firsts)
    os.environ[CACHE_ENV] = str(cache)  # the timed server below starts warm
    result = run(measure(workspace, requests, args.runs, args.in_flight), busy_poll_ms=args.client_poll_ms)
    variants = []
    for mode, label in ROWS.items():
        timings = [(label, result[mode])]
        if f"{mode}:pipelined" in result:
            timings.append((label + PIPELINED.format(n=args.in_flight), result[f"{mode}:pipelined"]))
        for name, runs in timings:
            median = statistics.median(runs)
            n, engines = len(requests), result["enabled_engines"]
            variants.append({
                "impl": name, "requests": n, "enabled_engines": engines, "median_s": median,
                "runs_s": runs, "evals_per_s": n * engines / median, "requests_per_s": n / median,
                "rules_evaluated_per_request": result["rules_per_request"],
                "rule_evals_per_s": n * result["rules_per_request"] / median,
                "cpu_ms_per_request": result[f"{mode}:cpu_ms"], "codec": result[f"{mode}:codec"],
                "loadavg_1m": round(os.getloadavg()[0], 2),
            })
    args.stats.write_text(json.dumps({"variants": variants, "first_answers": firsts, **{k: result[k] for k in (
        "initialize_s", "first_s", "first_after_initialize_s", "after_edit_s")}}, indent=2))
    for v in variants:
        print(f"{v['impl']}: {v['median_s'] / v['requests'] * 1000:.2f} ms per request; CPU ms per request "
              f"server {v['cpu_ms_per_request']['server']:.2f}, client {v['cpu_ms_per_request']['client']:.2f}; "
              f"{v['codec']['bytes']:,} bytes, encode {v['codec']['encode_ms_per_mb']:.2f} / decode "
              f"{v['codec']['decode_ms_per_mb']:.2f} ms per MB"
              + (f"; expansion {v['codec']['expand_ms']:.2f} ms" if "expand_ms" in v["codec"] else ""))
    print(f"spawn → initialize {result['initialize_s']:.2f} s, → first answer {result['first_s']:.2f} s; "
          f"after one rule file edit {result['after_edit_s'] * 1000:.0f} ms")
    report_first(firsts)


def report_first(firsts: dict[str, dict[str, float]]) -> None:
    for key, first in firsts.items():
        edit = f", after one rule file edit {first['after_edit_s']:.2f} s" if "after_edit_s" in first else ""
        if "entries_s" in first:
            edit = (f", second answer {first['second_s']:.2f} s, every engine compiled and its entry written "
                    f"{first['entries_s']:.2f} s after spawn")
        print(f"first answer, explain={key}: spawn → initialize {first['initialize_s']:.2f} s, "
              f"→ first answer {first['first_s']:.2f} s (server CPU {first['initialize_cpu_s']:.2f} s to initialize, "
              f"{first['server_cpu_s']:.2f} s to the answer){edit}; answer {first['answer_bytes']:,} bytes, "
              f"orjson encode {first['encode_s'] * 1000:.0f} ms, decode {first['decode_s'] * 1000:.0f} ms")
    goal = firsts["none:warm"]["first_s"]
    print(f"goal: spawn → first evaluateRules (explain=none, compile cache warm) ≤ 1.0 s: "
          f"{goal:.2f} s {'PASS' if goal <= 1.0 else 'MISS'} (cold {firsts['none:cold']['first_s']:.2f} s; "
          f"load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
