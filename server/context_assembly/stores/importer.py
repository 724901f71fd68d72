"""Importing memory from one JSON document: seeding a workspace, or moving memory between them.

```json
{ "writes": [ {"uri": "kv://users/u-1", "value": {...}}, ... ],
  "threads": { "t-42": [ {"role": "user", "content": "..."}, ... ] },
  "graph": "knowledgegraph/seed.json"  |  {"nodes": [...], "edges": [...]},
  "collections": { "docs": {"embedding_model": "...", "chunk_size": 512, "chunk_overlap": 64,
                            "search_mode": "vector"} },
  "events": { "audit": [ {"event_type": "login", "payload": {...}, "ts": 1700000000.0}, ... ] } }
```

Edges without an `id` get a stable one (from kind and ends).

The whole document is checked first (URIs, values, turns, events, every node and edge), so a bad
file writes nothing; `stores.import_apply` then writes it all or nothing (see there).

Importing twice gives the same stores: writes are upserts, each listed thread's turns are
replaced, graph nodes and edges are upserted, a collection's model is set before its documents
are written (when it has none yet), and an instance's events are appended only when that log
instance is still empty (the others are reported as skipped). Event-log writes are refused under
`writes`, since the log is append-only and a re-import would duplicate them. `memory export`
writes this format.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from attrs import Factory, define

from ..errors import InvalidParamsError
from ..json_numbers import loads_exact
from .checks import check_event, check_turn
from .confine import resolve_inside
from .event import event_fields
from .files.notes import note_name
from .graph import GraphEdge, GraphNode
from .kuzu.graph import graph_entries
from .memory import MemoryRouter, blob_data, vector_document
from .uri import MemoryUri, parse_uri, render

Problems = list[dict[str, str]]


@define
class ImportPlan:
    """A checked import: what goes to which store, nothing written yet."""

    collections: dict[str, dict[str, Any]] = Factory(dict)  # name -> the settings given (its model, chunking)
    writes: list[tuple[str, str, Any]] = Factory(list)  # (pointer, uri, value) of the record stores
    notes: list[tuple[str, str]] = Factory(list)  # (note name, text)
    nodes: list[GraphNode] = Factory(list)  # graph:// writes, then the `graph` data
    edges: list[GraphEdge] = Factory(list)
    threads: dict[str, list[dict[str, Any]]] = Factory(dict)
    events: dict[str, list[dict[str, Any]]] | None = None
    stores: dict[str, int] = Factory(dict)  # writes per scheme (the `writes` list only)
    graph_writes: int = 0
    graph_data: tuple[int, int] = (0, 0)  # nodes, edges of the `graph` data


def _problems(document: Any) -> Problems:
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
            pointer = "/threads/" + _escape(thread_id)
            problems += _uri_problems(render("episodic", (thread_id,)), pointer)
            for j, turn in enumerate(turns):
                problems += _refusals(f"{pointer}/{j}", partial(check_turn, thread_id, turn))
    events = document.get("events") or {}
    if not isinstance(events, dict) or not all(isinstance(e, list) and all(isinstance(x, dict) for x in e)
                                               for e in events.values()):
        problems.append({"path": "/events", "message": "events map a log instance to a list of {event_type, "
                                                       "payload, ts}"})
    else:
        for instance, listed in events.items():
            pointer = "/events/" + _escape(instance)
            for j, event in enumerate(listed):
                problems += _refusals(f"{pointer}/{j}", partial(_check_event, instance, event))
    collections = document.get("collections") or {}
    if not isinstance(collections, dict) or not all(isinstance(c, dict) for c in collections.values()):
        problems.append({"path": "/collections", "message": "collections map a name to {embedding_model, "
                                                            "chunk_size, chunk_overlap, search_mode}"})
    else:  # a model no embedder knows: refused with the rest, not a failure halfway through the writes
        for name, entry in collections.items():
            problems += _collection_problems(f"/collections/{_escape(name)}", entry)
    return problems


def _collection_problems(pointer: str, entry: dict[str, Any]) -> Problems:
    from .embedding import SPECS
    from .vector import CollectionSettings

    unknown = sorted(set(entry) - {"embedding_model", "chunk_size", "chunk_overlap", "search_mode"})
    if unknown:
        return [{"path": f"{pointer}/{unknown[0]}", "message": f"unknown collection setting '{unknown[0]}'"}]
    model = entry.get("embedding_model")
    if model is not None and model not in SPECS:
        return [{"path": f"{pointer}/embedding_model",
                 "message": f"unknown embedding model {model!r}; known: {', '.join(sorted(SPECS))}"}]
    try:
        CollectionSettings.from_json(entry)
    except (ValueError, TypeError) as exc:
        return [{"path": pointer, "message": str(exc)}]
    return []


def _check_event(instance: str, event: Any) -> None:
    check_event(instance, *event_fields(event))


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _uri_problems(uri: str, pointer: str) -> Problems:
    try:
        parse_uri(uri, pointer=pointer)
    except InvalidParamsError as exc:
        return exc.errors or [{"path": pointer, "message": exc.message}]
    return []


def _refusals(pointer: str, check: Callable[[], object]) -> Problems:
    """The problems `check` refuses, their `/value…` paths moved under `pointer` (other paths: at it)."""
    try:
        check()
    except InvalidParamsError as exc:
        found = exc.errors or [{"path": "", "message": exc.message}]
        return [{**e, "path": pointer + (str(e.get("path") or "")[len("/value"):]
                                         if str(e.get("path") or "").startswith("/value") else "")}
                for e in found]
    return []


def _graph(memory: MemoryRouter, graph: Any, base: Path) -> tuple[list[GraphNode], list[GraphEdge]]:
    """The checked nodes and edges of the import's `graph` (a file under `.codebolt/`, or inline)."""
    if graph is None:
        return [], []
    if memory.graph is None:
        raise InvalidParamsError("invalid memory import", [{"path": "/graph", "message": "no graph store"}])
    if isinstance(graph, str):
        path = resolve_inside(base, graph, what="graph file", pointer="/graph")
        try:
            graph = loads_exact(Path(path).read_bytes())
        except (OSError, ValueError) as exc:  # orjson.JSONDecodeError, InexactNumber
            raise InvalidParamsError(f"cannot read graph data {path}: {exc}",
                                     [{"path": "/graph", "message": str(exc)}]) from None
    try:
        return graph_entries(memory.graph, graph)
    except InvalidParamsError as exc:
        errors = [{**e, "path": "/graph" + str(e.get("path") or "")} for e in exc.errors]
        raise InvalidParamsError("invalid memory import", errors) from None


def _plan_write(memory: MemoryRouter, plan: ImportPlan, pointer: str, uri: MemoryUri, value: Any) -> Problems:
    """Put one write into the plan, or say what is wrong with it (as the store would refuse it)."""
    at_value = lambda check: _refusals(f"{pointer}/value", check)  # noqa: E731
    scheme = uri.scheme
    if uri.params:
        return [{"path": f"{pointer}/uri", "message": "query parameters only apply to reads"}]
    if scheme == "file":
        return [{"path": f"{pointer}/uri", "message": "file:// is read-only: workspace files are never written "
                                                      "through memory"}]
    if scheme == "markdown":
        problems = _refusals(f"{pointer}/uri", lambda: note_name(uri.parts[0]))
        if not isinstance(value, str):
            problems.append({"path": f"{pointer}/value", "message": "a markdown note is written from a string"})
        if not problems:
            plan.notes.append((uri.parts[0], value))
        return problems
    if scheme == "graph":
        return _plan_graph_write(memory, plan, pointer, uri, value)
    if scheme == "working" and len(uri.parts) == 1:
        return [{"path": f"{pointer}/uri", "message": "name a key to write: working://<thread_id>/<key>"}]
    if scheme == "blob":
        problems = at_value(lambda: blob_data(value))
    elif scheme == "vector":
        problems = [{"path": f"{pointer}/uri", "message": "no vector store"}] if memory.vectors is None else \
            at_value(lambda: vector_document(uri, value))
    else:
        problems = []
    if not problems:
        plan.writes.append((pointer, uri.text, value))
    return problems


def _plan_graph_write(memory: MemoryRouter, plan: ImportPlan, pointer: str, uri: MemoryUri, value: Any) -> Problems:
    if memory.graph is None:
        return [{"path": f"{pointer}/uri", "message": "no graph store"}]
    if len(uri.parts) == 1:
        return [{"path": f"{pointer}/uri", "message": "graph views are read-only: write "
                                                      "graph://<instance>/node/<id> or …/edge/<id>"}]
    instance, kind, ident = uri.parts
    if not isinstance(value, dict):
        shape = "{kind, name, attributes}" if kind == "node" else "{kind, from, to, attributes}"
        return [{"path": f"{pointer}/value", "message": f"a graph {kind} is written as {shape}"}]
    entry = {**{k: v for k, v in value.items() if k != "id"}, "id": ident}
    if kind == "node":
        entry.setdefault("name", ident)
    if entry.get("attributes") is None:
        entry["attributes"] = {}
    try:
        nodes, edges = graph_entries(memory.graph, {"instance": instance, f"{kind}s": [entry]})
    except InvalidParamsError as exc:
        return [{**e, "path": f"{pointer}/value" + str(e.get("path") or "").removeprefix(f"/{kind}s/0")}
                for e in exc.errors]
    plan.nodes += nodes
    plan.edges += edges
    plan.graph_writes += 1
    return []


def plan_import(memory: MemoryRouter, document: Any, base: Path) -> ImportPlan:
    """The checked plan of an import document; InvalidParamsError lists every problem, nothing written."""
    problems = _problems(document)
    if not isinstance(document, dict):
        raise InvalidParamsError("invalid memory import", problems)
    plan = ImportPlan(threads=dict(_mapping(document.get("threads"))),
                      events=dict(_mapping(document["events"])) if "events" in document else None)
    writes = document.get("writes") or []
    for i, write in enumerate(writes if isinstance(writes, list) else []):
        pointer = f"/writes/{i}"
        if any(e["path"] == pointer or e["path"].startswith(pointer + "/") for e in problems):
            continue  # its shape or URI is wrong already
        uri = parse_uri(write["uri"], pointer=f"{pointer}/uri")
        problems += _plan_write(memory, plan, pointer, uri, write["value"])
        plan.stores[uri.scheme] = plan.stores.get(uri.scheme, 0) + 1
    collections = _mapping(document.get("collections"))
    if collections and memory.vectors is None:
        problems.append({"path": "/collections", "message": "no vector store"})
    plan.collections = {name: dict(settings) for name, settings in collections.items() if isinstance(settings, dict)}
    try:
        nodes, edges = _graph(memory, document.get("graph"), base)
    except InvalidParamsError as exc:
        problems += exc.errors
        nodes, edges = [], []
    if problems:
        raise InvalidParamsError("invalid memory import", problems)
    plan.nodes += nodes
    plan.edges += edges
    plan.graph_data = (len(nodes), len(edges))
    return plan


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def import_memory(memory: MemoryRouter, document: Any, base: Path) -> dict[str, Any]:
    """Check then apply an import; `base` resolves a graph file path (relative to `.codebolt/`).
    Returns what was written (`stores.import_apply.apply_import`)."""
    from .import_apply import apply_import

    return apply_import(memory, plan_import(memory, document, base))


def import_file(memory: MemoryRouter, path: Path | str, base: Path) -> dict[str, Any]:
    """`import_memory` of a JSON file (`-` reads standard input)."""
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
        document = loads_exact(raw)
    except (OSError, ValueError) as exc:  # orjson.JSONDecodeError, InexactNumber
        raise InvalidParamsError(f"cannot read the import file: {exc}", []) from None
    return import_memory(memory, document, base)
