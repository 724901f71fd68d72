"""Importing memory from one JSON document: seeding a workspace, or moving memory between them.

```json
{ "writes": [ {"uri": "kv://users/u-1", "value": {...}}, ... ],
  "threads": { "t-42": [ {"role": "user", "content": "..."}, ... ] },
  "graph": "knowledgegraph/seed.json"  |  {"nodes": [...], "edges": [...]},
  "collections": { "docs": {"embedding_model": "..."} },
  "events": { "audit": [ {"event_type": "login", "payload": {...}, "ts": 1700000000.0}, ... ] } }
```

Edges without an `id` get a stable one (from kind and ends).

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
from .kuzu.graph import graph_entries, load_graph_entries
from .memory import MemoryRouter
from .uri import parse_uri


def _problems(document: Any) -> list[dict[str, str]]:
    if not isinstance(document, dict):
        return [{"path": "", "message": "an import is a JSON object with writes, threads and graph"}]
    problems = []
    known = {"writes", "threads", "graph", "collections", "events", "description", "$schema"}
    for key in sorted(set(document) - known):
        problems.append({"path": f"/{key}", "message": f"unknown key '{key}' (writes, threads, graph, collections, "
                                                       "events)"})
    writes = document.get("writes") or []
    if not isinstance(writes, list):
        problems.append({"path": "/writes", "message": "writes are a list of {uri, value}"})
        writes = []
    for i, write in enumerate(writes):
        if not isinstance(write, dict) or not isinstance(write.get("uri"), str) or "value" not in write:
            problems.append({"path": f"/writes/{i}", "message": "a write is {uri, value}"})
        elif write["uri"].startswith(("log://", "episodic://")):
            problems.append({"path": f"/writes/{i}/uri", "message": "list turns under 'threads'; the event log "
                             "is append-only and cannot be imported idempotently"})
        else:
            problems += _uri_problems(write["uri"], f"/writes/{i}/uri")
    threads = document.get("threads") or {}
    if not isinstance(threads, dict) or not all(isinstance(t, list) for t in threads.values()):
        problems.append({"path": "/threads", "message": "threads map a thread id to a list of turns"})
    else:
        for thread_id, turns in threads.items():
            pointer = "/threads/" + thread_id.replace("~", "~0").replace("/", "~1")
            problems += _uri_problems(f"episodic://{thread_id}", pointer)
            problems += [{"path": f"{pointer}/{j}", "message": "a turn is an object {role, content}"}
                         for j, turn in enumerate(turns) if not isinstance(turn, dict)]
    events = document.get("events") or {}
    if not isinstance(events, dict) or not all(isinstance(e, list) and all(isinstance(x, dict) for x in e)
                                               for e in events.values()):
        problems.append({"path": "/events", "message": "events map a log instance to a list of {event_type, "
                                                       "payload, ts}"})
    collections = document.get("collections") or {}
    if not isinstance(collections, dict) or not all(isinstance(c, dict) for c in collections.values()):
        problems.append({"path": "/collections", "message": "collections map a name to {embedding_model}"})
    return problems


def _uri_problems(uri: str, pointer: str) -> list[dict[str, str]]:
    try:
        parse_uri(uri, pointer=pointer)
    except InvalidParamsError as exc:
        return exc.errors or [{"path": pointer, "message": exc.message}]
    return []


def _graph(memory: MemoryRouter, graph: Any, base: Path) -> tuple[list[Any], list[Any]] | None:
    """The checked nodes and edges of the import's `graph` (a file under `.codebolt/`, or inline)."""
    if graph is None:
        return None
    if memory.graph is None:
        raise InvalidParamsError("invalid memory import", [{"path": "/graph", "message": "no graph store"}])
    if isinstance(graph, str):
        path = resolve_inside(base, graph, what="graph file", pointer="/graph")
        try:
            graph = orjson.loads(Path(path).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise InvalidParamsError(f"cannot read graph data {path}: {exc}",
                                     [{"path": "/graph", "message": str(exc)}]) from None
    try:
        return graph_entries(memory.graph, graph)
    except InvalidParamsError as exc:
        errors = [{**e, "path": "/graph" + str(e.get("path") or "")} for e in exc.errors]
        raise InvalidParamsError("invalid memory import", errors) from None


def import_memory(memory: MemoryRouter, document: Any, base: Path) -> dict[str, Any]:
    """Apply an import; `base` resolves a graph file path (relative to `.codebolt/`).

    The whole document is checked before anything is written (URIs, turns, every node and edge),
    so a bad file writes nothing. The graph then loads in one transaction; writes and threads are
    applied one by one. Returns what was written: counts, and writes per store scheme."""
    problems = _problems(document)
    if problems:
        raise InvalidParamsError("invalid memory import", problems)
    graph = _graph(memory, document.get("graph"), base)
    counts: dict[str, Any] = {"writes": 0, "threads": 0, "turns": 0, "nodes": 0, "edges": 0, "stores": {},
                              **({"events": 0} if "events" in document else {})}
    for name, settings in (document.get("collections") or {}).items():
        if memory.vectors is None:
            raise InvalidParamsError("invalid memory import", [{"path": "/collections", "message": "no vector store"}])
        memory.vectors.settings(name, settings.get("embedding_model"))
    for write in document.get("writes") or []:
        memory.write(write["uri"], write["value"])
        counts["writes"] += 1
        scheme = write["uri"].split("://", 1)[0]
        counts["stores"][scheme] = counts["stores"].get(scheme, 0) + 1
    for thread_id, turns in (document.get("threads") or {}).items():
        memory.delete(f"episodic://{thread_id}")
        for turn in turns:
            memory.write(f"episodic://{thread_id}", turn)
            counts["turns"] += 1
        counts["threads"] += 1
    for instance, events in (document.get("events") or {}).items():
        if memory.events.search(instance, limit=1):
            continue  # already imported (or written): appending again would duplicate the log
        for event in events:
            memory.write(f"log://{instance}", event)
            counts["events"] = counts.get("events", 0) + 1
    if graph is not None:
        loaded = load_graph_entries(memory.graph, *graph)
        counts["nodes"], counts["edges"] = loaded["nodes"], loaded["edges"]
    return counts


def import_file(memory: MemoryRouter, path: Path | str, base: Path) -> dict[str, Any]:
    """`import_memory` of a JSON file (`-` reads standard input)."""
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
        document = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InvalidParamsError(f"cannot read the import file: {exc}", []) from None
    return import_memory(memory, document, base)
