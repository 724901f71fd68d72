"""Assembly latency on a realistic generated workspace, in one command.

    python bench/assemble/run.py [--out bench/out/assemble] [--requests 200] [--chunks 100000] [--quick]

1. Generates the workspace (`workspace.py`) under `<out>/ws/<full|quick>[-c<chunks>]/`, or reuses
   it when its manifest records the same parameters.
2. Generates `--requests` varied assembly requests.
3. Measures, in this order: cold assembly in a new process and with a fresh `Runtime` in this
   process; warm assembly with the cache cleared before every request (split by whether the
   resolved memories hold a vector_search step: the targets), with the cache on (a fill pass, then
   a second pass over all requests), and the same request twice in a row (a pure cache hit);
   vector top-10 search, graph views and store generations alone; embedding throughput of the
   default embedder; passes with the notes watched (as with a watching client) and a bench-only what-if (a larger
   result cache) that size fixes without touching server/.
4. Prints one table (also `<out>/summary.md`, raw numbers in `<out>/results.json`), the cache hit
   rate and the no-cache ÷ cache cost ratio, the median time per stage and per memory.
5. When a target is missed (or with `--profile`), profiles the warm no-cache path with cProfile in
   every thread (`<out>/profile-*.txt`).

Exit status 1 when an assembly raises, a pipeline fails, or a request that should have content
returns none; a missed latency target only prints MISS.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGETS = {"without": 10.0, "with": 50.0}  # warm p50 ms, cache off: no vector step / vector search
CONTENT_SECTIONS = ("constraints", "knowledge", "history", "suggestions", "working_memory")
TOP_K = 10
PROBE_LIMIT_S = 5.0  # the default pipeline timeout
MAX_ENTRIES = 512  # ResultCache's default size (checked against the live cache at run time)


# -- the cold child process ------------------------------------------------------------------------


def cold_child(root: str, request_file: str) -> int:
    """Runs in a new interpreter: import, build a Runtime, assemble once; prints the timings."""
    started = time.perf_counter()
    from context_assembly.runtime import Runtime

    imported = time.perf_counter()
    request = json.loads(Path(request_file).read_text())
    runtime = Runtime(root)
    built = time.perf_counter()
    result = runtime.assemble(request)
    done = time.perf_counter()
    runtime.close()
    print(json.dumps({"import_ms": (imported - started) * 1000, "runtime_ms": (built - imported) * 1000,
                      "assemble_ms": (done - built) * 1000, "total_ms": (done - started) * 1000,
                      "duration_ms": result.meta.duration_ms, "items": result.meta.total_items}))
    return 0


# -- helpers ---------------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def stats(samples: list[float]) -> dict[str, Any]:
    return {"n": len(samples), "p50": percentile(samples, 0.5), "p95": percentile(samples, 0.95),
            "p99": percentile(samples, 0.99), "mean": sum(samples) / len(samples) if samples else float("nan")}


def machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, {platform.machine()}, "
            f"Python {platform.python_version()}, load average {load}")


class Check:
    """Problems that make the run fail (exit 1), collected as they happen."""

    def __init__(self, vector_ids: set[str]) -> None:
        self.vector_ids = vector_ids
        self.errors: list[str] = []
        self.timeouts = 0
        self.statuses: dict[str, int] = defaultdict(int)

    def result(self, label: str, index: int, result: Any) -> bool:
        """Checks one assembly; returns whether its resolved memories hold a vector_search step."""
        content = sum(len(result.context.get(section, [])) for section in CONTENT_SECTIONS)
        meta = result.meta
        # Under a tight budget the ladder may rightly spend it all on `state` (it comes first);
        # an empty context is only a defect when nothing had to be cut to fit.
        if content == 0 and not (meta.truncated and result.trace.ladder):
            self.errors.append(f"{label} request {index}: no content item (total_items {meta.total_items})")
        if meta.max_tokens is not None and meta.token_estimate > meta.max_tokens:
            self.errors.append(f"{label} request {index}: {meta.token_estimate} tokens over the budget "
                               f"of {meta.max_tokens}")
        vector = False
        for call in result.trace.memory_calls:
            self.statuses[call.status] += 1
            if call.status == "failed":
                self.errors.append(f"{label} request {index}: {call.reference} failed: {call.error}")
            elif call.status == "timeout":
                self.timeouts += 1
            vector = vector or call.reference in self.vector_ids
        return vector


def assemble_timed(runtime: Any, request: dict[str, Any], check: Check, label: str,
                   index: int) -> tuple[float, Any]:
    t = time.perf_counter()
    try:
        result = runtime.assemble(request)
    except Exception as exc:
        check.errors.append(f"{label} request {index}: raised {type(exc).__name__}: {exc}")
        return (time.perf_counter() - t) * 1000, None
    return (time.perf_counter() - t) * 1000, result


# -- scenarios -------------------------------------------------------------------------------------


def probe_keyword(runtime: Any, requests: list[dict[str, Any]], collection: str, limit_s: float,
                  probes: int = 3) -> list[float]:
    """Time a few keyword-only searches (the BM25 leg of hybrid), interrupting one past `limit_s`.

    Returns the times in ms (an interrupted search counts as `limit_s`); stops at the first that
    runs over, so a pathological keyword search costs this run at most `limit_s` once.
    """
    from context_assembly.pipelines.steps.input import keywords

    times: list[float] = []
    for request in requests[:probes]:
        query = " ".join(keywords(request["input"]["text"]))
        holder: dict[str, Any] = {}

        def work(query: str = query, holder: dict[str, Any] = holder) -> None:
            holder["conn"] = runtime.memory.kv.db.connection()  # the embedded database: interrupted below
            try:
                runtime.vectors.search(collection, query, top_k=TOP_K, mode="keyword")
            except Exception as exc:  # interrupted (StorageError), or a real failure
                holder["error"] = exc

        t = time.perf_counter()
        thread = threading.Thread(target=work, name="keyword-probe", daemon=True)
        thread.start()
        thread.join(limit_s)
        if thread.is_alive():
            holder["conn"].interrupt()
            thread.join()
            times.append(limit_s * 1000)
            break
        times.append((time.perf_counter() - t) * 1000)
        if "error" in holder:
            raise holder["error"]
    return times


def cold_process(root: Path, requests: list[dict[str, Any]], count: int, out: Path,
                 check: Check) -> list[dict[str, Any]]:
    runs = []
    for index, request in enumerate(requests[:count]):
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=out, delete=False) as f:
            json.dump(request, f)
        try:
            proc = subprocess.run([sys.executable, __file__, "--cold-child", str(root), f.name],
                                  capture_output=True, text=True, timeout=300)
        finally:
            os.unlink(f.name)
        if proc.returncode != 0:
            check.errors.append(f"cold process request {index}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
            continue
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return runs


def cold_runtime(root: Path, requests: list[dict[str, Any]], count: int, check: Check) -> list[dict[str, float]]:
    from context_assembly.runtime import Runtime

    runs = []
    for index, request in enumerate(requests[:count]):
        t = time.perf_counter()
        runtime = Runtime(root)
        ms, result = assemble_timed(runtime, request, check, "cold", index)
        total = (time.perf_counter() - t) * 1000
        runtime.close()
        if result is not None:
            check.result("cold", index, result)
            runs.append({"total_ms": total, "assemble_ms": ms, "duration_ms": result.meta.duration_ms})
    return runs


def run_pass(runtime: Any, requests: list[dict[str, Any]], check: Check, label: str,
             before: Callable[[], None] | None = None, repeat: bool = False) -> tuple[list[dict[str, Any]], dict]:
    """One timed pass over the requests: (per request rows, cache counter deltas).

    `before` runs before each request, untimed; `repeat` assembles each request once untimed and
    times the immediate second assembly.
    """
    cache = runtime.cache
    rows = []
    hits0, misses0 = cache.hits, cache.misses
    for index, request in enumerate(requests):
        if before is not None:
            before()
        if repeat:
            runtime.assemble(request)
        ms, result = assemble_timed(runtime, request, check, label, index)
        if result is None:
            continue
        vector = check.result(label, index, result)
        calls = result.trace.memory_calls
        rows.append({"index": index, "ms": ms, "duration_ms": result.meta.duration_ms, "vector": vector,
                     "items": result.meta.total_items, "stages": dict(result.trace.stages),
                     "cached": sum(c.status == "cached" for c in calls),
                     "ladder": [step.strategy for step in result.trace.ladder],
                     "ran": sum(c.status in ("ok", "cached") for c in calls if c.kind == "definition"),
                     "memories": {c.reference: c.duration_ms for c in calls if c.status == "ok"},
                     "steps": [(s["type"], s.get("duration_ms", 0.0)) for c in calls if c.status == "ok"
                               for s in c.steps]})
    return rows, {"hits": cache.hits - hits0, "misses": cache.misses - misses0}


def warm_passes(runtime: Any, requests: list[dict[str, Any]], check: Check) -> dict[str, Any]:
    """Every warm scenario on one Runtime; per request: ms, meta.duration_ms, vector flag."""
    cache = runtime.cache
    out: dict[str, Any] = {}
    # warm-up: load the workspace, compile the rules, open the graph, load the vector matrix and
    # the embedder, warm SQLite's page cache; then forget the cached results
    for request in requests[:20]:
        runtime.assemble(request)
    cache.clear()
    # `runtime.cache.ttl_s = 0` does not hold: Runtime.workspace() resets it from the settings on
    # every assembly, so "no cache" clears the cache before each request (outside the timing).
    out["nocache"], out["nocache_counters"] = run_pass(runtime, requests, check, "nocache", cache.clear)
    cache.clear()
    out["fill"], out["fill_counters"] = run_pass(runtime, requests, check, "fill")
    out["second"], out["second_counters"] = run_pass(runtime, requests, check, "second")
    out["repeat"], out["repeat_counters"] = run_pass(runtime, requests, check, "repeat", repeat=True)
    return out


LADDER_BUDGET = 600  # tokens: far below what most requests assemble, so the ladder has work to do


def ladder_passes(runtime: Any, requests: list[dict[str, Any]], check: Check) -> dict[str, Any]:
    """The same requests under a tight budget (cache on, after the warm passes): a first pass that
    computes the extractive summaries, and a second in which they come from the summary cache."""
    tight = [{**r, "constraints": {"max_tokens": LADDER_BUDGET}} for r in requests]
    out: dict[str, Any] = {}
    out["first"], _ = run_pass(runtime, tight, check, "ladder-1")
    out["second"], _ = run_pass(runtime, tight, check, "ladder-2")
    return out


def what_if(runtime: Any, requests: list[dict[str, Any]], check: Check) -> dict[str, Any]:
    """The same passes with the markdown store watched (`notes.watch()`, as the sidecar does when its
    client watches `.codebolt/`): note generations from folder mtimes and watch events instead of a
    stat per note. Then, bench-only, also a result cache large enough for one pass over all
    requests (`cache.max_entries` raised from 512).
    """
    cache = runtime.cache
    notes = runtime.memory.notes
    limit = cache.max_entries
    notes.watch()
    out: dict[str, Any] = {}
    try:
        cache.clear()
        out["nocache"], _ = run_pass(runtime, requests, check, "watched nocache", cache.clear)
        out["repeat"], _ = run_pass(runtime, requests, check, "watched repeat", repeat=True)
        out["generation_ms"] = generation_alone(runtime)["markdown"]
        cache.max_entries = 16 * MAX_ENTRIES
        cache.clear()
        run_pass(runtime, requests, check, "what-if fill")
        out["second"], out["second_counters"] = run_pass(runtime, requests, check, "what-if second")
    finally:
        notes.watch(False)
        cache.max_entries = limit
        cache.clear()
    return out


def generation_alone(runtime: Any, runs: int = 30) -> dict[str, list[float]]:
    """`memory.generation(scheme)` alone: what each pipeline's cache key pays per store it reads
    (markdown: no longer part of any key, kept to show what a folder scan costs)."""
    out: dict[str, list[float]] = {}
    for scheme in ("markdown", "kv", "vector", "graph"):
        runtime.memory.generation(scheme)
        samples = []
        for _ in range(runs):
            t = time.perf_counter()
            runtime.memory.generation(scheme)
            samples.append((time.perf_counter() - t) * 1000)
        out[scheme] = samples
    return out


def vector_alone(runtime: Any, requests: list[dict[str, Any]], collection: str,
                 hybrid: bool) -> dict[str, list[float]]:
    from context_assembly.pipelines.steps.input import keywords

    queries = [" ".join(keywords(r["input"]["text"])) for r in requests]
    out: dict[str, list[float]] = {}
    for mode in ("vector", "hybrid") if hybrid else ("vector",):
        for q in queries[:3]:
            runtime.vectors.search(collection, q, top_k=TOP_K, mode=mode)
        samples = []
        for q in queries:
            t = time.perf_counter()
            runtime.vectors.search(collection, q, top_k=TOP_K, min_score=0.0, mode=mode)
            samples.append((time.perf_counter() - t) * 1000)
        out[mode] = samples
    return out


def graph_alone(runtime: Any, requests: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each named view and a 2-hop neighbour expansion, called directly on the graph store."""
    modules = [r["additional_variables"]["module"] for r in requests if "module" in r["additional_variables"]]
    calls: dict[str, Callable[[str], Any]] = {
        "view owners (match by name)": lambda m: runtime.graph.run_view("owners", {"name": m}),
        "view dependents (match by name)": lambda m: runtime.graph.run_view("dependents", {"name": m, "limit": 15}),
        "view module-node (primary key)": lambda m: runtime.graph.run_view("module-node",
                                                                           {"key": f"default/module:{m}"}),
        "neighbors depth 2, limit 25": lambda m: runtime.graph.neighbors("default", [f"module:{m}"], depth=2,
                                                                         limit=25),
    }
    out: dict[str, list[float]] = {}
    for name, call in calls.items():
        for m in modules[:3]:
            call(m)
        samples = []
        for m in modules:
            t = time.perf_counter()
            call(m)
            samples.append((time.perf_counter() - t) * 1000)
        out[name] = samples
    return out


def embed_rate(count: int, seed: int) -> tuple[str, float]:
    import random

    import workspace
    from context_assembly.stores.embedding import default_embedder_name, get_embedder

    words = workspace.Words(random.Random(seed + 7))
    texts = [words.paragraph(words.rng.choice(workspace.MODULES), words.rng.randint(3, 6)) for _ in range(count)]
    name = default_embedder_name()
    embedder = get_embedder(name)
    embedder.embed(texts[:16])
    t = time.perf_counter()
    embedder.embed(texts)
    return name, count / (time.perf_counter() - t)


# -- profiling -------------------------------------------------------------------------------------


def profile_warm(runtime: Any, requests: list[dict[str, Any]], label: str, out: Path) -> str:
    """cProfile the warm no-cache path in the calling thread and in the pipeline worker threads.

    cProfile only sees the thread that enables it, so each pipeline call on a worker thread runs
    under that thread's own profiler (an instance attribute wraps the executor's two entry points;
    nothing under server/ changes); all profiles are merged at the end.
    """
    executor = runtime.executor
    local = threading.local()
    profilers: list[cProfile.Profile] = []
    lock = threading.Lock()

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            prof = getattr(local, "prof", None)
            if prof is None:
                prof = local.prof = cProfile.Profile()
                with lock:
                    profilers.append(prof)
            prof.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                prof.disable()
        return wrapped

    originals = executor._run_definition, executor._run_uri
    executor._run_definition, executor._run_uri = wrap(originals[0]), wrap(originals[1])
    main = cProfile.Profile()
    wall = 0.0
    try:
        for request in requests:
            runtime.cache.clear()
            t = time.perf_counter()
            main.enable()
            runtime.assemble(request)
            main.disable()
            wall += time.perf_counter() - t
    finally:
        executor._run_definition, executor._run_uri = originals
    combined = pstats.Stats(main)
    for prof in profilers:
        combined.add(prof)
    combined.dump_stats(str(out / f"profile-{label}.prof"))
    buffer = io.StringIO()
    combined.stream = buffer  # type: ignore[attr-defined]
    buffer.write(f"{len(requests)} requests ({label}), wall {wall * 1000:.0f} ms, "
                 f"{wall * 1000 / max(1, len(requests)):.1f} ms per request (with profiling overhead)\n"
                 "main thread + pipeline worker threads merged: worker time overlaps the main thread's wait\n\n")
    combined.sort_stats("tottime").print_stats(30)
    combined.sort_stats("cumulative").print_stats(45)
    text = buffer.getvalue()
    (out / f"profile-{label}.txt").write_text(text)
    return text


# -- report ----------------------------------------------------------------------------------------


def fmt_row(name: str, samples: list[float], target: float | None = None, extra: str = "") -> tuple[str, ...]:
    s = stats(samples)
    verdict = ""
    if target is not None and samples:
        verdict = f"{'PASS' if s['p50'] <= target else 'MISS'} (p50 ≤ {target:g})"
    return (name, str(s["n"]), f"{s['p50']:.1f}", f"{s['p95']:.1f}", f"{s['p99']:.1f}", extra, verdict)


def markdown_table(rows: list[tuple[str, ...]]) -> list[str]:
    head = ("scenario", "n", "p50 ms", "p95 ms", "p99 ms", "meta.duration_ms p50", "target")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def per_key_medians(rows: list[dict[str, Any]], field: str) -> dict[str, tuple[int, float]]:
    samples: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        items = row[field].items() if isinstance(row[field], dict) else row[field]
        for key, value in items:
            samples[key].append(value)
    return {key: (len(v), percentile(v, 0.5)) for key, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--cold-child":
        return cold_child(sys.argv[2], sys.argv[3])
    sys.path.insert(0, str(HERE))
    import workspace

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble", help="output folder")
    ap.add_argument("--requests", type=int, help="assembly requests (default 200, 40 with --quick)")
    ap.add_argument("--chunks", type=int, help="vector chunks (default 100000, 10000 with --quick)")
    ap.add_argument("--quick", action="store_true", help="everything ~10x smaller: a smoke run")
    ap.add_argument("--cold", type=int, default=5, help="cold assemblies with a fresh Runtime (default 5)")
    ap.add_argument("--cold-processes", type=int, default=3, help="cold assemblies in a new process (default 3)")
    ap.add_argument("--seed", type=int, default=workspace.SEED)
    ap.add_argument("--profile", action="store_true", help="profile the warm path even when every target passes")
    ap.add_argument("--hybrid", choices=("auto", "on", "off"), default="auto",
                    help="hybrid vector_search steps: as defined (on), in vector mode (off), or on unless a "
                    f"keyword search takes over {PROBE_LIMIT_S:g} s (auto, the default)")
    args = ap.parse_args(argv)

    sizes = workspace.Sizes.quick() if args.quick else workspace.Sizes.full()
    default_chunks = sizes.chunks
    if args.chunks is not None:
        sizes = replace(sizes, chunks=args.chunks)
    n_requests = args.requests if args.requests is not None else (40 if args.quick else 200)
    label = ("quick" if args.quick else "full") + (f"-c{sizes.chunks}" if sizes.chunks != default_chunks else "")
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    root = out / "ws" / label
    print(f"start: {machine()}", flush=True)

    def log(message: str) -> None:
        print(message, flush=True)

    manifest = workspace.ensure(root, sizes, args.seed, log)
    figures = manifest["figures"]
    workspace.write_definitions(root, hybrid=True)
    requests = workspace.requests(n_requests, sizes, args.seed)
    check = Check(workspace.vector_memories())
    results: dict[str, Any] = {"machine_start": machine(), "sizes": asdict(sizes), "requests": n_requests,
                               "manifest": manifest}

    from context_assembly.runtime import Runtime

    # A keyword search that runs for seconds would time out every hybrid pipeline and keep the
    # worker threads busy long after: probe it first, and with --hybrid auto fall back to vector mode.
    probe_runtime = Runtime(root)
    try:
        probe_runtime.vectors.search(workspace.COLLECTION, "warm up", top_k=1)  # load the matrix and embedder
        probe = probe_keyword(probe_runtime, requests, workspace.COLLECTION, PROBE_LIMIT_S)
    finally:
        probe_runtime.close()
    slow = max(probe) >= PROBE_LIMIT_S * 1000
    hybrid = args.hybrid == "on" or (args.hybrid == "auto" and not slow)
    results["keyword_probe_ms"], results["hybrid"] = probe, hybrid
    log(f"keyword (BM25) search probe: {', '.join(f'{t:.0f}' for t in probe)} ms"
        + ("" if not slow else f" (interrupted at {PROBE_LIMIT_S:g} s)"))
    if not hybrid:
        log("hybrid vector searches run in plain vector mode in this run (--hybrid auto/off)")
        workspace.write_definitions(root, hybrid=False)

    log(f"cold: {args.cold_processes} new processes, {args.cold} fresh Runtimes ...")
    results["cold_process"] = cold_process(root, requests, args.cold_processes, out, check)
    results["cold_runtime"] = cold_runtime(root, requests, args.cold, check)

    runtime = Runtime(root)
    if runtime.cache.max_entries != MAX_ENTRIES:
        log(f"note: the result cache holds {runtime.cache.max_entries} entries (this script assumed {MAX_ENTRIES})")
    try:
        log(f"warm: {n_requests} requests x 4 passes ...")
        warm = warm_passes(runtime, requests, check)
        results["warm"] = warm
        log(f"ladder: {n_requests} requests x 2 passes at max_tokens {LADDER_BUDGET} ...")
        results["ladder"] = ladder = ladder_passes(runtime, requests, check)
        log("vector search and graph alone, embedding throughput ...")
        results["vector_search"] = vector_alone(runtime, requests, workspace.COLLECTION, hybrid)
        results["graph"] = graph_alone(runtime, requests)
        results["generation"] = generation_alone(runtime)
        embedder, rate = embed_rate(1000, args.seed)
        results["embed"] = {"embedder": embedder, "chunks_per_s": rate}

        nocache = warm["nocache"]
        without = [r["ms"] for r in nocache if not r["vector"]]
        with_vec = [r["ms"] for r in nocache if r["vector"]]
        missed = []
        if without and percentile(without, 0.5) > TARGETS["without"]:
            missed.append(("without-vector", [requests[r["index"]] for r in nocache if not r["vector"]]))
        if with_vec and percentile(with_vec, 0.5) > TARGETS["with"]:
            missed.append(("with-vector", [requests[r["index"]] for r in nocache if r["vector"]]))
        if args.profile and not missed:
            missed = [("all", requests)]
        profiles = {}
        for name, subset in missed:
            log(f"profiling the warm no-cache path ({name}, {len(subset)} requests) ...")
            profiles[name] = profile_warm(runtime, subset, name, out)
        log("notes watched, then the what-if of a larger cache ...")
        results["what_if"] = what_if(runtime, requests, check)
    finally:
        runtime.close()

    # -- the table
    def meta(rows: list[dict[str, Any]]) -> str:
        return f"{percentile([r['duration_ms'] for r in rows], 0.5):.1f}" if rows else ""

    cp, cr = results["cold_process"], results["cold_runtime"]
    rows: list[tuple[str, ...]] = []
    if cp:
        rows.append(fmt_row("cold, new process: import + Runtime + first assemble", [r["total_ms"] for r in cp],
                            extra=meta(cp)))
        rows.append(fmt_row("cold, new process: first assemble only", [r["assemble_ms"] for r in cp]))
    if cr:
        rows.append(fmt_row("cold, fresh Runtime in a warm process (embedder loaded)", [r["total_ms"] for r in cr],
                            extra=meta(cr)))
    nocache, fill, second, repeat = warm["nocache"], warm["fill"], warm["second"], warm["repeat"]
    no_vec = [r for r in nocache if not r["vector"]]
    vec = [r for r in nocache if r["vector"]]
    rows += [
        fmt_row("warm, cache off, all requests", [r["ms"] for r in nocache], extra=meta(nocache)),
        fmt_row("warm, cache off, without vector steps", [r["ms"] for r in no_vec], TARGETS["without"], meta(no_vec)),
        fmt_row("warm, cache off, with vector search", [r["ms"] for r in vec], TARGETS["with"], meta(vec)),
        fmt_row("warm, cache on, pass 1 (fill)", [r["ms"] for r in fill], extra=meta(fill)),
        fmt_row("warm, cache on, pass 2 over all requests", [r["ms"] for r in second], extra=meta(second)),
        fmt_row("warm, cache on, pass 2, without vector steps", [r["ms"] for r in second if not r["vector"]],
                extra=meta([r for r in second if not r["vector"]])),
        fmt_row("warm, cache on, pass 2, with vector search", [r["ms"] for r in second if r["vector"]],
                extra=meta([r for r in second if r["vector"]])),
        fmt_row("warm, same request twice in a row (2nd = hit)", [r["ms"] for r in repeat], extra=meta(repeat)),
        fmt_row(f"warm, cache on, ladder active (max_tokens {LADDER_BUDGET}), summaries computed",
                [r["ms"] for r in ladder["first"]], extra=meta(ladder["first"])),
        fmt_row(f"warm, cache on, ladder active (max_tokens {LADDER_BUDGET}), summaries cached",
                [r["ms"] for r in ladder["second"]], extra=meta(ladder["second"])),
        fmt_row(f"vector_search top-{TOP_K} alone, mode vector", results["vector_search"]["vector"]),
        *([fmt_row(f"vector_search top-{TOP_K} alone, mode hybrid", results["vector_search"]["hybrid"])]
          if "hybrid" in results["vector_search"] else []),
        fmt_row("keyword (BM25) search alone, probe" + (f" (interrupted at {PROBE_LIMIT_S:g} s)" if slow else ""),
                probe),
        *(fmt_row(f"graph alone: {name}", samples) for name, samples in results["graph"].items()),
        *(fmt_row(f"cache key part alone: memory.generation('{scheme}')" if scheme != "markdown" else
                  f"memory.generation('markdown') alone ({figures['notes']:,} notes scanned; not in cache keys: "
                  "results are checked against the stamps of the notes they read)", samples)
          for scheme, samples in results["generation"].items()),
    ]
    wi = results["what_if"]
    rows += [
        fmt_row("notes watched (a watching client): cache off, without vector steps",
                [r["ms"] for r in wi["nocache"] if not r["vector"]], TARGETS["without"],
                meta([r for r in wi["nocache"] if not r["vector"]])),
        fmt_row("notes watched (a watching client): cache off, with vector search",
                [r["ms"] for r in wi["nocache"] if r["vector"]], TARGETS["with"],
                meta([r for r in wi["nocache"] if r["vector"]])),
        fmt_row("notes watched (a watching client): same request twice (2nd = hit)",
                [r["ms"] for r in wi["repeat"]], extra=meta(wi["repeat"])),
        fmt_row("notes watched: memory.generation('markdown') alone", wi["generation_ms"]),
        fmt_row(f"what-if, + cache max_entries {16 * MAX_ENTRIES}: pass 2 over all requests",
                [r["ms"] for r in wi["second"]], extra=meta(wi["second"])),
    ]

    def hit_rate(rows_: list[dict[str, Any]]) -> float:
        ran = sum(r["ran"] for r in rows_)
        return sum(r["cached"] for r in rows_) / ran if ran else float("nan")

    p50 = {name: percentile([r["ms"] for r in rows_], 0.5) for name, rows_ in
           (("nocache", nocache), ("second", second), ("repeat", repeat))}
    stage_medians = per_key_medians(nocache, "stages")
    memory_medians = per_key_medians(nocache, "memories")
    step_medians = per_key_medians(nocache, "steps")
    lines = [
        f"Assembly benchmark, {label}: {machine()}",
        f"workspace: {len(workspace.definitions())} memory definitions, "
        f"{sum(len(e['rules']) for e in workspace.rule_engines().values())} rules in "
        f"{len(workspace.rule_engines())} engines, {figures['kv']:,} KV entries, {figures['notes']:,} notes, "
        f"{figures['chunks']:,} chunks ({figures['embedder']}), "
        f"{figures['nodes']:,} nodes + {figures['edges']:,} edges, "
        f"{figures['events']:,} events, {figures['turns']:,} turns; {n_requests} requests "
        f"({len(vec)} with vector search, {len(no_vec)} without)",
        f"workspace {'reused, generated ' + manifest['generated_at'] if manifest['reused'] else 'generated now'}: "
        f"vector load {figures['vector_load_s']} s = {figures['vector_load_chunks_per_s']:,} chunks/s (upsert_many, "
        f"embedding included), graph load {figures['graph_load_s']} s, whole build {figures['build_s']} s",
        "",
        *markdown_table(rows),
        "",
        *([] if hybrid else [
            "DEGRADED: hybrid vector_search steps ran in vector mode ("
            + (f"a keyword search took over {PROBE_LIMIT_S:g} s, --hybrid auto" if slow else "--hybrid off")
            + "): 'with vector search' is vector-only"]),
        f"embedding throughput ({results['embed']['embedder']}, 1,000 fresh chunks, embed only): "
        f"{results['embed']['chunks_per_s']:,.0f} chunks/s",
        f"cache hit rate: pass 2 over all requests {hit_rate(second):.0%} of pipelines "
        f"(cache counters {warm['second_counters']}; max_entries {MAX_ENTRIES}), with {16 * MAX_ENTRIES} entries "
        f"(what-if) {hit_rate(wi['second']):.0%}, same request again {hit_rate(repeat):.0%}",
        f"cost ratio no-cache ÷ cache (p50): {p50['nocache'] / p50['repeat']:.1f}× against an immediate repeat, "
        f"{p50['nocache'] / p50['second']:.1f}× against pass 2",
        f"pipeline statuses over every assembly: {dict(sorted(check.statuses.items()))}",
        f"ladder at max_tokens {LADDER_BUDGET}: {sum(bool(r['ladder']) for r in ladder['second'])} of "
        f"{len(ladder['second'])} requests needed it; steps by strategy "
        f"{dict(sorted(Counter(s for r in ladder['second'] for s in r['ladder']).items()))}; p50 ÷ cache-on pass 2 "
        f"at the requests' own budgets: {percentile([r['ms'] for r in ladder['second']], 0.5) / p50['second']:.2f}×",
        "",
        "median per stage, cache off (ms): " + ", ".join(f"{k} {v[1]:.2f}" for k, v in stage_medians.items()),
        "median per memory when it runs, cache off (ms, runs): " + ", ".join(
            f"{k} {v[1]:.1f} ({v[0]})" for k, v in sorted(memory_medians.items(), key=lambda kv: -kv[1][1])),
        "median per step type, cache off (ms, runs): " + ", ".join(
            f"{k} {v[1]:.2f} ({v[0]})" for k, v in sorted(step_medians.items(), key=lambda kv: -kv[1][1])),
    ]
    if cp:
        lines.append("cold process parts (median ms): " + ", ".join(
            f"{k} {percentile([r[k] for r in cp], 0.5):.0f}" for k in ("import_ms", "runtime_ms", "assemble_ms")))
    if profiles:
        lines.append("profiles: " + ", ".join(f"profile-{name}.txt" for name in profiles) + f" in {out.name}/")
    lines.append(f"end: {machine()}")
    if check.errors:
        lines.append(f"ERRORS ({len(check.errors)}):")
        lines += [f"  {e}" for e in check.errors[:20]]
    print("\n" + "\n".join(lines))
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    results["summary"] = lines
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 1 if check.errors else 0


if __name__ == "__main__":
    sys.exit(main())
