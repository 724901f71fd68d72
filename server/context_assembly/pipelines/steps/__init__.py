"""The step implementations, by step type: what the runner calls for each `registry.steps` name.

Each is `(params, ctx) -> None` and works by changing `ctx.items` / `ctx.query`. Parameters arrive
with `${...}` templates filled and registry defaults applied, except the lazy ones (`ParamSpec.lazy`),
which the step fills itself (per item, or nested steps that must see the state at the time they run).
The registry entry names its function (`StepSpec.run`); this module only resolves the name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

from ...registry.steps import StepSpec
from ..context import StepContext

StepFunction = Callable[[dict[str, Any], StepContext], None]
SELF_FILLED = "self_filled"  # the function attribute `self_filled` sets


def self_filled(*names: str) -> Callable[[StepFunction], StepFunction]:
    """Parameters a step fills itself, like the registry's lazy ones: the runner leaves their
    `${...}` alone. For parameters the step renders again (the `format` template's `{{field}}`),
    where filling first would let a filled value be rendered as a template."""

    def mark(function: StepFunction) -> StepFunction:
        setattr(function, SELF_FILLED, frozenset(names))
        return function

    return mark


def self_filled_params(function: StepFunction) -> frozenset[str]:
    names: frozenset[str] = getattr(function, SELF_FILLED, frozenset())
    return names


@cache
def _resolve(run: str) -> StepFunction:
    module, _, name = run.partition(":")
    function: StepFunction = getattr(importlib.import_module(module, package=__name__), name)
    return function


def step_function(spec: StepSpec) -> StepFunction:
    """The function that runs a step type; raises LookupError when its `run` names nothing."""
    try:
        return _resolve(spec.run)
    except (ImportError, AttributeError, ValueError) as exc:
        raise LookupError(f"step type {spec.name!r}: cannot find its function {spec.run!r}: {exc}") from exc


__all__ = ["StepFunction", "self_filled", "self_filled_params", "step_function"]
