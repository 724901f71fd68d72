"""A swarm's sidecars compiling the same rule engines at once, on a cold compile cache they share:
the matchers divided between them (each compiles the engines, and fuses the groups, in an order
of its own and takes what the others kept meanwhile) against each compiling everything (as before),
in the same run.

    python bench/rules/swarm_compile.py [--workload bench/out/data/large] [--processes 4] [--rounds 2]

A cold cache is what a swarm meets on a new machine, after the package or Python was upgraded (an
entry's key holds both), or after the cache was cleared. Per round and way a new, empty cache
folder; `--processes` processes start at once, each loading the workload's engines the way the
sidecar's loader does (`WorkspaceLoader(background=True)`: interpreted matchers at once, the
generated ones compiled on its background thread, then the groups fused), and report how long
until its background compiler was done, its CPU time, and how many engines it compiled and groups
it fused itself. "Before" is the same code with the shared work left out: every engine and group
in file order, no entry another process kept taken (`WorkspaceLoader._adopted` false).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # bench/

from as_installed import compile_package  # noqa: E402
from swarm import alternated, at_once  # noqa: E402

WAYS = ("each", "shared")

WORKER = r"""
import json, resource, sys, time, types
from pathlib import Path
from context_assembly.rules import fused
from context_assembly.rules.cache import CompileCache
from context_assembly.workspace import loader as loader_module

way, root, cache = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if way == "each":  # before: file order everywhere, nothing taken from the others
    loader_module.random = types.SimpleNamespace(shuffle=lambda items: None)
    fused.random = types.SimpleNamespace(sample=lambda population, k: list(population))
    loader_module.WorkspaceLoader._adopted = lambda self, compiled, key: False
compiled, groups = [], []
compile_matcher = loader_module.compile_matcher
loader_module.compile_matcher = lambda engine: (compiled.append(1), compile_matcher(engine))[1]
Emitter = fused._Emitter
class Counted(Emitter):
    def build_fused(self, rule_lists):
        groups.append(1)
        return super().build_fused(rule_lists)
fused._Emitter = Counted
sys.stdin.readline()  # every process started: go
t = time.perf_counter()
loader = loader_module.WorkspaceLoader(root, cache=CompileCache(cache), background=True)
workspace = loader.load()
loaded_s = time.perf_counter() - t
assert loader.compiler.wait(600)
done_s = time.perf_counter() - t
fused_groups = workspace.rule_set._selection(None).fused
assert fused_groups is not None and all(engine.generated for engine in workspace.rule_set.engines)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"loaded_s": loaded_s, "done_s": done_s, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "compiled": len(compiled), "fused": len(groups), "engines": len(workspace.rule_set.engines),
                  "groups": len(fused_groups)}), flush=True)
"""


def run_way(way: str, root: Path, cache: Path, processes: int) -> list[dict[str, Any]]:
    shutil.rmtree(cache, ignore_errors=True)
    return at_once(WORKER, [way, str(root), str(cache)], processes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", type=Path, default=HERE.parent / "out" / "data" / "large")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from sidecar import workspace_for

    root = workspace_for(args.workload, HERE.parent / "out" / "sidecar-ws")
    cache = HERE.parent / "out" / "swarm-compile-cache"
    load = [os.getloadavg()[0]]
    rows = alternated(WAYS, args.rounds, lambda way: run_way(way, root, cache, args.processes))
    load.append(os.getloadavg()[0])
    first = rows["each"][0][0]
    print(f"{args.workload.name}: {first['engines']} engines, {first['groups']} fused groups; {args.processes} "
          f"processes at once, {args.rounds} rounds; load {load[0]:.2f} → {load[1]:.2f} on {os.cpu_count()} CPUs\n")
    print("| way | until the last had every matcher, s (rounds) | loaded (interpreted), median s | CPU of all, s "
          "(rounds) | engines compiled, all processes | groups fused, all processes |")
    print("| --- | --- | --- | --- | ---: | ---: |")
    for way in WAYS:
        label = "each compiles everything (before)" if way == "each" else "divided through the cache (now)"
        last = [max(r["done_s"] for r in run) for run in rows[way]]
        loaded = statistics.median(r["loaded_s"] for run in rows[way] for r in run)
        cpu = [sum(r["cpu_s"] for r in run) for run in rows[way]]
        engines = statistics.median(sum(r["compiled"] for r in run) for run in rows[way])
        groups = statistics.median(sum(r["fused"] for r in run) for run in rows[way])
        print(f"| {label} | {', '.join(f'{s:.2f}' for s in last)} | {loaded:.2f} | "
              f"{', '.join(f'{s:.1f}' for s in cpu)} | {engines:.0f} | {groups:.0f} |")
    return 0


if __name__ == "__main__":
    compile_package()  # the workers import bytecode, as an installed package does
    sys.exit(main())
