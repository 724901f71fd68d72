"""`persistentMemory/*`: CRUD over `.codebolt/PersistentMemory/`, validate, execute one pipeline,
and the step catalogue (SPEC §5.2, §8)."""

from __future__ import annotations

import time
from typing import Any

from ..assembly.request import parse_request
from ..assembly.tokens import token_counter
from ..errors import CancelledError, InvalidParamsError, NotFoundError, TimeoutError_
from ..pipelines.runner import run_pipeline
from ..pipelines.validate import validate_definition
from ..registry.steps import STEP_GROUPS, StepSpec, step_types
from ..workspace.lint import lint_context
from .call import CallContext, MethodSpec
from .crud import crud_methods
from .params import EMPTY, prefixed, shape
from .session import Session

PREFIX = "persistentMemory/"


def list_memories(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"items": session.persistent_memory.list()}


def validate(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return validate_definition(params, lint_context(session.workspace()))


def execute(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Run one definition's pipeline for a request, outside any assembly: `{items, steps, status, …}`."""
    workspace = session.workspace()
    definition = workspace.memories.get(params["id"])
    if definition is None:
        raise NotFoundError(f"persistent memory {params['id']!r} not found", {"id": params["id"]})
    try:
        request = parse_request(params["request"])
    except InvalidParamsError as exc:
        raise InvalidParamsError(exc.message, prefixed(exc.errors, "/request")) from None
    settings = workspace.settings
    deadline = time.monotonic() + settings.pipeline_timeout_ms / 1000
    ctx.progress(f"running {params['id']}", None)
    # a restricted token's run reads and keeps only what its read patterns cover (nor counts the
    # rest); the variables are an assembly's, derived ones (addVar.turn_count) included
    readable = session.access.readable()
    lookup, _ = session.lookup(request)
    run = run_pipeline(definition, request, session.runtime.stores, lookup=lookup, deadline=deadline,
                       cancelled=ctx.cancelled, llm=ctx.llm, readable=readable)
    if run.status == "cancelled":
        raise CancelledError(f"the execution of {params['id']!r} was cancelled")
    if run.status == "timeout":
        raise TimeoutError_(f"{params['id']!r} did not finish within {settings.pipeline_timeout_ms} ms",
                            {"id": params["id"], "timeout_ms": settings.pipeline_timeout_ms})
    return run.to_result(definition, token_counter(settings.tokenizer))


def step_spec(step: StepSpec) -> dict[str, Any]:
    return {
        "name": step.name,
        "group": step.group,
        "description": step.description,
        "params": [{"name": p.name, "schema": p.schema, "description": p.description, "required": p.required,
                    "default": p.default} for p in step.params],
        "one_of": list(step.one_of),
        "example": step.example,
        "reads": step.reads,
    }


def step_specs(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"items": [step_spec(s) for s in step_types()],
            "groups": [{"name": g.name, "description": g.description} for g in STEP_GROUPS]}


METHODS = (
    MethodSpec(PREFIX + "list", list_memories, EMPTY, summary="Every persistent-memory definition, sorted by id."),
    *crud_methods(PREFIX, lambda session: session.persistent_memory, "persistent-memory", "a definition"),
    MethodSpec(PREFIX + "validate", validate, schema="persistent-memory",
               summary="Schema and meaning problems of a draft definition."),
    MethodSpec(PREFIX + "execute", execute, shape(id="string", request="object"), schema="assembly-request",
               long_running=True, summary="Run one definition's pipeline for a request."),
    MethodSpec(PREFIX + "stepSpecs", step_specs, EMPTY, summary="The pipeline step types and their parameters."),
)
