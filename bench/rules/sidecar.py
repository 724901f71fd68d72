"""evaluateRules through the sidecar over stdio, on a bench workload; writes stats like ours.py.

    python bench/rules/sidecar.py --workload bench/out/data/medium --stats bench/out/medium.sidecar.stats.json

The workload's engines become `.codebolt/context-rule-engines/<id>.json` of a workspace under
`bench/out/sidecar-ws/<size>/` (rewritten only when they changed); a server is spawned through
the project's client (`python -m context_assembly serve`). Timed per run: every request of the
workload as `contextAssembly/evaluateRules`, sequential round trips (JSON encoding, the pipe and
the client's decoding included), once with the full trace (`explain` absent: "all") and once
with `"explain": "none"`. Also: spawn → first evaluateRules answered (the workspace loaded and
compiled, the trace program built), and after a rule file is edited, the next answer (one
engine recompiled).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from context_assembly.client import ContextAssemblyClient

ROWS = {"all": "ours via sidecar, full trace", "none": 'ours via sidecar, explain="none"'}


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


async def measure(workspace: Path, requests: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {mode: [] for mode in ROWS}
    with open(os.devnull, "w") as log:
        started = time.perf_counter()
        async with ContextAssemblyClient(workspace, stderr=log) as client:
            first = await client.evaluate_rules(requests[0])
            out["first_s"] = time.perf_counter() - started
            out["enabled_engines"] = len(first["engine_results"])
            out["rules_per_request"] = sum(len(e["rules"]) for e in first["engine_results"])
            for mode in ROWS:
                extra = {} if mode == "all" else {"explain": mode}
                for run in range(runs + 1):  # the first is the warm-up
                    t0 = time.perf_counter()
                    for request in requests:
                        await client.evaluate_rules({**request, **extra})
                    if run:
                        out[mode].append(time.perf_counter() - t0)
            # an edit of one rule file: the next answer recompiles only that engine
            engine_file = sorted((workspace / ".codebolt" / "context-rule-engines").glob("*.json"))[0]
            original = engine_file.read_text()
            doc = json.loads(original)
            doc["rules"][0]["name"] = f"{doc['rules'][0].get('name')} (edited)"
            try:
                engine_file.write_text(json.dumps(doc, indent=2))
                t0 = time.perf_counter()
                await client.evaluate_rules(requests[0])
                out["after_edit_s"] = time.perf_counter() - t0
            finally:
                engine_file.write_text(original)
            await client.evaluate_rules(requests[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", type=Path, required=True)
    ap.add_argument("--stats", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=0, help="only the first N requests (default: all)")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent / "out" / "sidecar-ws")
    args = ap.parse_args()
    requests = [as_request(q) for q in json.loads((args.workload / "requests.json").read_text())]
    requests = requests[:args.requests] if args.requests else requests
    workspace = workspace_for(args.workload, args.root)
    result = asyncio.run(measure(workspace, requests, args.runs))
    variants = []
    for mode, label in ROWS.items():
        median = statistics.median(result[mode])
        n, engines = len(requests), result["enabled_engines"]
        variants.append({
            "impl": label, "requests": n, "enabled_engines": engines, "median_s": median,
            "runs_s": result[mode], "evals_per_s": n * engines / median, "requests_per_s": n / median,
            "rules_evaluated_per_request": result["rules_per_request"],
            "rule_evals_per_s": n * result["rules_per_request"] / median,
            "loadavg_1m": round(os.getloadavg()[0], 2),
        })
    args.stats.write_text(json.dumps({"variants": variants, "first_s": result["first_s"],
                                      "after_edit_s": result["after_edit_s"]}, indent=2))


if __name__ == "__main__":
    main()
