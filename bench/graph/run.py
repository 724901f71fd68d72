"""Embedded graph engines side by side: Kuzu 0.11.3 (shipped) and its fork LadybugDB, one run.

    python bench/graph/run.py                         # 10,000 nodes, 20,000 edges, 200 runs per query
    python bench/graph/run.py --nodes 50000 --edges 100000 --rounds 3

Kuzu runs in this interpreter (the project's). LadybugDB runs in its own virtualenv under
`bench/out/ladybug-venv`, made on first use (`pip install ladybug==<version>`), so the project's
environment never holds both. Each round runs both engines in fresh processes, alternating, and the
table shows the median over rounds and the ratio LadybugDB / Kuzu (below 1: LadybugDB is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "out"
LADYBUG = "ladybug==0.22.0"


def ladybug_python() -> Path:
    home = OUT / "ladybug-venv"
    python = home / "bin" / "python"
    if not python.exists():
        venv.create(home, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", LADYBUG], check=True)
    return python


def run(python: Path | str, engine: str, args: argparse.Namespace) -> dict:
    command = [str(python), str(HERE / "workload.py"), engine, "--nodes", str(args.nodes),
               "--edges", str(args.edges), "--runs", str(args.runs)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=200, help="timed runs of each query per round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    engines = {"kuzu": sys.executable, "ladybug": ladybug_python()}
    results: dict[str, list[dict]] = {name: [] for name in engines}
    for _ in range(args.rounds):
        for name, python in engines.items():
            results[name].append(run(python, name, args))
    digests = {r["digest"] for runs in results.values() for r in runs}
    if len(digests) != 1:
        sys.exit("the engines returned different rows for the same queries")
    rows = [("import", "import_ms"), ("bulk load: nodes", "load_nodes_ms"), ("bulk load: edges", "load_edges_ms")]
    rows += [(f"{query} p50", ("queries", query, "p50")) for query in results["kuzu"][0]["queries"]]
    rows += [(f"{query} p99", ("queries", query, "p99")) for query in results["kuzu"][0]["queries"]]
    versions = {name: runs[0]["version"] for name, runs in results.items()}
    print(f"graph: {args.nodes:,} nodes, {args.edges:,} edges, {args.runs} runs x {args.rounds} rounds, "
          f"load {os.getloadavg()[0]:.2f}; rows cross-checked: MATCH")
    print(f"| ms (median of rounds) | kuzu {versions['kuzu']} | ladybug {versions['ladybug']} | ladybug / kuzu |")
    print("| --- | ---: | ---: | ---: |")
    for label, key in rows:
        values = {name: statistics.median(pick(r, key) for r in runs) for name, runs in results.items()}
        ratio = values["ladybug"] / values["kuzu"]
        print(f"| {label} | {values['kuzu']:.2f} | {values['ladybug']:.2f} | {ratio:.2f} |")
    disk = {name: statistics.median(r["disk_bytes"] for r in runs) / 2**20 for name, runs in results.items()}
    print(f"| on disk (MiB) | {disk['kuzu']:.1f} | {disk['ladybug']:.1f} | {disk['ladybug'] / disk['kuzu']:.2f} |")


def pick(result: dict, key: str | tuple[str, ...]) -> float:
    if isinstance(key, str):
        return result[key]
    value = result
    for part in key:
        value = value[part]
    return value


if __name__ == "__main__":
    main()
