"""Ranking steps: order items (and keep the top K), or recompute their scores from weighted fields."""

from __future__ import annotations

from typing import Any

from ...registry.values import MISSING, as_number
from ..context import StepContext, StepError, choice_param, int_param, object_param
from ..items import Item
from .input import keywords

STRATEGIES = ("score_desc", "recency", "relevance")
RECENCY = "recency"  # computed: newest item 1.0, oldest 0.0
RELEVANCE = "relevance"  # computed: share of the query's keywords the item contains


def relevance(item: Item, query_words: set[str]) -> float:
    if not query_words:
        return 0.0
    words = set(keywords(f"{item.title or ''} {item.content}"))
    return len(words & query_words) / len(query_words)


def recency(items: list[Item]) -> dict[str, float]:
    """Each item's timestamp scaled to 0..1 over the items (no timestamp: 0)."""
    times = [i.timestamp for i in items if i.timestamp is not None]
    if not times:
        return {}
    low, high = min(times), max(times)
    span = high - low
    return {i.id: (1.0 if span == 0 else (i.timestamp - low) / span) for i in items if i.timestamp is not None}


def _score_key(item: Item) -> tuple[bool, float]:
    return (item.score is None, -(item.score or 0.0))


def rank(params: dict[str, Any], ctx: StepContext) -> None:
    strategy = choice_param(params, "strategy", STRATEGIES, "score_desc")
    top_k = int_param(params, "topK", minimum=1)
    items = list(ctx.items)
    if strategy == "score_desc":
        items.sort(key=_score_key)
    elif strategy == "recency":
        items.sort(key=lambda i: (i.timestamp is None, -(i.timestamp or 0.0)))
    else:
        query_words = set(keywords(ctx.query))
        if not query_words:
            ctx.warn("relevance ranking without a query: ordered by score")
        for item in items:
            item.metadata[RELEVANCE] = round(relevance(item, query_words), 4)
        items.sort(key=lambda i: (-i.metadata[RELEVANCE], *_score_key(i)))
    ctx.items = items[:top_k] if top_k is not None else items


def _weights(params: dict[str, Any]) -> dict[str, float]:
    weights = {}
    for name, weight in object_param(params, "weights").items():
        number = as_number(weight)
        if number is None:
            raise StepError(f"weight of '{name}' must be a number, got {weight!r}")
        weights[name] = float(number)
    if not weights:
        raise StepError("'weights' is required: {field: weight}")
    return weights


def score(params: dict[str, Any], ctx: StepContext) -> None:
    weights = _weights(params)
    recent = recency(ctx.items) if RECENCY in weights else {}
    query_words = set(keywords(ctx.query)) if RELEVANCE in weights else set()
    for item in ctx.items:
        total = 0.0
        for name, weight in weights.items():
            total += weight * _field_value(item, name, recent, query_words)
        item.score = round(total, 6)


def _field_value(item: Item, name: str, recent: dict[str, float], query_words: set[str]) -> float:
    value = item.get(name)
    if value is MISSING and name == RECENCY:
        return recent.get(item.id, 0.0)
    if value is MISSING and name == RELEVANCE:
        return relevance(item, query_words)
    number = as_number(value) if value is not MISSING else None
    return float(number) if number is not None else 0.0
