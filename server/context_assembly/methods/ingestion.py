"""`memoryIngestion/*` and `memory/event`: the write path (SPEC §7, §8).

Definitions live in `.codebolt/MemoryIngestion/`; runs go through the ingestion engine, whose
observer events become `memoryIngestion/executionStarted`, `processorCompleted` and
`executionCompleted` notifications. `memory/event` is the application event bus: every active
pipeline whose trigger (and `trigger_config.where`) matches runs.
"""

from __future__ import annotations

from typing import Any

from .call import CallContext, MethodSpec
from .crud import crud_methods
from .params import EMPTY, shape
from .session import Session

PREFIX = "memoryIngestion/"
EVENTS = tuple(PREFIX + e for e in ("executionStarted", "processorCompleted", "executionCompleted"))


def _observer(ctx: CallContext) -> Any:
    def forward(event: str, payload: dict[str, Any]) -> None:
        ctx.emit(PREFIX + event, payload)
        if event == "processorCompleted":
            ctx.progress(f"{payload.get('processor_id') or payload.get('type') or 'processor'} done", None)

    return forward


def _payload(params: dict[str, Any]) -> Any:
    payload = params.get("payload")
    return {} if payload is None else payload  # the engine refuses anything but an object


def list_pipelines(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"items": session.ingestion().list(bool(params.get("active_only")))}


def validate(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    from ..ingestion import validate_pipeline

    return validate_pipeline(params)


def execute(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.ingestion().execute(
        params["id"], _payload(params), trigger=params.get("trigger") or "manual",
        scope_variables=params.get("scope_variables") or {},
        additional_variables=params.get("additional_variables") or {},
        observer=_observer(ctx), cancelled=ctx.cancelled, idempotency_key=params.get("idempotency_key"),
    )


def activate(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.ingestion().set_status(params["id"], "active")


def disable(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.ingestion().set_status(params["id"], "disabled")


def processor_specs(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    from ..ingestion import processor_specs as specs

    return {"items": specs()}


def event(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.ingestion().on_event(
        params["trigger"], _payload(params), scope_variables=params.get("scope_variables") or {},
        additional_variables=params.get("additional_variables") or {}, observer=_observer(ctx),
        idempotency_key=params.get("idempotency_key"),
    )


_RUN = shape(id="string", payload="any?", trigger="string?", scope_variables="object?",
             additional_variables="object?", idempotency_key="string?")

METHODS = (
    MethodSpec(PREFIX + "list", list_pipelines, shape(active_only="boolean?"),
               summary="Every ingestion pipeline (only the active ones with active_only)."),
    *crud_methods(PREFIX, lambda session: session.ingestion_pipelines, "ingestion-pipeline", "a pipeline"),
    MethodSpec(PREFIX + "validate", validate, schema="ingestion-pipeline",
               summary="Schema and meaning problems of a draft pipeline."),
    MethodSpec(PREFIX + "execute", execute, _RUN, long_running=True, events=EVENTS,
               summary="Run one pipeline on a payload (trigger defaults to manual)."),
    MethodSpec(PREFIX + "activate", activate, shape(id="string"), summary="Set a pipeline's status to active."),
    MethodSpec(PREFIX + "disable", disable, shape(id="string"), summary="Set a pipeline's status to disabled."),
    MethodSpec(PREFIX + "processorSpecs", processor_specs, EMPTY, summary="The processor types and their parameters."),
    MethodSpec("memory/event", event, shape(trigger="string", payload="any?", scope_variables="object?",
                                            additional_variables="object?", idempotency_key="string?"),
               long_running=True, events=EVENTS, summary="An application event: runs every matching active pipeline."),
)
