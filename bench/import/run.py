"""`memory import` in one transaction vs the same writes one by one, embedded and PostgreSQL (one command).

    python bench/import/run.py                 # 2,000 KV writes, 200 threads of 5 turns, 500 events, ...
    python bench/import/run.py --scale 0.25    # a quarter of everything

One import document: KV and JSON writes, vector documents (hashing embedder), graph nodes and
edges, markdown notes, threads of turns and events. For each backend, in fresh workspaces:

- `import`: `memory import` as shipped (checked, then one database transaction per unit);
- `one by one`: the floor it replaced, measured in the same run: the same writes through
  `MemoryRouter.write` one at a time (each its own transaction), the graph loaded at the end.

Prints seconds and items per second for both, and the ratio. PostgreSQL comes from the `pgserver`
wheel (temporary folder, Unix socket); `--no-postgres` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "server"))

from context_assembly.runtime import Runtime  # noqa: E402
from context_assembly.stores.embedding import HASHING  # noqa: E402
from context_assembly.stores.importer import import_memory  # noqa: E402


def document(scale: float) -> dict[str, Any]:
    n = lambda count: max(1, int(count * scale))  # noqa: E731
    writes: list[dict[str, Any]] = [{"uri": f"kv://users/u{i}", "value": {"n": i, "theme": "dark"}}
                                    for i in range(n(2000))]
    writes += [{"uri": f"json://doc{i}", "value": {"steps": list(range(10))}} for i in range(n(200))]
    writes += [{"uri": f"vector://docs/d{i}.md", "value": {"text": f"login timeout number {i} in service {i % 7}"}}
               for i in range(n(300))]
    writes += [{"uri": f"markdown://notes/n{i}", "value": f"# note {i}\n\ntext"} for i in range(n(50))]
    nodes = [{"id": f"n{i}", "kind": "Service"} for i in range(n(300))]
    edges = [{"kind": "CALLS", "from": f"n{i}", "to": f"n{(i * 7 + 1) % len(nodes)}"} for i in range(len(nodes))]
    return {"collections": {"docs": {"embedding_model": HASHING}}, "writes": writes,
            "threads": {f"t{i}": [{"role": "user", "content": f"turn {j}", "ts": float(j)} for j in range(5)]
                        for i in range(n(200))},
            "events": {f"log{i}": [{"event_type": "deploy", "ts": float(j)} for j in range(5)] for i in range(n(100))},
            "graph": {"nodes": nodes, "edges": edges}}


def items(doc: dict[str, Any]) -> int:
    return (len(doc["writes"]) + sum(map(len, doc["threads"].values())) + sum(map(len, doc["events"].values()))
            + len(doc["graph"]["nodes"]) + len(doc["graph"]["edges"]))


def fresh(root: Path, stores: dict[str, Any] | None) -> Runtime:
    (root / ".codebolt").mkdir(parents=True)
    if stores:
        (root / ".codebolt" / "context-assembly.json").write_text(json.dumps({"stores": stores}))
    return Runtime(root)


def one_by_one(runtime: Runtime, doc: dict[str, Any]) -> None:
    from context_assembly.stores.kuzu.graph import graph_entries, load_graph_entries

    memory = runtime.memory
    assert memory.vectors is not None and memory.graph is not None
    for name, settings in doc["collections"].items():
        memory.vectors.settings(name, settings["embedding_model"])
    for write in doc["writes"]:
        memory.write(write["uri"], write["value"])
    for thread, turns in doc["threads"].items():
        for turn in turns:
            memory.write(f"episodic://{thread}", turn)
    for instance, events in doc["events"].items():
        for event in events:
            memory.write(f"log://{instance}", event)
    load_graph_entries(memory.graph, *graph_entries(memory.graph, doc["graph"]))


def timed(root: Path, stores: dict[str, Any] | None, doc: dict[str, Any], how: str) -> float:
    runtime = fresh(root, stores)
    try:
        runtime.memory.kv.list()  # open the database first: the bench times the writes
        start = time.perf_counter()
        if how == "import":
            import_memory(runtime.memory, doc, runtime.layout.codebolt)
        else:
            one_by_one(runtime, doc)
        return time.perf_counter() - start
    finally:
        runtime.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    doc = document(args.scale)
    total = items(doc)
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    backends: list[tuple[str, dict[str, Any] | None]] = [("embedded", None)]
    server = None
    if not args.no_postgres:
        import pgserver  # type: ignore[import-untyped]

        pg_dir = work / "pg"
        pg_dir.mkdir()
        os.chmod(work, 0o755)
        os.chmod(pg_dir, 0o755)
        server = pgserver.get_server(str(pg_dir / "data"), cleanup_mode="stop")
        backends.append(("postgres", {"backend": "postgres", "dsn": server.get_uri()}))
    print(f"load: {os.getloadavg()[0]:.2f}  items per import: {total:,}")
    print("| backend | import s | items/s | one by one s | items/s | one by one / import |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    try:
        for name, stores in backends:
            runs = {}
            for how in ("import", "one by one"):
                settings = None if stores is None else {**stores, "project": f"bench-{name}-{how.replace(' ', '-')}"}
                runs[how] = timed(work / f"{name}-{how.replace(' ', '-')}", settings, doc, how)
            print(f"| {name} | {runs['import']:.2f} | {total / runs['import']:,.0f} | {runs['one by one']:.2f} | "
                  f"{total / runs['one by one']:,.0f} | {runs['one by one'] / runs['import']:.2f} |")
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
