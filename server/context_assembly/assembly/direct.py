"""Reading a store URI used directly as a memory reference (not through a definition).

`@kv://user-preferences`, `markdown://style-guide` or `episodic://t-42` in a request or a rule
becomes items without a pipeline: the value rendered as text, one item per turn, event, hit or
row. A vector collection is searched with the task text, since that is the turn's question.
"""

from __future__ import annotations

from typing import Any

from ..pipelines.items import Item, Readable, admitting, may_read_item, render_value, turn_key
from ..stores.uri import DEFAULT, parse_uri, render

VECTOR_TOP_K = 5


class Miss(Exception):
    """The reference resolves to nothing (a deleted key, a missing note): a warning, not a failure."""


def _turn(uri: str, index: int, turn: Any) -> Item:
    if isinstance(turn, dict):
        content = f"{turn.get('role', 'turn')}: {render_value(turn.get('content', ''))}"
        return Item.create(content, uri, turn_key(turn, index), timestamp=turn.get("ts"),
                           metadata={"role": turn.get("role")})
    return Item.create(render_value(turn), uri, index)


def _event(uri: str, event: Any) -> Item:
    if isinstance(event, dict):
        payload = render_value(event.get("payload", {}))
        return Item.create(f"{event.get('event_type', 'event')}: {payload}", uri, event.get("id"),
                           timestamp=event.get("ts"), metadata={"event_type": event.get("event_type")})
    return Item.create(render_value(event), uri, id(event))


def read_items(memory: Any, uri: str, query: str, min_score: float = 0.0,
               readable: Readable | None = None) -> list[Item]:
    """Items for one store URI; raises Miss when there is nothing there. `min_score`: the floor of a
    collection searched with the task text; `readable`: a restricted caller's read patterns (its top
    hits are of what they cover)."""
    parsed = parse_uri(uri)
    if parsed.scheme == "vector" and len(parsed.parts) == 1:
        if memory.vectors is None:
            raise Miss("the vector store is not configured")
        # a restricted caller's hits are ranked among what it may read
        admit = admitting(readable)
        hits = memory.vectors.search(parsed.parts[0], query, top_k=VECTOR_TOP_K, min_score=min_score,
                                     **({"admit": admit} if admit is not None else {})) if query else []
        return [Item.create(h["text"], h.get("source", uri), h.get("id"), score=h.get("score"),
                            metadata=dict(h.get("metadata") or {})) for h in hits]
    if parsed.scheme == "graph" and len(parsed.parts) == 1:
        if memory.graph is None:
            raise Miss("the knowledge graph is not configured")
        rows = memory.graph.run_view(parsed.parts[0], {})
        return [Item.create(_row_text(row), uri, i, metadata={"row": row}) for i, row in enumerate(rows)]
    result = memory.read(uri)
    if parsed.scheme == "kv" and not (result["exists"] and (readable is None or readable(uri))):
        # a key the caller may not read is absent to it: which of key and namespace answers, and
        # whether anything does, must not tell it the key exists
        namespace = [i for i in _kv_namespace(memory, uri, parsed.parts) if may_read_item(readable, i.source, None)]
        if namespace:
            return namespace
        raise Miss(f"'{uri}' does not exist")
    if not result["exists"]:
        raise Miss(f"'{uri}' does not exist")
    value = result["value"]
    if parsed.scheme == "episodic":  # the thread, whatever `?limit`: two references to it are one thread
        thread = render("episodic", parsed.parts)
        return [_turn(thread, i, turn) for i, turn in enumerate(value or [])]
    if parsed.scheme == "log" and isinstance(value, list):
        return [_event(uri, event) for event in value]
    title = parsed.parts[-1] if parsed.parts else uri
    return [Item.create(render_value(value), uri, 0, title=title)]


def _kv_namespace(memory: Any, uri: str, parts: tuple[str, ...]) -> list[Item]:
    """Seed 002: `kv://<namespace>` (or `kv://<instance>/<namespace>`) that names no key loads the whole
    namespace, one item per key; a key of that name wins."""
    written = uri[len("kv://"):].count("/") + 1
    if written == 1:
        instance, namespace = DEFAULT, parts[2]
    elif written == 2:
        instance, namespace = parts[1], parts[2]
    else:
        return []
    entries = memory.kv.list(instance, namespace)
    return [Item.create(f"{e.key}: {render_value(e.value)}", _entry_uri(instance, namespace, e.key), e.key,
                        title=e.key, metadata={"namespace": namespace, "key": e.key}) for e in entries if e.key]


def _entry_uri(instance: str, namespace: str, key: str) -> str:
    """`kv://<namespace>/<key>` (the instance written when not the default), each part encoded."""
    full = render("kv", (instance, namespace, key), longest=True)
    return full.replace(f"kv://{DEFAULT}/", "kv://", 1) if instance == DEFAULT else full


def _row_text(row: Any) -> str:
    if isinstance(row, dict):
        return "\n".join(f"{key}: {render_value(value)}" for key, value in row.items())
    return render_value(row)
