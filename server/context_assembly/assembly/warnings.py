"""The `warnings` section, made to fit: warnings of one kind are folded into one item ("3 memory
references do not resolve: a, b, c"), and the section keeps to its own cap
(`budget.warnings_max_tokens`): the item that crosses it is cut with the marker, the rest are left
to the trace. Packing places warnings after constraints (budget.py), so a warning is never the
reason a constraint is dropped.
"""

from __future__ import annotations

from typing import Any

from ..model.context import ContextItem, DroppedItem, preview
from .state import warning_item
from .summary import MIN_CUT_TOKENS, shorten_item
from .tokens import Counter

# how a group of memory calls with one status is told, by status
_STATUS_WORDS = {
    "missing": "memory references do not resolve",
    "skipped": "memories were skipped: the request lacks their variables",
    "timeout": "memories timed out",
    "failed": "memories failed",
    "cancelled": "memories were cancelled",
}


def _group_key(metadata: dict[str, Any]) -> str:
    if metadata.get("status"):
        return f"status:{metadata['status']}"
    return f"kind:{metadata.get('kind', 'other')}"


def fold(warnings: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """One entry per kind that occurs more than once, in order of first occurrence."""
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for message, metadata in warnings:
        groups.setdefault(_group_key(metadata), []).append((message, metadata))
    out: list[tuple[str, dict[str, Any]]] = []
    for key, members in groups.items():
        if len(members) == 1:
            out.append(members[0])
            continue
        references = [str(m["reference"]) for _, m in members if m.get("reference")]
        base = dict(members[0][1])
        base.pop("reference", None)
        if key.startswith("status:") and len(references) == len(members):
            words = _STATUS_WORDS.get(key[len("status:"):], f"memories are {key[len('status:'):]}")
            message = f"{len(members)} {words}: {', '.join(references)}"
            out.append((message, {**base, "folded": len(members), "references": references,
                                  "messages": [m for m, _ in members]}))
        else:
            message = f"{len(members)} {key.split(':', 1)[1]} problems: " + "; ".join(m for m, _ in members)
            out.append((message, {**base, "folded": len(members), "messages": [m for m, _ in members]}))
    return out


def warning_items(warnings: list[tuple[str, dict[str, Any]]], count: Counter, cap: int | None,
                  more: list[ContextItem] | None = None,
                  min_cut: int = MIN_CUT_TOKENS) -> tuple[list[ContextItem], list[DroppedItem]]:
    """The folded warnings as items, then `more` (items memories put in the section), within `cap`
    tokens (None: no cap), and what the cap left out: the cap is the section's, not only the
    server's own warnings (a memory's 3,000-token item went past a cap of 50)."""
    own = [warning_item(i, message, count, **metadata) for i, (message, metadata) in enumerate(fold(warnings))]
    items = own + (more or [])
    if cap is None:
        return items, []
    kept: list[ContextItem] = []
    dropped: list[DroppedItem] = []
    used = 0
    for index, item in enumerate(items):
        if used + item.tokens <= cap:
            kept.append(item)
            used += item.tokens
            continue
        cut = shorten_item(item, cap - used, count, min_cut) if not dropped else None
        if cut is not None:
            kept.append(cut)
            used += cut.tokens
            dropped.append(DroppedItem("shortened", f"warnings_max_tokens of {cap}: cut to {cut.tokens} tokens",
                                       item.id, item.memory_id, item.source, "warnings", item.tokens,
                                       "warnings_max_tokens"))
            continue
        if index < len(own):  # the server's own warning: said whole in the trace
            dropped.append(DroppedItem("cap", f"{item.content} (over warnings_max_tokens of {cap})", item.id, None,
                                       item.source, "warnings", item.tokens, "warnings_max_tokens"))
        else:
            dropped.append(DroppedItem("cap", f"over warnings_max_tokens of {cap}", item.id, item.memory_id,
                                       item.source, "warnings", item.tokens, "warnings_max_tokens",
                                       preview(item.content)))
    return kept, dropped
