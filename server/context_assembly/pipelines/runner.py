"""Running one persistent-memory pipeline (SPEC §5.2): steps in order, each timed, never raising.

A definition the request cannot feed (a scope in `inputs_scope` absent or empty, a required
additional variable missing, a `${request variable}` the request lacks) is "skipped" with
`missing_variables`; a step that fails makes the run "failed" with that step's error; the deadline
(a `time.monotonic()` value) makes it "timeout"; `cancelled()` returning true makes it
"cancelled". Only an "ok" run carries items; the caller turns every other status into a warning
and assembles the rest.
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from attrs import define, field

from ..errors import ContextAssemblyError
from ..model.converter import structure
from ..model.definitions import MemoryDefinition
from ..model.request import AssemblyRequest, ScopeVariables
from ..registry.steps import lookup_step, step_names
from ..rules.lookup import build_lookup
from .context import Llm, StepCancelled, StepContext, StepError, StepTimeout, Stores
from .items import Item, Readable
from .shorthand import is_shorthand, normalise_memory
from .steps import self_filled_params, step_function
from .templates import TemplateError

RESERVED_KEYS = ("type", "step", "alias", "timeout_ms")
DEFAULT_SECTION = "knowledge"
DEFAULT_PRIORITY = "medium"


@define
class StepRun:
    type: str
    alias: str | None
    duration_ms: float = 0.0
    count: int = 0  # items the step produced (retrieval: the ones it read; others: the list after it)
    error: str | None = None
    skipped: bool = False  # not run: the pipeline stopped before it
    depth: int = 0  # > 0 inside a conditional's branch
    branch: str | None = None  # conditional: "then_steps" or "else_steps"
    warnings: list[str] = field(factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "alias": self.alias, "duration_ms": self.duration_ms,
                               "count": self.count}
        for name in ("error", "branch"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.skipped:
            out["skipped"] = True
        if self.depth:
            out["depth"] = self.depth
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@define
class PipelineRun:
    memory_id: str | None
    items: list[Item] = field(factory=list)
    steps: list[StepRun] = field(factory=list)
    status: str = "ok"  # ok | failed | timeout | skipped | cancelled
    error: str | None = None
    missing_variables: list[str] = field(factory=list)
    query: str = ""
    warnings: list[str] = field(factory=list)  # step warnings: missing keys, fallbacks
    variables_used: list[str] = field(factory=list)  # request keys the run read (cache keys, traces)
    passing: bool = False  # it stood in for an answer that may come next time (a model's): never cached
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def context_items(self, section: str = DEFAULT_SECTION, priority: str = DEFAULT_PRIORITY,
                      tokens: Callable[[str], int] | None = None) -> list[dict[str, Any]]:
        count = tokens or estimate_tokens
        return [i.to_context_item(self.memory_id, section, priority, count(i.content)) for i in self.items]

    def to_result(self, definition: MemoryDefinition | dict[str, Any] | None = None,
                  tokens: Callable[[str], int] | None = None) -> dict[str, Any]:
        """The `persistentMemory/execute` result: `{items, steps}` (plus status and its reasons)."""
        contribution = as_definition(definition).contribution if definition is not None else None
        section = (contribution.section if contribution else None) or DEFAULT_SECTION
        priority = (contribution.priority if contribution else None) or DEFAULT_PRIORITY
        out: dict[str, Any] = {
            "items": self.context_items(section, priority, tokens),
            "steps": [s.to_dict() for s in self.steps],
            "status": self.status, "query": self.query,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.missing_variables:
            out["missing_variables"] = list(self.missing_variables)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def estimate_tokens(text: str) -> int:
    """The seeds' estimate: ceil(len / 4)."""
    return math.ceil(len(text) / 4)


class _Stop(Exception):
    """Ends the run with a status (raised through nested steps)."""

    def __init__(self, status: str, error: str, missing: str | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.missing = missing


# -- before running --------------------------------------------------------------------------------


def _scope_present(scopes: ScopeVariables, name: str) -> bool:
    fields = getattr(scopes, name, None)
    return isinstance(fields, dict) and any(v is not None for v in fields.values())


def missing_inputs(definition: MemoryDefinition | dict[str, Any], request: AssemblyRequest) -> list[str]:
    """`scope.<name>` for each absent or empty scope in inputs_scope, `addVar.<name>` per required variable."""
    definition = as_definition(definition)
    missing = [f"scope.{name}" for name in definition.scopes if not _scope_present(request.scope_variables, name)]
    for var in definition.declared_variables:
        if var.name is None or var.required is not True:
            continue
        if request.additional_variables.get(var.name) is None and var.default is None:
            missing.append(f"addVar.{var.name}")
    return missing


def _with_defaults(lookup: Mapping[str, Any], definition: MemoryDefinition) -> dict[str, Any]:
    """Declared additional variables' defaults fill in what the request does not pass."""
    out = dict(lookup)
    for var in definition.declared_variables:
        if var.name is not None and var.default is not None:
            out.setdefault(f"addVar.{var.name}", var.default)
    return out


def _steps_of(definition: MemoryDefinition) -> list[Any]:
    steps = definition.steps
    if steps is None:
        raise _Stop("failed", "the definition has no retrieval.pipeline list")
    return steps


def as_definition(definition: MemoryDefinition | dict[str, Any]) -> MemoryDefinition:
    """A definition as the wire carries it (shorthand allowed) -> the model; models pass through."""
    if isinstance(definition, MemoryDefinition):
        return definition
    if is_shorthand(definition):
        definition = normalise_memory(definition, str(definition.get("id") or definition.get("name") or ""))
    return structure(definition, MemoryDefinition)


# -- running ---------------------------------------------------------------------------------------


def run_pipeline(definition: MemoryDefinition | dict[str, Any], request: AssemblyRequest, stores: Stores, *,
                 lookup: Mapping[str, Any] | None = None, deadline: float | None = None,
                 cancelled: Callable[[], bool] | None = None, llm: Llm | None = None,
                 readable: Readable | None = None) -> PipelineRun:
    """Run a definition's pipeline for a request. Never raises for anything the definition or stores do.
    `llm`: the connected client's model (`llm/complete`), for steps that ask one (derive_query llm_rephrase).
    `readable`: a restricted caller's read patterns; the steps read and keep only what they cover."""
    started = time.perf_counter()
    if not isinstance(definition, (dict, MemoryDefinition)):
        return _finish(PipelineRun(None), started, "failed", "a definition must be an object")
    definition = as_definition(definition)
    run = PipelineRun(definition.id)
    if definition.status == "disabled":
        return _finish(run, started, "skipped", "the definition is disabled")
    missing = missing_inputs(definition, request)
    if missing:
        run.missing_variables = missing
        return _finish(run, started, "skipped", "the request lacks " + ", ".join(missing))
    ctx = StepContext(definition.id, request, _with_defaults(build_lookup(request) if lookup is None else lookup,
                                                          definition), stores, deadline=deadline, cancelled=cancelled,
                      llm=llm, readable=readable)
    try:
        steps = _steps_of(definition)
        _run_list(steps, ctx, run, depth=0)
        status, error = "ok", None
    except _Stop as stop:
        status, error = stop.status, stop.error
        if stop.missing:
            run.missing_variables.append(stop.missing)
    # partial results of a run that did not finish are not handed on: the caller warns instead
    run.items, run.query = (ctx.items if status == "ok" else []), ctx.query
    run.variables_used = sorted(ctx.variables_used)
    run.passing = ctx.passing
    return _finish(run, started, status, error)


def _finish(run: PipelineRun, started: float, status: str, error: str | None) -> PipelineRun:
    run.status, run.error = status, error
    run.duration_ms = round((time.perf_counter() - started) * 1000, 3)
    return run


def _run_list(steps: list[Any], ctx: StepContext, run: PipelineRun, depth: int, path: str = "") -> None:
    for index, step in enumerate(steps):
        if ctx.stopped:
            _record_skipped(steps[index:], run, depth)
            return
        try:
            ctx.check()
        except StepTimeout as exc:
            _record_skipped(steps[index:], run, depth)
            raise _Stop("timeout", str(exc)) from None
        except StepCancelled:
            _record_skipped(steps[index:], run, depth)
            raise _Stop("cancelled", "cancelled") from None
        try:
            _run_step(step, index, ctx, run, depth, path)
        except _Stop:
            _record_skipped(steps[index + 1:], run, depth)
            raise


def _run_nested(steps: list[Any], ctx: StepContext, run: PipelineRun, depth: int, parent: str) -> None:
    """A conditional's branch: the enclosing step's own state survives its children, whose labels
    start with the branch's path (`conditional#2/then_steps/`): a nested step's index alone would
    repeat a top-level step's label, and merge and provenance would take the two for one step."""
    saved = (ctx.step, ctx.produced, ctx.warnings, ctx.branch, ctx.deadline, ctx.run_steps)
    try:
        _run_list(steps, ctx, run, depth, f"{parent}/{ctx.branch or 'steps'}/")
    finally:
        ctx.step, ctx.produced, ctx.warnings, ctx.branch, ctx.deadline, ctx.run_steps = saved
        ctx.produced = None  # the branch changed the items: the conditional's output is the list after it


def _record_skipped(steps: list[Any], run: PipelineRun, depth: int) -> None:
    for step in steps:
        kind, alias = _identity(step)
        run.steps.append(StepRun(kind, alias, skipped=True, depth=depth))


def _identity(step: Any) -> tuple[str, str | None]:
    if not isinstance(step, dict):
        return "?", None
    kind = step.get("type", step.get("step"))
    alias = step.get("alias")
    return (kind if isinstance(kind, str) else "?"), (alias if isinstance(alias, str) else None)


def _run_step(step: Any, index: int, ctx: StepContext, run: PipelineRun, depth: int, path: str) -> None:
    kind, alias = _identity(step)
    record = StepRun(kind, alias, depth=depth)
    run.steps.append(record)
    label = alias or f"{path}{kind}#{index + 1}"  # top-level steps: `kind#n`, as traces always showed
    ctx.step, ctx.produced, ctx.warnings, ctx.branch = label, None, [], None
    ctx.run_steps = lambda steps, inner: _run_nested(steps, inner, run, depth + 1, label)
    outer_deadline = ctx.deadline
    started = time.perf_counter()
    where = f"step {index + 1} ({kind})" if depth == 0 else f"nested step {index + 1} ({kind})"
    try:
        function, params = _prepare(step, kind, ctx)
        timeout_ms = params.pop("timeout_ms", None)
        step_deadline = _step_deadline(timeout_ms, outer_deadline)
        ctx.deadline = step_deadline
        function(params, ctx)
        # steps check the deadline only between pieces of work: one that ends past it (a slow store
        # call, the last step's included) makes the run a timeout, never a late "ok"
        if step_deadline is not None and time.monotonic() > step_deadline:
            raise StepTimeout(f"took longer than its timeout_ms ({timeout_ms} ms)" if step_deadline != outer_deadline
                              else "the pipeline ran out of time")
    except _Stop:
        raise
    except TemplateError as exc:
        record.error = str(exc)
        status = "skipped" if exc.missing_key else "failed"
        raise _Stop(status, f"{where}: {exc}", exc.missing_key) from None
    except StepTimeout as exc:
        record.error = str(exc)
        raise _Stop("timeout", f"{where}: {exc}") from None
    except StepCancelled:
        record.error = "cancelled"
        raise _Stop("cancelled", "cancelled") from None
    except Exception as exc:  # a store or step failure of any kind ends this pipeline only
        record.error = _describe(exc)
        raise _Stop("failed", f"{where}: {record.error}") from None
    finally:
        ctx.deadline = outer_deadline
        record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        record.warnings = list(ctx.warnings)
        record.branch = ctx.branch
        run.warnings += [f"{where}: {w}" for w in ctx.warnings]
    output = ctx.produced if ctx.produced is not None else ctx.items
    record.count = len(output)
    if alias:
        ctx.outputs[alias] = [item.copy() for item in output]  # later steps must not change it


def _describe(exc: Exception) -> str:
    if isinstance(exc, StepError | ContextAssemblyError):
        message = str(exc)
        errors = getattr(exc, "errors", None)
        details = [str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors] \
            if isinstance(errors, list) else []
        # a detail the message already says (a one-problem error repeats it) is not said twice
        details = [d for d in dict.fromkeys(details) if d not in message]
        return message + (": " + "; ".join(details) if details else "")
    return f"{type(exc).__name__}: {exc}"


def _step_deadline(timeout_ms: Any, outer: float | None) -> float | None:
    if timeout_ms is None:
        return outer
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float) or timeout_ms <= 0:
        raise StepError(f"'timeout_ms' must be a positive number, got {timeout_ms!r}")
    own = time.monotonic() + timeout_ms / 1000
    return own if outer is None else min(own, outer)


def _prepare(step: Any, kind: str, ctx: StepContext) -> tuple[Callable[[dict[str, Any], StepContext], None],
                                                             dict[str, Any]]:
    """The step's function and its parameters: templates filled, defaults applied, required checked."""
    if not isinstance(step, dict):
        raise StepError("a step must be an object")
    if not isinstance(step.get("type", step.get("step")), str):
        raise StepError("a step needs a 'type' naming its step type")
    spec = lookup_step(kind)
    if spec is None:
        hints = difflib.get_close_matches(kind, step_names(), n=3, cutoff=0.6)
        raise StepError(f"unknown step type {kind!r}" + (f" (did you mean {', '.join(hints)}?)" if hints else ""))
    function = step_function(spec)
    lazy = spec.lazy_params | self_filled_params(function)
    params = {k: (v if k in lazy else ctx.fill(v)) for k, v in step.items() if k not in RESERVED_KEYS}
    if "timeout_ms" in step:
        params["timeout_ms"] = ctx.fill(step["timeout_ms"])
    for param in spec.params:
        if param.name not in params and param.default is not None:
            params[param.name] = param.default
        if param.required and params.get(param.name) is None:
            raise StepError(f"'{param.name}' is required")
    if spec.one_of and all(params.get(name) is None for name in spec.one_of):
        raise StepError("needs one of " + ", ".join(f"'{name}'" for name in spec.one_of))
    return function, params


__all__ = ["PipelineRun", "StepRun", "estimate_tokens", "missing_inputs", "run_pipeline"]
