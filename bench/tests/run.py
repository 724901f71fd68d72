"""`context-assembly test` over 1,000 cases on the 17,400-rule workload, in one command.

    python bench/tests/run.py [--size large] [--cases 1000] [--runs 3] [--out DIR]

1. generates the rules workload (`../shared/bench/peers/gen_workload.py`, deterministic) and runs
   the shared reference evaluator (`reference_eval.py --spec`) on its requests;
2. writes a workspace: every engine as `.codebolt/context-rule-engines/<id>.json`, and `--cases`
   rule-test cases in 10 files under `.codebolt/tests/`, case i using request i mod N with the
   reference's answer as its expectations (every rule that fired, three that did not, every
   memory included), so every case must pass;
3. times, in this process: loading the workspace (structure + compile the rules) and the test run
   (`run_tests`, what `context-assembly test` runs), the same again with 10% of the cases made to
   fail (each failure explained condition by condition), and the floor: `RuleSet.evaluate` with
   `explain=False` over the same requests, nothing else. Prints one table (ratios vs the floor)
   and exits 1 when a case that should pass fails, or one that should fail passes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SHARED = REPO.parent / "shared" / "bench" / "peers"
FILES = 10


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def workload(size: str, out: Path) -> tuple[Path, dict[str, Any]]:
    data = out / "data"
    _run([sys.executable, str(SHARED / "gen_workload.py"), "--size", size, "--out", str(data)])
    folder = data / size
    expected = out / f"{size}.ref.json"
    _run([sys.executable, str(SHARED / "reference_eval.py"), "--workload", str(folder), "--out", str(expected),
          "--stats", str(out / f"{size}.ref.stats.json"), "--runs", "1", "--spec"])
    return folder, json.loads(expected.read_text())


def request_of(q: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"scope_variables": q.get("scope") or {},
                            "additional_variables": q.get("additional_variables") or {}}
    if q.get("input") is not None:
        data["input"] = q["input"]
    return data


def write_workspace(folder: Path, reference: dict[str, Any], root: Path, cases: int, failing: bool) -> int:
    """The workspace; returns how many cases are made to fail."""
    if root.exists():
        shutil.rmtree(root)
    engines_dir = root / ".codebolt" / "context-rule-engines"
    engines_dir.mkdir(parents=True)
    engines = json.loads((folder / "engines.json").read_text())
    for engine in engines:
        (engines_dir / f"{engine['id']}.json").write_text(json.dumps(engine))
    all_rules = [f"{e['id']}/{r['id']}" for e in engines for r in e["rules"]]
    requests = json.loads((folder / "requests.json").read_text())
    expected = {r["request_id"]: r for r in reference["results"]}
    tests = root / ".codebolt" / "tests"
    tests.mkdir(parents=True)
    per_file: list[list[dict[str, Any]]] = [[] for _ in range(FILES)]
    broken = 0
    for i in range(cases):
        q = requests[i % len(requests)]
        answer = expected[q["id"]]
        fired = set(answer["rules"])
        not_fired = [r for r in all_rules[(i * 37) % len(all_rules):] if r not in fired][:3]
        expect: dict[str, Any] = {"rules_fired": sorted(fired), "rules_not_fired": not_fired,
                                  "memories_included": answer["memories"]}
        if failing and i % 10 == 0:  # one case in ten expects a rule that did not fire
            expect["rules_fired"] = expect["rules_fired"] + not_fired[:1]
            broken += 1
        per_file[i % FILES].append({"name": f"case {i} ({q['id']})", "request": request_of(q), "expect": expect})
    for n, file_cases in enumerate(per_file):
        (tests / f"bench-{n:02d}.json").write_text(json.dumps({"cases": file_cases}))
    return broken


def timed_run(root: Path) -> tuple[float, float, Any]:
    from context_assembly.testing import run_tests
    from context_assembly.workspace.loader import WorkspaceLoader

    started = time.perf_counter()
    workspace = WorkspaceLoader(root).load()
    for engine in workspace.rule_set.engines:
        engine.match({})  # compile now (the loader compiles lazily): part of loading
    loaded = time.perf_counter()
    run = run_tests(workspace)
    return loaded - started, time.perf_counter() - loaded, (workspace, run)


def floor(workspace: Any, root: Path) -> float:
    """`RuleSet.evaluate(explain=False)` over the cases' requests: the bare rule evaluation."""
    from context_assembly.assembly.request import parse_request
    from context_assembly.testing import load_test_files

    requests = [parse_request(c.request) for f in load_test_files(workspace) for c in f.cases]
    started = time.perf_counter()
    for request in requests:
        workspace.rule_set.evaluate(request, explain=False)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="large")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "tests")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    folder, reference = workload(args.size, args.out)
    rows = []
    ok = True
    for label, failing in (("all pass", False), ("10% fail", True)):
        root = args.out / ("ws-fail" if failing else "ws-pass")
        broken = write_workspace(folder, reference, root, args.cases, failing)
        loads, runs, floors = [], [], []
        for _ in range(args.runs):
            load_s, run_s, (workspace, run) = timed_run(root)
            loads.append(load_s)
            runs.append(run_s)
            floors.append(floor(workspace, root))
        summary = run.summary()
        expected = (summary["failed"] == broken and summary["passed"] == args.cases - broken
                    and summary["error"] == 0 and not run.problems)
        ok &= expected
        rules = sum(len(e.rules) for e in workspace.rule_set.select(None)[0])  # enabled engines
        run_med, floor_med = statistics.median(runs), statistics.median(floors)
        rows.append((label, rules, args.cases, f"{summary['passed']}/{summary['failed']}",
                     statistics.median(loads), run_med, 1000 * run_med / args.cases, floor_med,
                     run_med / floor_med, "ok" if expected else "WRONG"))
    print(f"\nload average: {os.getloadavg()[0]:.2f} (1 min); python {sys.version.split()[0]}; "
          f"median of {args.runs} runs\n")
    print("| cases | rules | tests | passed/failed | load + compile s | test run s | ms per case | "
          "floor: evaluate s | test run / floor | check |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, rules, cases, outcome, load_s, run_s, per_case, floor_s, ratio, check in rows:
        print(f"| {label} | {rules:,} | {cases:,} | {outcome} | {load_s:.2f} | {run_s:.3f} | {per_case:.2f} | "
              f"{floor_s:.3f} | {ratio:.1f}× | {check} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
