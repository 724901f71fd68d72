"""The client moves what its process holds after the first sidecar started out of the cyclic
collector's way (`gc.freeze`), once per process, unless told not to or the caller froze already.
Each case runs in a fresh interpreter: freezing is per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r'''
import asyncio, gc, json, sys
from context_assembly.client import ContextAssemblyClient
from context_assembly.client.connection import freeze_once

async def main(workspace, case):
    seen = {}
    if case == "caller froze":
        gc.freeze()
        seen["before"] = gc.get_freeze_count()
    async with ContextAssemblyClient(workspace, freeze_imports=case != "opted out") as client:
        seen["first"] = gc.get_freeze_count()
        seen["answer"] = await client.request("contextAssembly/memoryTypes", {}) is not None
    garbage = [[i] for i in range(1000)]  # objects made after the first client started
    async with ContextAssemblyClient(workspace) as client:
        seen["second"] = gc.get_freeze_count()
    seen["again"] = freeze_once()
    seen["enabled"] = gc.isenabled()
    print(json.dumps(seen))

asyncio.run(main(sys.argv[1], sys.argv[2]))
'''


def run(workspace: Path, case: str) -> dict[str, int | bool]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(workspace), case], capture_output=True, text=True,
                          timeout=120, env={**os.environ})
    assert done.returncode == 0, done.stderr
    seen: dict[str, int | bool] = json.loads(done.stdout.splitlines()[-1])
    return seen


def test_the_first_client_freezes_once_per_process(workspace: Path) -> None:
    seen = run(workspace, "default")
    assert seen["answer"] and seen["enabled"]
    assert int(seen["first"]) > 10_000  # the modules the client and pygls imported, at least
    # not again: the lists made after it stay with the collector (frozen objects freed since count no more)
    assert int(seen["second"]) <= int(seen["first"]) and seen["again"] is False


def test_a_client_told_not_to_leaves_the_collector_alone(workspace: Path) -> None:
    seen = run(workspace, "opted out")
    assert seen["first"] == 0 and seen["answer"]
    assert int(seen["second"]) > 10_000  # the next client (default) freezes


def test_a_caller_that_froze_itself_is_left_as_it_is(workspace: Path) -> None:
    seen = run(workspace, "caller froze")
    assert int(seen["second"]) <= int(seen["first"]) <= int(seen["before"]) and seen["again"] is False
