"""Filter steps: keep the items a condition holds for; drop repeats.

`where` is the rule condition language (SPEC §4.2, §4.6) over item fields (`score`, `content`,
`source`, `title`, `timestamp`, `metadata.<k>`), with the request's variables readable too.
Conditions compile once per step; a malformed one fails the step instead of silently keeping or
dropping everything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...model.converter import structure_condition
from ...registry.values import MISSING
from ...rules.compile import Broken, CompiledConditions, Group, Leaf, Node, compile_conditions
from ..context import StepContext, StepError, texts_param
from ..items import Item
from ..templates import is_request_key


def compile_where(raw: Any, name: str, ctx: StepContext) -> CompiledConditions:
    """One condition or a list (AND), compiled; StepError when any part is malformed.

    The request variables it names go in the run's `variables_used` (traces, cache keys) here,
    once, whatever it answers and whichever items it is asked about: as for rules, what a
    condition reads does not depend on how far its evaluation got."""
    if raw is None:
        raise StepError(f"'{name}' is required")
    conditions = raw if isinstance(raw, list) else [raw]
    compiled = compile_conditions([structure_condition(c) for c in conditions])
    if compiled.errors:
        raise StepError(f"invalid condition in '{name}': " + "; ".join(compiled.errors))
    ctx.variables_used.update(key for key in compiled.keys if is_request_key(key))
    return compiled


def _holds(node: Node, lookup: Mapping[str, Any]) -> bool:
    if isinstance(node, Leaf):
        return node.operator.answer(node.predicate, lookup.get(node.key, MISSING))
    if isinstance(node, Group):
        if node.kind == "any":
            return any(_holds(child, lookup) for child in node.children)
        if node.kind == "all":
            return all(_holds(child, lookup) for child in node.children)
        return not _holds(node.children[0], lookup)
    assert isinstance(node, Broken)
    return False


def holds(compiled: CompiledConditions, lookup: Mapping[str, Any]) -> bool:
    return not compiled.errors and all(_holds(node, lookup) for node in compiled.nodes)


def item_lookup(item: Item, base: Mapping[str, Any]) -> dict[str, Any]:
    """The request's variables overlaid with the item's fields."""
    return {**base, **item.fields()}


def filter_items(params: dict[str, Any], ctx: StepContext) -> None:
    compiled = compile_where(params.get("where"), "where", ctx)
    base = dict(ctx.lookup)
    ctx.items = [item for item in ctx.items if holds(compiled, item_lookup(item, base))]


def key_part(value: Any) -> Any:
    if value is MISSING:
        return MISSING
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def deduplicate(params: dict[str, Any], ctx: StepContext) -> None:
    by = texts_param(params, "by") or ["content"]
    seen: set[tuple[Any, ...]] = set()
    kept = []
    for item in ctx.items:
        key = tuple(key_part(item.get(name)) for name in by)
        if all(part is MISSING for part in key):
            kept.append(item)  # nothing to compare: never a duplicate
            continue
        if key not in seen:
            seen.add(key)
            kept.append(item)
    ctx.items = kept
