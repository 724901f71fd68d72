"""Control steps: branch on a condition, or stop the pipeline early."""

from __future__ import annotations

from typing import Any

from ..context import StepContext, StepError, int_param
from .filtering import compile_where, holds, item_lookup

ITEMS_COUNT = "items.count"


def _pipeline_lookup(ctx: StepContext) -> dict[str, Any]:
    """Request variables, plus `items.count` and `query` (what control conditions may read)."""
    return {**ctx.lookup, ITEMS_COUNT: len(ctx.items), "query": ctx.query}


def conditional(params: dict[str, Any], ctx: StepContext) -> None:
    compiled = compile_where(params.get("condition"), "condition", ctx)
    branch = "then_steps" if holds(compiled, _pipeline_lookup(ctx)) else "else_steps"
    steps = params.get(branch) or []
    if not isinstance(steps, list):
        raise StepError(f"'{branch}' must be a list of steps")
    ctx.branch = branch
    if steps:
        if ctx.run_steps is None:
            raise StepError("nested steps cannot run here")
        ctx.run_steps(steps, ctx)


def early_exit(params: dict[str, Any], ctx: StepContext) -> None:
    """Stop when at least `min_items` items are present, or when `when` holds.

    `when` reads item fields (any item may satisfy it) together with the request's variables and
    `items.count`; with no items it is answered over the variables alone.
    """
    min_items = int_param(params, "min_items", minimum=0)
    when = params.get("when")
    if min_items is None and when is None:
        raise StepError("'when' or 'min_items' is required")
    # compiled first: a malformed `when` fails, and the variables it reads are recorded, even
    # when min_items alone stops the pipeline
    compiled = compile_where(when, "when", ctx) if when is not None else None
    if min_items is not None and len(ctx.items) >= min_items:
        ctx.stopped = True
        return
    if compiled is None:
        return
    base = _pipeline_lookup(ctx)
    lookups = [item_lookup(item, base) for item in ctx.items] or [base]
    ctx.stopped = any(holds(compiled, lookup) for lookup in lookups)
