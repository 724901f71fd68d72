"""In-memory stores with the duck-typed members the pipeline runner reads, and request helpers."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from context_assembly.errors import InvalidParamsError
from context_assembly.model import AssemblyRequest, structure
from context_assembly.pipelines.context import StoreBundle
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.events import SqliteEventLog

from ..conftest import EXAMPLE

REQUEST = json.loads((EXAMPLE / "request.json").read_text())


def refuse_traversal(path: str) -> None:
    """What the real stores do with a path that would leave the workspace."""
    if path.startswith(("/", "\\")) or ".." in Path(path).parts or ".." in path.split("/"):
        raise InvalidParamsError("the path leaves the workspace", [{"path": "", "message": f"refused: {path}"}])


class FakeKV:
    def __init__(self, data: dict[tuple[str, str, str], Any] | None = None) -> None:
        self.data = dict(data or {})
        self.calls: list[tuple[str, str, str]] = []

    def get(self, instance: str, namespace: str, key: str) -> Any:
        refuse_traversal(key)
        self.calls.append((instance, namespace, key))
        return self.data.get((instance, namespace, key))

    def keys(self, instance: str, namespace: str) -> list[str]:
        return sorted(k for (i, n, k) in self.data if (i, n) == (instance, namespace))


class FakeJsonDocs:
    def __init__(self, docs: dict[str, Any] | None = None) -> None:
        self.docs = dict(docs or {})

    def get(self, doc: str, pointer: str | None = None) -> Any | None:
        node = self.docs.get(doc)
        for part in filter(None, (pointer or "").split("/")):
            node = node.get(part) if isinstance(node, dict) else None
        return node


class FakeNotes:
    def __init__(self, notes: dict[str, str] | None = None) -> None:
        self.notes = dict(notes or {})

    def read(self, note: str) -> str | None:
        refuse_traversal(note)
        return self.notes.get(note)


def event_log(events: list[tuple[float, str, dict[str, Any]]], instance: str = "default") -> SqliteEventLog:
    """The embedded event log as it ships, in a database of its own, holding `events` (ts, type,
    payload) with ids 1, 2, … in that order: its search (types, payload fields) is the real one."""
    log = SqliteEventLog(Database(Path(tempfile.mkdtemp(prefix="events-")) / "events.db"))
    for ts, event_type, payload in events:
        log.append(instance, event_type, payload, ts)
    return log


class FakeEpisodic:
    def __init__(self, threads: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.threads = dict(threads or {})

    def recent(self, thread_id: str, limit: int) -> list[dict[str, Any]]:
        return self.threads.get(thread_id, [])[-limit:]


class FakeFiles:
    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})

    def read(self, path: str) -> str | None:
        refuse_traversal(path)
        return self.files.get(path)


_WORD = re.compile(r"\w+")


class FakeVectors:
    """Scores a chunk by the share of the query's words it contains."""

    def __init__(self, collections: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.collections = dict(collections or {})
        self.calls: list[dict[str, Any]] = []

    def search(self, collection: str, query: str, top_k: int = 5, min_score: float = 0.0,
               mode: str = "vector") -> list[dict[str, Any]]:
        self.calls.append({"collection": collection, "query": query, "top_k": top_k, "min_score": min_score,
                           "mode": mode})
        words = set(_WORD.findall(query.lower()))
        hits = []
        for doc in self.collections.get(collection, []):
            text_words = set(_WORD.findall(doc["text"].lower()))
            score = round(len(words & text_words) / len(words), 4) if words else 0.0
            if score >= min_score:
                hits.append({"source": f"vector://{collection}/{doc['doc_uri']}", "score": score,
                             "metadata": {}, **doc})
        hits.sort(key=lambda h: -h["score"])
        return hits[:top_k]


class FakeGraph:
    def __init__(self, views: dict[str, Any] | None = None, edges: list[tuple[str, str, str]] | None = None,
                 nodes: dict[str, dict[str, Any]] | None = None) -> None:
        self.views = dict(views or {})  # id -> callable(params) -> rows
        self.edges = list(edges or [])  # (from, kind, to)
        self.nodes = dict(nodes or {})
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def run_view(self, view_id: str, params: dict[str, Any], timeout_ms: int | None = None) -> list[dict[str, Any]]:
        self.calls.append((view_id, params))
        if view_id not in self.views:
            raise InvalidParamsError(f"unknown view {view_id}", [{"path": "", "message": view_id}])
        return self.views[view_id](params)

    def neighbors(self, instance: str, node_ids: list[str], depth: int = 1, edge_kinds: list[str] | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        frontier, seen, out = set(node_ids), set(node_ids), []
        for _ in range(depth):
            nxt = set()
            for a, kind, b in self.edges:
                if edge_kinds and kind not in edge_kinds:
                    continue
                for here, there in ((a, b), (b, a)):
                    if here in frontier and there not in seen:
                        seen.add(there)
                        nxt.add(there)
                        out.append({"id": there, "kind": self.nodes.get(there, {}).get("kind", "module"),
                                    "name": self.nodes.get(there, {}).get("name", there), "edge_kind": kind})
            frontier = nxt
        return out[:limit]


def dependents(params: dict[str, Any]) -> list[dict[str, Any]]:
    table = {"auth": [{"id": "session", "name": "session", "kind": "module"},
                      {"id": "billing", "name": "billing", "kind": "module"}],
             "session": [{"id": "auth", "name": "auth", "kind": "module"},
                         {"id": "billing", "name": "billing", "kind": "module"}]}
    return table.get(params.get("name", ""), [])[: int(params.get("limit", 20))]


DOCS = [
    {"id": "d1#0", "doc_uri": "adr/sessions.md", "chunk": 0, "metadata": {"title": "Session handling"},
     "text": "Auth session handling: sessions expire after the login timeout of 30 minutes."},
    {"id": "d2#0", "doc_uri": "adr/db.md", "chunk": 0, "metadata": {"title": "Database"},
     "text": "One embedded database per workspace."},
    {"id": "d3#0", "doc_uri": "adr/login.md", "chunk": 0, "metadata": {"title": "Login"},
     "text": "The login form retries on timeout and refactor notes for auth."},
]
TASKS = [
    {"id": "t1#0", "doc_uri": "T-097", "chunk": 0, "metadata": {"title": "T-097"},
     "text": "T-097: fixed a login timeout in the billing webhook with a bounded retry."},
]


def example_stores(**overrides: Any) -> StoreBundle:
    """Stores holding what the example workspace's definitions read."""
    notes = {p.stem: p.read_text() for p in (EXAMPLE / ".codebolt" / "memory").glob("*.md")}
    stores = StoreBundle(
        kv=FakeKV({("default", "users", "u-ada"): {"review_style": "terse", "language": "en"},
                   ("default", "prefs", "theme"): "dark"}),
        json_docs=FakeJsonDocs({"project-config": {"conventions": {"indent": 4}, "name": "shop"}}),
        notes=FakeNotes(notes),
        events=event_log([(1000.0, "tool_error", {"tool": "pytest", "code": 1}),
                          (2000.0, "tool_call", {"tool": "git"}),
                          (3000.0, "tool_error", {"tool": "mypy", "code": 2})]),
        episodic=FakeEpisodic({"t-42": [{"role": "user", "content": f"turn {i}", "ts": 100.0 + i}
                                        for i in range(10)]}),
        files=FakeFiles({"src/auth/login.py": (EXAMPLE / "src" / "auth" / "login.py").read_text()}),
        vectors=FakeVectors({"docs": DOCS, "task-history": TASKS}),
        graph=FakeGraph({"dependents": dependents},
                        edges=[("auth", "depends_on", "session"), ("session", "depends_on", "db"),
                               ("auth", "calls", "log")]),
    )
    for name, value in overrides.items():
        setattr(stores, name, value)
    return stores


def make_request(data: dict[str, Any] | None = None, **changes: Any) -> AssemblyRequest:
    """The example request, with top-level keys replaced."""
    doc = json.loads(json.dumps(REQUEST)) if data is None else data
    doc.update(changes)
    return structure(doc, AssemblyRequest)


def definition(steps: list[Any], **extra: Any) -> dict[str, Any]:
    return {"id": "m", "status": "active", "retrieval": {"pipeline": steps}, **extra}
