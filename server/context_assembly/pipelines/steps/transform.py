"""Transform steps: condense items, render their content, annotate their provenance."""

from __future__ import annotations

import json
from typing import Any

from ...registry.steps import FORMATS
from ..context import StepContext, StepError, choice_param, int_param, object_param
from ..items import Item, item_id
from ..templates import render_fields

_MAX_TITLES = 10  # titles named in a summary line


def summarize(params: dict[str, Any], ctx: StepContext) -> None:
    """Keep the first `max_items` and add one line naming the rest (no model involved)."""
    limit = int_param(params, "max_items", minimum=1)
    if limit is None:
        raise StepError("'max_items' is required")
    if len(ctx.items) <= limit:
        return
    kept, rest = ctx.items[:limit], ctx.items[limit:]
    titles = [i.title or i.source for i in rest]
    named = ", ".join(titles[:_MAX_TITLES]) + (", …" if len(titles) > _MAX_TITLES else "")
    sources = list(dict.fromkeys(i.source for i in rest))
    summary = Item(content=f"… and {len(rest)} more: {named}", source=sources[0], title="more",
                   metadata={"summary": True, "omitted": len(rest), "items": [i.id for i in rest],
                             "sources": sources},
                   id=item_id(sources[0], "summary:" + ",".join(i.id for i in rest)), origin=ctx.step)
    ctx.items = [*kept, summary]


def _indent(text: str, prefix: str) -> str:
    """Continuation lines line up under the first line's text."""
    return text.replace("\n", "\n" + " " * len(prefix))


def render(item: Item, style: str, position: int) -> str:
    if style == "bullet_list":
        return "- " + _indent(item.content, "- ")
    if style == "numbered":
        marker = f"{position}. "
        return marker + _indent(item.content, marker)
    if style == "json":
        body = {"title": item.title, "content": item.content, "source": item.source, "score": item.score,
                "metadata": item.metadata}
        return json.dumps(body, ensure_ascii=False, default=str)
    if style == "markdown":
        return f"### {item.title}\n\n{item.content}" if item.title else item.content
    return item.content  # prose


def format_items(params: dict[str, Any], ctx: StepContext) -> None:
    template = params.get("template")
    if template is not None and not isinstance(template, str):
        raise StepError("'template' must be a string")
    style = choice_param(params, "format", FORMATS, "bullet_list")
    for position, item in enumerate(ctx.items, start=1):
        if item.raw_content is None:
            item.raw_content = item.content
        item.content = render_fields(template, item) if template is not None else render(item, style, position)
        item.metadata["format"] = "template" if template is not None else style


def annotate(params: dict[str, Any], ctx: StepContext) -> None:
    raw = params.get("fields")  # left unfilled by the runner: ${item.…} differs per item
    if raw is not None and not isinstance(raw, dict):
        raise StepError("'fields' must be an object")
    provenance = params.get("provenance", True)
    if not isinstance(provenance, bool):
        raise StepError("'provenance' must be true or false")
    for item in ctx.items:
        item.metadata.update(object_param({"fields": ctx.fill(raw or {}, item)}, "fields"))
        if provenance:
            store = item.source.split("://", 1)[0] if "://" in item.source else None
            item.metadata["provenance"] = {"memory": ctx.memory_id, "step": item.origin or ctx.step,
                                           "store": store, "source": item.source}
