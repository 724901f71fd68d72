"""Child-process bodies for the reliability tests (spawned: importable, picklable, no fixtures)."""

from __future__ import annotations

import base64
from typing import Any

from context_assembly.stores.memory import MemoryRouter

PAD = "x" * 100_000


def write_keys(workspace: str, worker: str, count: int, batch: int, start: Any) -> None:
    """`count` KV keys in namespace `worker`, `batch` per transaction (1: one transaction per key)."""
    service = MemoryRouter(workspace)
    start.wait(30)
    for first in range(0, count, batch):
        last = min(count, first + batch)
        rows = [("default", worker, f"k{i}", {"worker": worker, "i": i}) for i in range(first, last)]
        if batch == 1:
            service.kv.set(*rows[0])
        else:
            service.kv.set_many(rows)
    service.close()


def race_one_key(workspace: str, worker: str, count: int, start: Any) -> None:
    """Single-key writes to the same key as another process, through the URI layer."""
    service = MemoryRouter(workspace)
    start.wait(30)
    for i in range(count):
        service.write("kv://race", {"who": worker, "i": i})
        service.write("markdown://race", f"{worker} {i}\n")
    service.close()


def write_until_killed(workspace: str, ready: Any) -> None:
    """Big values to every store, round after round, until SIGKILL arrives mid-write."""
    service = MemoryRouter(workspace)
    blob = base64.b64encode(PAD.encode()).decode()
    i = 1
    while True:
        service.write("kv://k", {"n": i, "pad": PAD})
        service.write("markdown://crash", f"note {i}\n{PAD}")
        service.write("json://doc", {"n": i, "pad": PAD})
        service.write("log://default", {"event_type": "tick", "payload": {"n": i}})
        service.write("episodic://t", {"role": "user", "content": f"turn {i}"})
        service.write("working://t/k", {"n": i, "pad": PAD})
        service.write("blob://b/k", blob)
        if i == 3:
            ready.set()
        i += 1


def pg_patch_one_document(dsn: str, project: str, worker: str, count: int, start: Any) -> None:
    """Pointer writes to one shared JSON document (its own member), episodic turns and events, on
    PostgreSQL through a StoreSet of its own (its own connection pool, as another sidecar has)."""
    from pathlib import Path
    from tempfile import mkdtemp

    from context_assembly.stores.factory import open_stores
    from context_assembly.workspace.layout import WorkspaceLayout
    from context_assembly.workspace.settings import StoreSettings

    stores = open_stores(WorkspaceLayout(Path(mkdtemp())), StoreSettings(backend="postgres", dsn=dsn, project=project))
    start.wait(30)
    for i in range(count):
        stores.json_docs.put("plan", i, f"/{worker}")
        stores.json_docs.put("plan", True, f"/seen/{worker}-{i}")
        stores.episodic.append("shared", {"role": "user", "content": f"{worker} {i}"})
        stores.events.append("audit", "tick", {"worker": worker, "i": i})
    stores.close()
