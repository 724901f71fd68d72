"""`memory export`: a workspace's stores as one import document (`stores.importer`), any backend.

Importing the export into another workspace (say, one on PostgreSQL) gives the same stores: KV,
JSON documents, working memory, blobs, markdown notes, vector documents (re-embedded with the
collection's model, named in `collections`), the graph's nodes then edges, episodic threads
(`threads`) and the event log (`events`, appended only into an instance that has no events yet,
so importing twice does not duplicate them). Workspace files (`file://`) are the checkout itself
and are not exported.
"""

from __future__ import annotations

import base64
from typing import Any

from attrs import evolve

from ..limits import applied, current
from .memory import MemoryRouter
from .uri import render

PAGE = 1000  # turns or events read at a time


def export_memory(memory: MemoryRouter) -> dict[str, Any]:
    writes: list[dict[str, Any]] = []
    writes += [{"uri": render("kv", (e.instance, e.namespace, e.key)), "value": e.value} for e in memory.kv.list()]
    for doc in memory.json_docs.list():
        writes.append({"uri": render("json", (doc.name,)), "value": memory.json_docs.get(doc.name)[1]})
    for entry in memory.working.entries():
        working = memory.working.get(entry.thread_id, entry.key)
        if working is not None:
            writes.append({"uri": render("working", (entry.thread_id, entry.key)), "value": working.value})
    for blob in memory.blobs.list():
        data = memory.blobs.get(blob.bucket, blob.key)
        if data is not None:
            writes.append({"uri": render("blob", (blob.bucket, blob.key)), "value": base64.b64encode(data).decode()})
    for note in memory.notes.list():
        text = memory.notes.read(note.name)
        if text is not None:
            writes.append({"uri": render("markdown", (note.name,)), "value": text})
    document: dict[str, Any] = {"description": f"memory exported from the {memory.backend} stores"}
    collections: dict[str, Any] = {}
    if memory.vectors is not None:
        for collection in memory.vectors.list():
            name = collection["collection"]
            settings = memory.vectors.settings(name)  # how it chunks and searches, not only its model
            collections[name] = {"embedding_model": settings.embedding_model, "chunk_size": settings.chunk_size,
                                 "chunk_overlap": settings.chunk_overlap, "search_mode": settings.search_mode}
            for listed in memory.vectors.list(name):
                stored = memory.vectors.get(name, listed["doc_uri"])
                if stored is not None:
                    writes.append({"uri": render("vector", (name, stored["doc_uri"])),
                                   "value": {"text": stored["text"], "metadata": stored["metadata"]}})
    if memory.graph is not None:
        graph = memory.graph.dump()
        for node in graph["nodes"]:
            writes.append({"uri": render("graph", (node["instance"], "node", node["id"])),
                           "value": {"kind": node["kind"], "name": node["name"], "attributes": node["attributes"]}})
        for edge in graph["edges"]:
            writes.append({"uri": render("graph", (edge["instance"], "edge", edge["id"])),
                           "value": {"kind": edge["kind"], "from": edge["from"], "to": edge["to"],
                                     "attributes": edge["attributes"]}})
    # every turn and event, however many: a read's limit (limits.log_limit) bounds a request, not
    # the export of the whole store. Read by pages back from the newest at the first read, so what
    # others append meanwhile never pushes the oldest out (a count taken first, then that many of
    # the newest, lost them)
    with applied(evolve(current(), log_limit=max(PAGE, current().log_limit))):
        threads = {t.name: [{k: v for k, v in turn.items() if k != "seq"} for turn in _all_turns(memory, t.name)]
                   for t in memory.episodic.threads()}
        events = {i.name: [{"event_type": e["event_type"], "payload": e["payload"], "ts": e["ts"]}
                           for e in _all_events(memory, i.name)]
                  for i in memory.events.instances()}
    document.update({"collections": collections, "writes": writes, "threads": threads, "events": events})
    return document


def _all_turns(memory: Any, thread: str) -> list[dict[str, Any]]:
    """A thread's turns, oldest first."""
    turns: list[dict[str, Any]] = []
    page = memory.episodic.recent(thread, PAGE)
    while page:
        turns[:0] = page
        if len(page) < PAGE:
            break
        page = memory.episodic.recent(thread, PAGE, before=page[0]["seq"])
    return turns


def _all_events(memory: Any, instance: str) -> list[dict[str, Any]]:
    """A log's events, oldest first."""
    events: list[dict[str, Any]] = []
    page = memory.events.search(instance, limit=PAGE)
    while page:
        events += page
        if len(page) < PAGE:
            break
        page = memory.events.search(instance, limit=PAGE, before=page[-1]["id"])
    return events[::-1]
