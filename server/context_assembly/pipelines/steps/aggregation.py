"""Aggregation steps: group items, keep the newest per key, merge earlier steps' outputs."""

from __future__ import annotations

import itertools
import json
from typing import Any

from ...registry.values import MISSING, as_number
from ..context import StepContext, StepError, choice_param, required_text, text_param, texts_param
from ..items import Item, item_id, item_sources
from .filtering import key_part
from .retrieval import parse_time


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def group_by(params: dict[str, Any], ctx: StepContext) -> None:
    name = required_text(params, "field")
    groups: dict[Any, list[Item]] = {}
    values: dict[Any, Any] = {}
    for item in ctx.items:
        value = item.get(name)
        key = key_part(value)
        groups.setdefault(key, []).append(item)
        values.setdefault(key, value)
    ctx.items = [_group_item(name, values[key], members) for key, members in groups.items()]


def _group_item(name: str, value: Any, members: list[Item]) -> Item:
    label = "(none)" if value is MISSING else _label(value)
    scores = [m.score for m in members if m.score is not None]
    times = [m.timestamp for m in members if m.timestamp is not None]
    # every source each member came from (grouped twice: the inner groups' too), so that the group is
    # shown only to a caller who may read them all
    sources = list(dict.fromkeys(s for m in members for s in item_sources(m.source, m.metadata)))
    metadata = {"group_field": name, "group": None if value is MISSING else value, "count": len(members),
                "sources": sources, "items": [m.id for m in members]}
    return Item(content="\n".join(m.content for m in members), source=sources[0], title=label,
                score=max(scores) if scores else None, timestamp=max(times) if times else None,
                metadata=metadata, id=item_id(sources[0], f"group:{name}={label}"), origin=members[0].origin)


def _time_of(item: Item, time_field: str) -> float | None:
    value = item.get(time_field)
    if value is MISSING:
        return item.timestamp
    number = as_number(value)
    if number is not None:
        return float(number)
    if isinstance(value, str):  # ISO times in metadata (updated_at)
        return parse_time(value, strict=False)
    return item.timestamp


def reduce_latest(params: dict[str, Any], ctx: StepContext) -> None:
    by = required_text(params, "by")
    time_field = text_param(params, "time_field", "metadata.timestamp") or "metadata.timestamp"
    newest: dict[Any, tuple[float, int]] = {}  # key -> (time, index of the kept item)
    keyed = []
    for index, item in enumerate(ctx.items):
        key = key_part(item.get(by))
        keyed.append(key)
        if key is MISSING:
            continue
        when = _time_of(item, time_field)
        moment = float("-inf") if when is None else when
        if key not in newest or moment >= newest[key][0]:  # ties: the later item wins
            newest[key] = (moment, index)
    kept = {index for _, index in newest.values()}
    ctx.items = [item for index, item in enumerate(ctx.items) if keyed[index] is MISSING or index in kept]


def _partitions(ctx: StepContext, inputs: list[str] | None) -> list[list[Item]]:
    if inputs is not None:
        unknown = [name for name in inputs if name not in ctx.outputs]
        if unknown:
            known = ", ".join(sorted(ctx.outputs)) or "none"
            raise StepError(f"merge: no earlier step has the alias {', '.join(unknown)} (known: {known})")
        return [ctx.outputs[name] for name in inputs]
    # default: the current items, one list per step that produced them (in first-seen order)
    groups: dict[str, list[Item]] = {}
    for item in ctx.items:
        groups.setdefault(item.origin, []).append(item)
    return list(groups.values())


def merge(params: dict[str, Any], ctx: StepContext) -> None:
    inputs = texts_param(params, "inputs")
    strategy = choice_param(params, "strategy", ("concat", "interleave", "unique"), "concat")
    parts = _partitions(ctx, inputs)
    if strategy == "interleave":
        merged = [i for row in itertools.zip_longest(*parts) for i in row if i is not None]
    else:
        merged = [item for part in parts for item in part]
    if strategy == "unique":
        first: dict[str, Item] = {}
        for item in merged:
            first.setdefault(item.content, item)  # the first copy wins
        merged = list(first.values())
    ctx.items = [item.copy() for item in merged]
