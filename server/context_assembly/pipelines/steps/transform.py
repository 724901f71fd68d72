"""Transform steps: condense items, render their content, annotate their provenance."""

from __future__ import annotations

import json
import math
from typing import Any

from ...registry.steps import FORMATS
from ...registry.variables import INPUT_TEXT
from ...shortening import extractive, shorten
from ..context import StepContext, StepError, choice_param, int_param, object_param
from ..items import Item, item_id, item_sources
from ..templates import fill_parts, render_fields
from . import self_filled

_MAX_TITLES = 10  # titles named in a summary line


def estimate(text: str) -> int:
    """The seeds' ceil(chars / 4): a step does not know the assembly's tokenizer."""
    return math.ceil(len(text) / 4)


def summarize(params: dict[str, Any], ctx: StepContext) -> None:
    """`max_tokens`: each longer item becomes its extractive summary (the lead sentence plus the
    sentences sharing most words with the query). `max_items`: keep the first ones and add one line
    naming the rest. No model involved; at least one of the two is required."""
    limit = int_param(params, "max_items", minimum=1)
    max_tokens = int_param(params, "max_tokens", minimum=1)
    if limit is None and max_tokens is None:
        raise StepError("'max_items' or 'max_tokens' is required")
    if max_tokens is not None:
        focus = ctx.query
        if not focus:  # no query yet: the task text says what matters (a read like any other)
            ctx.variables_used.add(INPUT_TEXT)
            focus = str(ctx.lookup.get(INPUT_TEXT) or "")
        for item in ctx.items:
            _summarise(item, max_tokens, focus)
    if limit is None or len(ctx.items) <= limit:
        return
    kept, rest = ctx.items[:limit], ctx.items[limit:]
    titles = [i.title or i.source for i in rest]
    named = ", ".join(titles[:_MAX_TITLES]) + (", …" if len(titles) > _MAX_TITLES else "")
    sources = list(dict.fromkeys(s for i in rest for s in item_sources(i.source, i.metadata)))
    summary = Item(content=f"… and {len(rest)} more: {named}", source=sources[0], title="more",
                   metadata={"summary": True, "omitted": len(rest), "items": [i.id for i in rest],
                             "sources": sources},
                   id=item_id(sources[0], "summary:" + ",".join(i.id for i in rest)), origin=ctx.step)
    ctx.items = [*kept, summary]


def _summarise(item: Item, max_tokens: int, query: str) -> None:
    tokens = estimate(item.content)
    if tokens <= max_tokens:
        return
    summary = extractive(item.content, query, max_tokens, estimate)
    cut = None if summary else shorten(item.content, max_tokens, estimate)  # no sentences worth picking
    if summary or cut:
        if item.raw_content is None:
            item.raw_content = item.content
        item.content = summary or cut or ""
        item.metadata.update({"summarised" if summary else "truncated": True, "original_tokens": tokens})


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


@self_filled("template")
def format_items(params: dict[str, Any], ctx: StepContext) -> None:
    template = params.get("template")  # its ${...} unfilled: filled here, apart from its {{field}}s
    if template is not None and not isinstance(template, str):
        raise StepError("'template' must be a string")
    style = choice_param(params, "format", FORMATS, "bullet_list")
    # filled once, before the items (an unknown variable fails even with none); filled values are
    # kept apart so that `{{...}}` in them is never rendered per item
    parts = fill_parts(template, ctx.variables()) if template is not None else None
    for position, item in enumerate(ctx.items, start=1):
        if item.raw_content is None:
            item.raw_content = item.content
        item.content = render_fields(parts, item) if parts is not None else render(item, style, position)
        item.metadata["format"] = "template" if template is not None else style


RESERVED_FIELDS = frozenset({"sources", "source"})


def annotate(params: dict[str, Any], ctx: StepContext) -> None:
    raw = params.get("fields")  # left unfilled by the runner: ${item.…} differs per item
    if raw is not None and not isinstance(raw, dict):
        raise StepError("'fields' must be an object")
    provenance = params.get("provenance", True)
    if not isinstance(provenance, bool):
        raise StepError("'provenance' must be true or false")
    reserved = sorted(set(raw or {}) & RESERVED_FIELDS)
    if reserved:  # what an item came from decides who may see it: a pipeline never rewrites it
        raise StepError(f"'fields' may not set {', '.join(reserved)}: an item's sources are the store's to say")
    for item in ctx.items:
        item.metadata.update(object_param({"fields": ctx.fill(raw or {}, item)}, "fields"))
        if provenance:
            store = item.source.split("://", 1)[0] if "://" in item.source else None
            item.metadata["provenance"] = {"memory": ctx.memory_id, "step": item.origin or ctx.step,
                                           "store": store, "source": item.source}
