"""Processes of a swarm started together, for the benches of what a workspace's sidecars share:
each runs a worker script that imports what it needs, waits for a line on stdin, does its work
and prints one JSON report; the go comes once every process is started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SERVER = Path(__file__).resolve().parents[1] / "server"


def at_once(worker: str, argv: list[str], processes: int, timeout: float = 900) -> list[dict[str, Any]]:
    """Each process's report (the JSON its `worker` printed), the package imported from this
    checkout's `server`; RuntimeError when one fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SERVER), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", worker, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(processes)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=timeout)
        if proc.returncode:
            raise RuntimeError(f"a worker failed (exit {proc.returncode})")
        reports.append(json.loads(out))
    return reports
