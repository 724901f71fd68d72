"""Processes of a swarm started together, for the benches of what a workspace's sidecars share:
each runs a worker script that imports what it needs, waits for a line on stdin, does its work
and prints one JSON report; the go comes once every process is started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
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


Reports = list[dict[str, Any]]


def alternated(ways: tuple[str, ...], rounds: int, run: Callable[[str], Reports]) -> dict[str, list[Reports]]:
    """Per way, the reports of each of its `rounds` runs, the ways taking turns (the first way first
    in even rounds, last in odd ones), so that both meet the same moments of the host."""
    rows: dict[str, list[Reports]] = {way: [] for way in ways}
    for round_ in range(rounds):
        for way in ways if round_ % 2 == 0 else reversed(ways):
            rows[way].append(run(way))
    return rows
