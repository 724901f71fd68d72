"""Run our rule engine over a bench workload; write the peers' output and stats format.

    python bench/rules/ours.py --workload bench/out/data/large --out bench/out/large.ours.json \
        --stats bench/out/large.ours.stats.json [--runs 5] [--warmup 1] [--explain-out F]

Timed, as for the peers: per request, building the lookup, evaluating every enabled engine and
collecting the memories, i.e. `RuleSet.evaluate(request, explain=False)` over all requests
(median of runs after warm-up). Not timed: reading JSON, converting bench requests to
`AssemblyRequest`, and a `gc.collect()` before each run (the previous run's results are dropped
first). Structuring, compiling and pinning the engines (`pin_compiled`, as the workspace loader
does after a reload) is reported as `build_s`.

Besides the main row, the stats carry two variants (in `variants`):
- "ours, explain=True": the same with the full per-condition trace;
- "ours, cold regex memo": `explain=False`, but the engines are recompiled (untimed) before each run, so the
  per-pattern answer memo of the regex operator starts empty, as on a first sight of each request.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from context_assembly.model import AssemblyRequest, EvaluationResult, RuleEngine, structure
from context_assembly.registry.patterns import compile_search
from context_assembly.rules.evaluate import RuleSet

try:
    from context_assembly.rules.engine import compile_engine, pin_compiled
except ImportError:  # an engine without pinning: nothing to do after compiling
    from context_assembly.rules.engine import compile_engine

    def pin_compiled() -> None:
        pass

IMPL = "ours (context_assembly)"


def to_request(q: dict[str, Any]) -> AssemblyRequest:
    """The bench request shape (`scope`, `additional_variables`, `input`) as our request."""
    data: dict[str, Any] = {"scope_variables": q.get("scope") or {},
                            "additional_variables": q.get("additional_variables") or {}}
    if q.get("input") is not None:
        data["input"] = q["input"]
    return structure(data, AssemblyRequest)


def build(raw_engines: list[dict[str, Any]]) -> tuple[RuleSet, float, float]:
    """Structure and compile every engine, then pin them as the workspace loader does:
    (rule set, structure seconds, compile + pin seconds)."""
    t0 = time.perf_counter()
    engines = [structure(e, RuleEngine) for e in raw_engines]
    t1 = time.perf_counter()
    ruleset = RuleSet([compile_engine(e) for e in engines])
    pin_compiled()
    return ruleset, t1 - t0, time.perf_counter() - t1


def timed(ruleset: RuleSet, requests: list[AssemblyRequest], explain: bool) -> tuple[float, list]:
    t0 = time.perf_counter()
    results = [ruleset.evaluate(r, explain=explain) for r in requests]
    return time.perf_counter() - t0, results


def measure(make: Callable[[], RuleSet], requests: list[AssemblyRequest], explain: bool,
            runs: int, warmup: int) -> tuple[list[float], list[EvaluationResult]]:
    """Times of `runs` runs after `warmup`; `make` gives the rule set for each run (untimed)."""
    results: list[EvaluationResult] = []
    times = []
    for i in range(warmup + runs):
        ruleset = make()
        results = []  # a server keeps no earlier results alive: let them go, untimed
        gc.collect()
        seconds, results = timed(ruleset, requests, explain)
        if i >= warmup:
            times.append(seconds)
    return times, results


def summarize(result: EvaluationResult) -> tuple[list[str], list[str]]:
    """(matched `engine/rule` ids, memories in order) of one evaluation."""
    rules = [f"{e.engine_id}/{r.rule_id}" for e in result.engine_results for r in e.rules if r.matched]
    return rules, list(result.matched_memories)


def stats_for(impl: str, times: list[float], n_requests: int, n_engines: int, n_rules: int,
              **extra: Any) -> dict[str, Any]:
    med = statistics.median(times)
    return {"impl": impl, "requests": n_requests, "enabled_engines": n_engines,
            "rules_evaluated_per_request": n_rules, "runs_s": [round(t, 4) for t in times],
            "median_s": round(med, 4), "evaluations": n_requests * n_engines,
            "evals_per_s": round(n_requests * n_engines / med, 1),
            "requests_per_s": round(n_requests / med, 1),
            "rule_evals_per_s": round(n_requests * n_rules / med, 1),
            "loadavg_1m": round(os.getloadavg()[0], 2), **extra}


def write_output(path: Path, meta: dict[str, Any], ids: list[str], results: list[EvaluationResult]) -> None:
    rows = []
    for rid, result in zip(ids, results, strict=True):
        rules, memories = summarize(result)
        rows.append({"request_id": rid, "rules": sorted(rules), "memories": sorted(memories),
                     "memories_ordered": memories})
    path.write_text(json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", type=Path, required=True, help="folder with engines.json, requests.json")
    ap.add_argument("--out", type=Path, help="matched rules and memories per request (explain=False)")
    ap.add_argument("--explain-out", type=Path, help="the same from the explain=True run")
    ap.add_argument("--stats", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--only-main", action="store_true", help="skip the variants (e.g. for profiling)")
    args = ap.parse_args(argv)
    raw_engines = json.loads((args.workload / "engines.json").read_text())
    raw_requests = json.loads((args.workload / "requests.json").read_text())

    ruleset, structure_s, compile_s = build(raw_engines)
    requests = [to_request(q) for q in raw_requests]
    ids = [q["id"] for q in raw_requests]
    enabled, _ = ruleset.select(None)
    counts = (len(requests), len(enabled), sum(len(e.rules) for e in enabled))
    runs = max(1, args.runs)

    times, results = measure(lambda: ruleset, requests, False, runs, args.warmup)
    main_stats = stats_for(IMPL, times, *counts, build_s=round(structure_s + compile_s, 4),
                           structure_s=round(structure_s, 4), compile_s=round(compile_s, 4),
                           warmup_runs=args.warmup, python=sys.version.split()[0])
    n_matched = [len(summarize(r)[0]) for r in results]
    main_stats["mean_rules_matched_per_request"] = round(sum(n_matched) / max(1, len(results)), 1)
    main_stats["mean_memories_per_request"] = round(
        sum(len(r.matched_memories) for r in results) / max(1, len(results)), 1)
    if args.out:
        write_output(args.out, main_stats, ids, results)
    # Kept alive, old results would distort later timings: a big live heap defers gen-2 collections.
    del results

    variants = []
    if not args.only_main:
        times, explained = measure(lambda: ruleset, requests, True, runs, args.warmup)
        variants.append(stats_for("ours, explain=True", times, *counts))
        if args.explain_out:
            write_output(args.explain_out, variants[-1], ids, explained)
        del explained

        def fresh() -> RuleSet:
            compile_search.cache_clear()  # new regex predicates, so empty answer memos
            return build(raw_engines)[0]

        times, _ = measure(fresh, requests, False, runs, args.warmup)
        variants.append(stats_for("ours, cold regex memo", times, *counts))
    main_stats["variants"] = variants
    if args.stats:
        args.stats.write_text(json.dumps(main_stats, indent=2) + "\n")
    print(json.dumps({k: v for k, v in main_stats.items() if k != "variants"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
