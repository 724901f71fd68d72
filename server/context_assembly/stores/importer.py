"""Importing memory from one JSON document: seeding a workspace, or moving memory between them.

```json
{ "writes": [ {"uri": "kv://users/u-1", "value": {...}}, ... ],
  "threads": { "t-42": [ {"role": "user", "content": "..."}, ... ] },
  "graph": "knowledgegraph/seed.json"  |  {"nodes": [...], "edges": [...]},
  "collections": { "docs": {"embedding_model": "..."} },
  "events": { "audit": [ {"event_type": "login", "payload": {...}, "ts": 1700000000.0}, ... ] } }
```

Importing twice gives the same stores: writes are upserts, each listed thread's turns are
replaced, graph nodes and edges are upserted, a collection's model is set before its documents
are written (when it has none yet), and an instance's events are appended only when that log
instance is still empty. Event-log writes are refused under `writes`, since the log is
append-only and a re-import would duplicate them. `memory export` writes this format.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from ..errors import InvalidParamsError
from .confine import resolve_inside
from .kuzu.graph import load_graph_json
from .memory import MemoryRouter


def _problems(document: Any) -> list[dict[str, str]]:
    if not isinstance(document, dict):
        return [{"path": "", "message": "an import is a JSON object with writes, threads and graph"}]
    problems = []
    known = {"writes", "threads", "graph", "collections", "events", "description", "$schema"}
    for key in sorted(set(document) - known):
        problems.append({"path": f"/{key}", "message": f"unknown key '{key}' (writes, threads, graph, collections, "
                                                       "events)"})
    for i, write in enumerate(document.get("writes") or []):
        if not isinstance(write, dict) or not isinstance(write.get("uri"), str) or "value" not in write:
            problems.append({"path": f"/writes/{i}", "message": "a write is {uri, value}"})
        elif write["uri"].startswith(("log://", "episodic://")):
            problems.append({"path": f"/writes/{i}/uri", "message": "list turns under 'threads'; the event log "
                             "is append-only and cannot be imported idempotently"})
    threads = document.get("threads") or {}
    if not isinstance(threads, dict) or not all(isinstance(t, list) for t in threads.values()):
        problems.append({"path": "/threads", "message": "threads map a thread id to a list of turns"})
    events = document.get("events") or {}
    if not isinstance(events, dict) or not all(isinstance(e, list) and all(isinstance(x, dict) for x in e)
                                               for e in events.values()):
        problems.append({"path": "/events", "message": "events map a log instance to a list of {event_type, "
                                                       "payload, ts}"})
    collections = document.get("collections") or {}
    if not isinstance(collections, dict) or not all(isinstance(c, dict) for c in collections.values()):
        problems.append({"path": "/collections", "message": "collections map a name to {embedding_model}"})
    return problems


def import_memory(memory: MemoryRouter, document: Any, base: Path) -> dict[str, int]:
    """Apply an import; `base` resolves a graph file path (relative to `.codebolt/`)."""
    problems = _problems(document)
    if problems:
        raise InvalidParamsError("invalid memory import", problems)
    counts = {"writes": 0, "turns": 0, "nodes": 0, "edges": 0, **({"events": 0} if "events" in document else {})}
    for name, settings in (document.get("collections") or {}).items():
        if memory.vectors is None:
            raise InvalidParamsError("invalid memory import", [{"path": "/collections", "message": "no vector store"}])
        memory.vectors.settings(name, settings.get("embedding_model"))
    for write in document.get("writes") or []:
        memory.write(write["uri"], write["value"])
        counts["writes"] += 1
    for thread_id, turns in (document.get("threads") or {}).items():
        memory.delete(f"episodic://{thread_id}")
        for turn in turns:
            memory.write(f"episodic://{thread_id}", turn)
            counts["turns"] += 1
    for instance, events in (document.get("events") or {}).items():
        if memory.events.search(instance, limit=1):
            continue  # already imported (or written): appending again would duplicate the log
        for event in events:
            memory.write(f"log://{instance}", event)
            counts["events"] += 1
    graph = document.get("graph")
    if graph is not None:
        if memory.graph is None:
            raise InvalidParamsError("invalid memory import", [{"path": "/graph", "message": "no graph store"}])
        source = resolve_inside(base, graph, what="graph file", pointer="/graph") if isinstance(graph, str) else graph
        loaded = load_graph_json(memory.graph, source)
        counts["nodes"], counts["edges"] = loaded["nodes"], loaded["edges"]
    return counts


def import_file(memory: MemoryRouter, path: Path | str, base: Path) -> dict[str, int]:
    """`import_memory` of a JSON file (`-` reads standard input)."""
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
        document = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InvalidParamsError(f"cannot read the import file: {exc}", []) from None
    return import_memory(memory, document, base)
