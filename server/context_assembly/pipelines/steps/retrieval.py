"""Retrieval steps: each reads one store and appends one item per thing it found.

A key, note, document or file that does not exist adds no item and a warning on the step (the
assembly shows it); a store that is not configured fails the step.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

from ...errors import TimeoutError_
from ...registry.values import as_number
from ...stores.uri import render
from ..context import (
    StepContext,
    StepError,
    StepTimeout,
    choice_param,
    int_param,
    number_param,
    object_param,
    required_text,
    text_param,
    texts_param,
)
from ..items import Item, render_value, turn_key


def _score(value: Any) -> float | None:
    number = as_number(value) if not isinstance(value, str) else None
    return float(number) if number is not None else None


def _timestamp(value: Any) -> float | None:
    if isinstance(value, str):
        return parse_time(value, strict=False)
    return _score(value)


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def render_row(row: dict[str, Any]) -> str:
    """A record as `key: value` lines (graph rows, neighbours)."""
    return "\n".join(f"{key}: {_compact(value)}" for key, value in row.items() if value is not None)


# -- kv / json / markdown / file -------------------------------------------------------------------


def kv_get(params: dict[str, Any], ctx: StepContext) -> None:
    store = ctx.store("kv")
    instance = text_param(params, "instance", "default") or "default"
    namespace = text_param(params, "namespace", "default") or "default"
    keys = texts_param(params, "keys")
    listed = keys is None
    if keys is None:
        lister = getattr(store, "keys", None)
        if lister is None:
            raise StepError("'keys' is required: this KV store cannot list a namespace")
        keys = [str(k) for k in lister(instance, namespace)]
    items = []
    for key in keys:
        ctx.check()
        uri = render("kv", (instance, namespace, key), longest=True)
        # a listed key the caller may not read is left out as a list leaves it out, a named one is said
        if (listed and ctx.readable is not None and not ctx.readable(uri)) or (not listed and ctx.withheld(uri)):
            continue
        value = store.get(instance, namespace, key)
        if value is None:
            ctx.warn(f"{uri} does not exist")
            continue
        items.append(Item.create(render_value(value), uri, key, title=key,
                                 metadata={"instance": instance, "namespace": namespace, "key": key}))
    ctx.add(items)


def json_get(params: dict[str, Any], ctx: StepContext) -> None:
    store = ctx.store("json_docs")
    doc = required_text(params, "doc")
    pointer = text_param(params, "pointer", "") or ""
    uri = render("json", (doc,), pointer=pointer or None)
    if ctx.withheld(uri):
        return
    value = store.get(doc, pointer or None)
    if value is None:
        ctx.warn(f"{uri} does not exist")
        return
    ctx.add([Item.create(render_value(value), uri, pointer, title=doc + pointer,
                         metadata={"doc": doc, "pointer": pointer})])


_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


def note_title(text: str, note: str) -> str:
    match = _HEADING.search(text)
    return match.group(1) if match else note


def markdown_read(params: dict[str, Any], ctx: StepContext) -> None:
    store = ctx.store("notes")
    written = (texts_param(params, "note") or []) + (texts_param(params, "notes") or [])
    # one written `.md` dropped, as a markdown:// URI drops it
    names = list(dict.fromkeys(n[:-3] if n.endswith(".md") else n for n in written))
    if not names:
        raise StepError("'note' or 'notes' is required")
    items = []
    for note in names:
        ctx.check()
        uri = render("markdown", (note,))
        if ctx.withheld(uri):
            continue
        text = store.read(note)
        if text is None:
            ctx.warn(f"{uri} does not exist")
            continue
        items.append(Item.create(text, uri, note, title=note_title(text, note),
                                 metadata={"note": note}))
    ctx.add(items)


def file_read(params: dict[str, Any], ctx: StepContext) -> None:
    store = ctx.store("files")
    path = required_text(params, "path")
    uri = render("file", (path,))
    if ctx.withheld(uri):
        return
    text = store.read(path)
    if text is None:
        ctx.warn(f"{uri} does not exist")
        return
    ctx.add([Item.create(text, uri, path, title=path, metadata={"path": path})])


# -- events and turns ------------------------------------------------------------------------------

_RELATIVE = re.compile(r"^-?\s*(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, strict: bool = True, now: float | None = None) -> float | None:
    """Epoch seconds from an ISO 8601 time, a relative age (-7d, -12h, -30m) or a number."""
    text = text.strip()
    relative = _RELATIVE.match(text)
    if relative:
        age = float(relative.group(1)) * _UNIT_SECONDS[relative.group(2)]
        return (time.time() if now is None else now) - age
    number = as_number(text)
    if number is not None:
        return float(number)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        if strict:
            raise StepError(f"'since' must be an ISO 8601 time or an age such as -7d, got {text!r}") from None
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _event_item(event: dict[str, Any], instance: str) -> Item:
    event_type = str(event.get("event_type") or "event")
    payload = event.get("payload")
    if isinstance(payload, dict):
        body = ", ".join(f"{k}={_compact(v)}" for k, v in payload.items())
    else:
        body = _compact(payload) if payload is not None else ""
    event_id = event.get("id")
    return Item.create(f"{event_type}: {body}" if body else event_type, render("log", (instance,)),
                       event_id if event_id is not None else body, title=event_type,
                       timestamp=_timestamp(event.get("ts")),
                       metadata={"event_id": event_id, "event_type": event_type, "payload": payload})


def log_search(params: dict[str, Any], ctx: StepContext) -> None:
    store = ctx.store("events")
    instance = text_param(params, "instance", "default") or "default"
    named = texts_param(params, "eventType")
    since_text = text_param(params, "since")
    since = parse_time(since_text) if since_text else None
    fields = object_param(params, "fields")
    limit = int_param(params, "limit", 20, minimum=1) or 20
    ctx.check()
    if ctx.withheld(render("log", (instance,))):
        ctx.add([])
        return
    # the store filters by payload field (indexed, then exactly): the newest `limit` that match,
    # however many newer events do not (a filter here over a fetched window missed older matches)
    events = store.search(instance, event_type=named or None, since=since, fields=fields or None, limit=limit)
    ctx.add([_event_item(e, instance) for e in events if isinstance(e, dict)])


def episodic_recent(params: dict[str, Any], ctx: StepContext) -> None:
    store = ctx.store("episodic")
    thread_id = text_param(params, "thread_id") or ctx.thread_id
    if not thread_id:
        raise StepError("no thread: pass 'thread_id' or send the request with a thread")
    limit = int_param(params, "limit", 10, minimum=1) or 10
    if ctx.withheld(render("episodic", (thread_id,))):
        ctx.add([])
        return
    turns = store.recent(thread_id, limit)
    items = []
    for index, turn in enumerate(turns[-limit:]):
        if not isinstance(turn, dict):
            continue
        role = str(turn.get("role") or "turn")
        content = render_value(turn.get("content", ""))
        key = turn_key(turn, f"{turn.get('ts')}|{role}|{content}")
        items.append(Item.create(f"{role}: {content}", render("episodic", (thread_id,)), key, title=role,
                                 timestamp=_timestamp(turn.get("ts")),
                                 metadata={"role": role, "thread_id": thread_id, "turn": index}))
    ctx.add(items)


# -- vectors and the graph -------------------------------------------------------------------------


def _hit_item(hit: dict[str, Any], collection: str) -> Item:
    metadata = dict(hit.get("metadata") or {})
    doc_uri = hit.get("doc_uri")
    chunk = hit.get("chunk")
    own = hit.get("source")
    source = own if isinstance(own, str) and own.startswith("vector://") else \
        render("vector", (collection, str(doc_uri)) if doc_uri else (collection,))
    if isinstance(own, str) and own != source:
        metadata.setdefault("source", own)
    metadata.update({k: v for k, v in (("doc_uri", doc_uri), ("chunk", chunk), ("hit_id", hit.get("id")))
                     if v is not None})
    title = metadata.get("title") if isinstance(metadata.get("title"), str) else doc_uri
    key = hit.get("id") if hit.get("id") is not None else f"{doc_uri}#{chunk}"
    return Item.create(render_value(hit.get("text", "")), source, key, title=title,
                       score=_score(hit.get("score")), timestamp=_timestamp(metadata.get("timestamp")),
                       metadata=metadata)


def vector_search(params: dict[str, Any], ctx: StepContext) -> None:
    store = ctx.store("vectors")
    collection = required_text(params, "collection")
    query = text_param(params, "query") or ctx.query
    top_k = int_param(params, "topK", 5, minimum=1) or 5
    min_score = number_param(params, "minScore", 0.5)
    mode = choice_param(params, "mode", ("vector", "hybrid"), "vector")
    if not query.strip():
        ctx.warn("the query is empty: nothing to search for")
        ctx.add([])
        return
    admit = ctx.admit()  # a restricted caller's hits are ranked among what it may read
    hits = store.search(collection, query, top_k=top_k, min_score=min_score or 0.0, mode=mode,
                        **({"admit": admit} if admit is not None else {}))
    ctx.add([_hit_item(hit, collection) for hit in hits[:top_k] if isinstance(hit, dict)])


def row_item(row: dict[str, Any], source: str, key: Any, view: str) -> Item:
    title = next((row[k] for k in ("title", "name", "id") if isinstance(row.get(k), str)), view)
    metadata = dict(row)
    if "id" in row and "node_id" not in row:
        metadata["node_id"] = row["id"]
    return Item.create(render_row(row), source, key, title=title, score=_score(row.get("score")),
                       timestamp=_timestamp(row.get("timestamp")), metadata=metadata)


def view_rows(ctx: StepContext, view: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    remaining = None if ctx.deadline is None else max(1, int((ctx.deadline - time.monotonic()) * 1000))
    try:
        rows = ctx.store("graph").run_view(view, params, timeout_ms=remaining)
    except TimeoutError_ as exc:  # the database stopped the query: at the deadline, or at its own timeout
        raise StepTimeout(f"the graph database stopped the query ({exc.message})") from None
    return [r for r in rows if isinstance(r, dict)]


def graph_view_read(params: dict[str, Any], ctx: StepContext) -> None:
    view = required_text(params, "view")
    bound = object_param(params, "params")
    source = render("graph", (view,))
    if ctx.withheld(source):
        ctx.add([])
        return
    ctx.add([row_item(row, source, row_key(row), view) for row in view_rows(ctx, view, bound)])


def row_key(row: dict[str, Any]) -> Any:
    """A row's own id when it has one, else its content (columns in sorted order): the same row
    gets the same item id in every run, and different rows never share one (by position, the
    first row of every result of a view did, whatever its parameters)."""
    own = row.get("id")
    if isinstance(own, str | int) and not isinstance(own, bool):
        return own
    return "row:" + json.dumps(row, sort_keys=True, ensure_ascii=False, default=str)
