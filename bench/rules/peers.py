"""Setting up and calling the peer yardsticks in `<repo>/../shared/bench/peers` (read-only).

The shared folder is never written: workloads, outputs and the npm install of json-rules-engine
all go under the bench output folder. The peer script stays where it is and finds its package
through NODE_PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "bench" / "peers"
PYTHON3 = shutil.which("python3") or sys.executable  # the peers' own scripts need only the stdlib


def _run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a command, fail loudly with its output, return its stdout."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def read_json(path: Path) -> Any:
    with path.open() as fh:
        return json.load(fh)


def gen_workload(size: str, data_dir: Path) -> Path:
    """Generate (deterministically) `data_dir/<size>` and return it."""
    _run([PYTHON3, str(SHARED / "gen_workload.py"), "--size", size, "--out", str(data_dir)])
    return data_dir / size


def ensure_node_peer(cache: Path) -> Path:
    """Install json-rules-engine from the shared lock file into `cache`; return its node_modules."""
    modules = cache / "node_modules"
    if (modules / "json-rules-engine" / "package.json").is_file():
        return modules
    cache.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        target = cache / name
        target.unlink(missing_ok=True)
        target.write_bytes((SHARED / name).read_bytes())  # not copyfile: the source is read-only
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found: install Node.js 20 to run the json-rules-engine peer")
    print(f"installing the json-rules-engine peer into {cache} ...", flush=True)
    _run([npm, "ci", "--no-audit", "--no-fund"], env={**os.environ, "npm_config_loglevel": "error"},
         cwd=cache)
    if not (modules / "json-rules-engine").is_dir():
        raise RuntimeError(f"npm ci did not install json-rules-engine into {modules}")
    return modules


def run_json_rules_engine(workload: Path, out: Path, stats: Path, runs: int, modules: Path) -> dict:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node not found: install Node.js 20 to run the json-rules-engine peer")
    env = {**os.environ, "NODE_PATH": str(modules)}
    _run([node, str(SHARED / "peer_json_rules_engine.js"), "--workload", str(workload), "--out", str(out),
          "--stats", str(stats), "--runs", str(runs), "--warmup", "1", "--spec"], env=env)
    return read_json(stats)  # type: ignore[no-any-return]


def run_reference(workload: Path, out: Path, stats: Path, runs: int) -> dict:
    _run([PYTHON3, str(SHARED / "reference_eval.py"), "--workload", str(workload), "--out", str(out),
          "--stats", str(stats), "--runs", str(runs), "--spec"])
    return read_json(stats)  # type: ignore[no-any-return]


def check_outputs(expected: Path, actual: Path, show: int = 5) -> tuple[bool, str]:
    """Diff two output files with the shared checker: (match, its report)."""
    proc = subprocess.run([PYTHON3, str(SHARED / "check_outputs.py"), str(expected), str(actual),
                           "--show", str(show)], capture_output=True, text=True)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()
