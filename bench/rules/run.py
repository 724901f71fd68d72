"""Compare our rule engine with the peers (json-rules-engine, the Python reference), in one run.

    python bench/rules/run.py [small medium large] [--runs N] [--out DIR]

Per size: generate the workload, run the reference, json-rules-engine and ours (all in the
product's semantics, `--spec`), cross-check the outputs, then print one table. Exits 1 when a
cross-check finds a difference (after the table); missing a throughput target only prints MISS.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import peers

HERE = Path(__file__).resolve().parent
SIZES = ("small", "medium", "large")
JRE, REF, OURS = "json-rules-engine", "reference", "ours"
TARGETS = {JRE: 30.0, REF: 3.0}  # on large: minimum throughput ratio ours / peer
# evaluateRules through the sidecar over stdio, on medium and large: minimum ratio to json-rules-engine
SIDECAR_TARGETS = {"ours via sidecar, full trace": 10.0, 'ours via sidecar, explain="none"': 30.0,
                   "ours via sidecar, full trace compact": 10.0, 'ours via sidecar, explain="none" compact': 30.0,
                   'ours via sidecar, explain="none" compact, expanded by the client': 30.0}


def run_ours(workload: Path, out: Path, runs: int) -> dict[str, Any]:
    stats = out.with_name(out.name.replace(".json", ".stats.json"))
    explain_out = out.with_name(out.name.replace(".ours.", ".ours-explain."))
    cmd = [sys.executable, str(HERE / "ours.py"), "--workload", str(workload), "--out", str(out),
           "--explain-out", str(explain_out), "--stats", str(stats), "--runs", str(runs), "--warmup", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ours.py failed:\n{proc.stdout}\n{proc.stderr}")
    return peers.read_json(stats)  # type: ignore[no-any-return]


def run_sidecar(workload: Path, stats: Path, runs: int) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "sidecar.py"), "--workload", str(workload), "--stats", str(stats),
           "--runs", str(runs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sidecar.py failed:\n{proc.stdout}\n{proc.stderr}")
    return peers.read_json(stats)  # type: ignore[no-any-return]


def bench_size(size: str, out: Path, runs: int, modules: Path) -> tuple[dict[str, dict], list[str]]:
    """Run everything on one size: ({row name: stats}, cross-check failures)."""
    workload = peers.gen_workload(size, out / "data")
    files = {name: out / f"{size}.{tag}.json" for name, tag in
             ((OURS, "ours"), ("ours-explain", "ours-explain"), (REF, "ref"), (JRE, "jre"))}
    print(f"[{size}] ours ...", flush=True)
    ours = run_ours(workload, files[OURS], runs)
    print(f"[{size}] ours via the sidecar ...", flush=True)
    sidecar = run_sidecar(workload, out / f"{size}.sidecar.stats.json", runs)
    STARTS[size] = sidecar
    print(f"[{size}] reference ...", flush=True)
    ref = peers.run_reference(workload, files[REF], out / f"{size}.ref.stats.json", runs)
    print(f"[{size}] json-rules-engine ...", flush=True)
    jre = peers.run_json_rules_engine(workload, files[JRE], out / f"{size}.jre.stats.json", runs, modules)
    rows = {JRE: jre, REF: ref, OURS: ours, **{v["impl"]: v for v in ours.get("variants", [])},
            **{v["impl"]: v for v in sidecar["variants"]}}
    failures = []
    for expected, actual in ((REF, OURS), (JRE, OURS), (REF, JRE), (REF, "ours-explain")):
        ok, report = peers.check_outputs(files[expected], files[actual])
        print(f"[{size}] check {expected} vs {actual}: {'MATCH' if ok else 'MISMATCH'}", flush=True)
        if not ok:
            failures.append(f"{size}: {expected} vs {actual}\n{report}")
    return rows, failures


def fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def table(results: dict[str, dict[str, dict]]) -> list[str]:
    head = ("| size | implementation | requests × engines | rules / request | median s (runs) | build s "
            "| evaluations/s | requests/s | rule evals/s | ours ÷ jre | ours ÷ ref | load 1m |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for size, rows in results.items():
        jre, ref = rows[JRE]["evals_per_s"], rows[REF]["evals_per_s"]
        for name, s in rows.items():
            ours = name not in (JRE, REF)
            label = s["impl"].replace("@", " ")
            runs = ", ".join(f"{t:.2f}" if t >= 0.1 else f"{t:.3f}" for t in s["runs_s"])
            build = f"{s['build_s']:.3f}" if "build_s" in s else ""
            ratios = [f"{s['evals_per_s'] / jre:.1f}×", f"{s['evals_per_s'] / ref:.2f}×"] if ours else ["", ""]
            lines.append(
                f"| {size} | {label} | {s['requests']} × {s['enabled_engines']} "
                f"| {fmt(s['rules_evaluated_per_request'])} | {s['median_s']:.3f} ({runs}) | {build} "
                f"| {fmt(s['evals_per_s'])} | {fmt(s['requests_per_s'], 1)} | {fmt(s['rule_evals_per_s'])} "
                f"| {ratios[0]} | {ratios[1]} | {s.get('loadavg_1m', '')} |")
    return lines


STARTS: dict[str, dict[str, Any]] = {}  # size -> the sidecar's stats (first answer, answer after an edit)


def first_answer_verdicts(size: str, firsts: dict[str, dict[str, float]]) -> list[str]:
    """Spawn → first answer per `explain` mode, with the compile cache cold and warm (sidecar.py
    `first_answers`); the target (≤ 1.0 s) applies to `large`, compile included: the cold ones."""
    modes = [key.split(":")[0] for key in firsts if key.endswith(":cold")]
    if not modes:
        return []
    parts = ", ".join(f"{mode} {firsts[mode + ':cold']['first_s']:.2f} / {firsts[mode + ':warm']['first_s']:.2f} s"
                      for mode in modes)
    line = f"{size}: spawn → first answer, compile cache cold / warm: {parts}"
    if size == "large":
        worst = max(firsts[mode + ":cold"]["first_s"] for mode in modes)
        line += f" (target ≤ 1.0 s cold: slowest {worst:.2f} s {'PASS' if worst <= 1.0 else 'MISS'})"
    return [line]


def verdicts(results: dict[str, dict[str, dict]]) -> list[str]:
    out = []
    for size in ("medium", "large"):
        for label, target in SIDECAR_TARGETS.items():
            if size in results and label in results[size]:
                ratio = results[size][label]["evals_per_s"] / results[size][JRE]["evals_per_s"]
                out.append(f"{size}, {label} ÷ {JRE}: {ratio:.2f}× (target ≥ {target:g}×) "
                           f"{'PASS' if ratio >= target else 'MISS'}")
    for size, stats in STARTS.items():
        out.append(f"{size}: the timed server, spawn → first evaluateRules answered {stats['first_s']:.2f} s"
                   + (f" (initialize → first answer {stats['first_after_initialize_s']:.2f} s)"
                      if "first_after_initialize_s" in stats else "")
                   + " (its compile cache as the first-answer servers left it)"
                   + f"; after one rule file edit {stats['after_edit_s'] * 1000:.0f} ms")
        out += first_answer_verdicts(size, stats.get("first_answers", {}))
    rows = results.get("large")
    if rows is None:
        return [*out, "targets apply to `large` (not run)"]
    for peer, target in TARGETS.items():
        ratio = rows[OURS]["evals_per_s"] / rows[peer]["evals_per_s"]
        out.append(f"large, ours ÷ {peer}: {ratio:.2f}× (target ≥ {target:g}×) "
                   f"{'PASS' if ratio >= target else 'MISS'}")
    return out


def machine() -> str:
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{datetime.date.today().isoformat()}, {os.cpu_count()} CPUs, {platform.machine()}, "
            f"Python {platform.python_version()}, Node {node}, load average now {load}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sizes", nargs="*", metavar="size", help=f"any of {', '.join(SIZES)} (default: all)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per implementation (after 1 warm-up)")
    ap.add_argument("--out", type=Path, default=HERE.parent / "out", help="output folder (default bench/out)")
    args = ap.parse_args(argv)
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        ap.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"start: {machine()}", flush=True)
    modules = peers.ensure_node_peer(out / "peers-node")
    results: dict[str, dict[str, dict]] = {}
    failures: list[str] = []
    for size in args.sizes or SIZES:
        results[size], failed = bench_size(size, out, args.runs, modules)
        failures += failed
    lines = ["", f"end: {machine()}", "", *table(results), "", *verdicts(results)]
    lines.append("cross-check: " + ("MATCH on every size" if not failures else f"{len(failures)} MISMATCH"))
    print("\n".join(lines))
    (out / "rules-summary.md").write_text("\n".join(lines) + "\n")
    for failure in failures:
        print(f"\nMISMATCH {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
