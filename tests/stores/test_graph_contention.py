"""A swarm writing the knowledge graph back to back: no call fails, and every process gets its turn
while the others are writing (the lock's line is first come, first served, and a round of busy
turns is shared among those waiting: with 2 s turns each, the fourth in line would wait 6 s)."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.stores.kuzu import KuzuGraph, SessionSettings
from context_assembly.workspace.layout import WorkspaceLayout

SPAWN = multiprocessing.get_context("spawn")
WRITERS = 6
WRITE_FOR_S = 8.0


def _write_back_to_back(root: str, prefix: str, ready: Any, start: Any, out: str, line: bool = True) -> None:
    """Child process: write nodes back to back for WRITE_FOR_S seconds with the default session
    settings (a busy holder keeps the graph up to 2 s in a row while others wait) but a 4 s lock
    timeout; write down what landed, how much of it before the others stopped, and what failed.
    `line=False`: as on Windows, where waiters poll the lock without a line (no `flock`)."""
    if not line:
        import context_assembly.workspace.atomic as atomic

        atomic.fcntl = None  # type: ignore[assignment]
    graph = KuzuGraph(WorkspaceLayout(root), settings=SessionSettings(lock_timeout_s=4.0))
    graph.list_nodes("default")  # opened once (schema made), closed below so that all start even
    graph.close()
    ready.set()
    start.wait(60)
    written: list[str] = []
    errors: list[str] = []
    in_time = 0  # writes done before the end: while every process was still writing
    end = time.monotonic() + WRITE_FOR_S
    index = 0
    while time.monotonic() < end:
        node = f"{prefix}-{index}"
        try:
            graph.upsert_node("default", node, "file", node, {"i": index})
        except Exception as exc:  # noqa: BLE001 - every failure is the finding
            errors.append(f"{type(exc).__name__}: {exc}")
        else:
            written.append(node)
            in_time += time.monotonic() < end
        index += 1
    graph.close()
    Path(out).write_text(json.dumps({"written": written, "errors": errors, "in_time": in_time}), encoding="utf-8")


@pytest.mark.parametrize(("line", "writers"), [(True, WRITERS), (False, 3)], ids=["line", "no-line"])
def test_processes_writing_the_graph_back_to_back_all_get_turns_and_none_fails(tmp_path: Path, line: bool,
                                                                              writers: int) -> None:
    """With a line (POSIX) and without one (Windows: a holder that let go with work left took the
    lock straight back from the polling waiters, which failed "still busy")."""
    layout = WorkspaceLayout(tmp_path)
    start = SPAWN.Event()
    workers = []
    for k in range(writers):
        ready = SPAWN.Event()
        worker = SPAWN.Process(target=_write_back_to_back,
                               args=(str(tmp_path), f"w{k}", ready, start, str(tmp_path / f"w{k}.json"), line))
        worker.start()
        workers.append((worker, ready))
    try:
        for _worker, ready in workers:
            assert ready.wait(60)
        start.set()
        for worker, _ready in workers:
            worker.join(90)
            assert worker.exitcode == 0
    finally:
        for worker, _ready in workers:
            worker.kill()
    results = {f"w{k}": json.loads((tmp_path / f"w{k}.json").read_text(encoding="utf-8")) for k in range(writers)}
    assert {name: result["errors"][:2] for name, result in results.items() if result["errors"]} == {}
    assert {name: result["in_time"] for name, result in results.items() if not result["in_time"]} == {}
    with KuzuGraph(layout, settings=SessionSettings(hold_s=0.0)) as graph:
        rows = graph._sessions.run(lambda conn: conn.execute("MATCH (n:Entity) RETURN n.id").get_all())
    landed = {row[0] for row in rows}
    assert landed == {node for result in results.values() for node in result["written"]}
