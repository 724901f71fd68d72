"""The step implementations, by step type: what the runner calls for each `registry.steps` name.

Each is `(params, ctx) -> None` and works by changing `ctx.items` / `ctx.query`. Parameters arrive
with `${...}` templates filled and registry defaults applied, except the LAZY ones, which the step
fills itself (per item, or nested steps that must see the state at the time they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..context import StepContext
from .aggregation import group_by, merge, reduce_latest
from .control import conditional, early_exit
from .expansion import graph_neighbor_expand, graph_view_expand
from .filtering import deduplicate, filter_items
from .input import derive_query, rewrite_query
from .ranking import rank, score
from .retrieval import (
    episodic_recent,
    file_read,
    graph_view_read,
    json_get,
    kv_get,
    log_search,
    markdown_read,
    vector_search,
)
from .transform import annotate, format_items, summarize

StepFunction = Callable[[dict[str, Any], StepContext], None]

STEPS: dict[str, StepFunction] = {
    "derive_query": derive_query,
    "rewrite_query": rewrite_query,
    "vector_search": vector_search,
    "graph_view_read": graph_view_read,
    "kv_get": kv_get,
    "json_get": json_get,
    "markdown_read": markdown_read,
    "log_search": log_search,
    "episodic_recent": episodic_recent,
    "file_read": file_read,
    "graph_neighbor_expand": graph_neighbor_expand,
    "graph_view_expand": graph_view_expand,
    "filter": filter_items,
    "deduplicate": deduplicate,
    "group_by": group_by,
    "reduce_latest": reduce_latest,
    "merge": merge,
    "rank": rank,
    "score": score,
    "summarize": summarize,
    "format": format_items,
    "annotate": annotate,
    "conditional": conditional,
    "early_exit": early_exit,
}

# step type -> parameters the runner leaves unfilled (the step fills them when it can)
LAZY_PARAMS: dict[str, frozenset[str]] = {
    "graph_view_expand": frozenset({"params"}),  # ${item.…} per item
    "annotate": frozenset({"fields"}),  # ${item.…} per item
    "conditional": frozenset({"then_steps", "else_steps"}),  # filled when the branch runs
}

__all__ = ["LAZY_PARAMS", "STEPS", "StepFunction"]
