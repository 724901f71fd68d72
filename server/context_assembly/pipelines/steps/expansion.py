"""Expansion steps: add what the knowledge graph relates to the items found so far."""

from __future__ import annotations

from typing import Any

from ...stores.uri import render
from ..context import StepContext, StepError, int_param, object_param, required_text, texts_param
from ..items import Item
from .retrieval import render_row, row_item, row_key, view_rows

NODE_FIELDS = ("node_id", "id")  # where an item names its graph node (metadata)


def node_ids(items: list[Item]) -> list[str]:
    ids: dict[str, None] = {}
    for item in items:
        for name in NODE_FIELDS:
            value = item.metadata.get(name)
            if isinstance(value, str | int) and not isinstance(value, bool):
                ids.setdefault(str(value), None)
                break
    return list(ids)


def _neighbor_item(node: dict[str, Any], instance: str) -> Item:
    node_id = str(node.get("id", ""))
    shown = {k: v for k, v in node.items() if k not in ("id", "attributes")}
    attributes = node.get("attributes")
    if isinstance(attributes, dict):
        shown.update(attributes)
    title = node.get("name") if isinstance(node.get("name"), str) else node_id
    metadata = {**node, "node_id": node_id}
    return Item.create(render_row(shown) or node_id, render("graph", (instance, "node", node_id)), node_id,
                       title=title, metadata=metadata)


def graph_neighbor_expand(params: dict[str, Any], ctx: StepContext) -> None:
    graph = ctx.store("graph")
    depth = int_param(params, "depth", 1, minimum=1) or 1
    edge_kinds = texts_param(params, "edge_kinds")
    limit = int_param(params, "limit", 20, minimum=1) or 20
    instance = "default"
    seeds = node_ids(ctx.items)
    if not seeds:
        ctx.warn("no item names a graph node (metadata.node_id or metadata.id): nothing to expand")
        ctx.add([])
        return
    readable = ctx.readable
    if readable is not None:  # a walk never starts at, crosses or reaches what the caller may not read
        seeds = [s for s in seeds if readable(render("graph", (instance, "node", s)))]
    known = set(seeds)
    added = []
    walk = {} if readable is None else {"admit": readable}
    for node in graph.neighbors(instance, seeds, depth=depth, edge_kinds=edge_kinds, limit=limit, **walk):
        if not isinstance(node, dict) or node.get("id") is None or str(node["id"]) in known:
            continue
        known.add(str(node["id"]))
        added.append(_neighbor_item(node, instance))
    ctx.add(added[:limit])


def graph_view_expand(params: dict[str, Any], ctx: StepContext) -> None:
    view = required_text(params, "view")
    raw = params.get("params")  # left unfilled by the runner: ${item.…} differs per item
    if raw is not None and not isinstance(raw, dict):
        raise StepError("'params' must be an object")
    source = render("graph", (view,))
    if ctx.withheld(source):
        ctx.add([])
        return
    seen = {item.id for item in ctx.items}
    added = []
    for item in list(ctx.items):
        ctx.check()
        bound = object_param({"params": ctx.fill(raw or {}, item)}, "params")
        for row in view_rows(ctx, view, bound):
            # keyed by content, not position: a row two items both reach is added once
            new = row_item(row, source, row_key(row), view)
            if new.id not in seen:
                seen.add(new.id)
                new.metadata.setdefault("expanded_from", item.id)
                added.append(new)
    ctx.add(added)
