"""The ingestion engine (SPEC §7): run pipelines on events, record every run, switch pipelines on and off.

`execute` runs one pipeline by id, whatever its trigger and `trigger_config.where` (an explicit call
is its own reason to run); a disabled pipeline is skipped with a warning. `on_event` runs every
active pipeline whose trigger includes the event's and whose `where` holds for it.

An execution validates the definition first (an invalid one fails without running anything),
runs the processors in order, stops at the first failure (later processors are skipped and no
route runs), then runs every route. A processor skipped on purpose (an LLM step without a client)
leaves its output unset: a processor or route reading it is skipped too, with a warning.
Status: `failed` (invalid definition or a failed processor), `cancelled`, `partial` (some route
errors), `ok`, or `skipped` (disabled pipeline).

Every execution is appended to the event log `log://ingestion` as `ingestion.execution` with its
per-processor and per-route results. The payload itself is not logged: it may hold what the
normalizer is there to redact. An event sent with an `idempotency_key` runs each pipeline once
(idempotency.py).
"""

from __future__ import annotations

import copy
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from attrs import define, field

from ..errors import ContextAssemblyError, InvalidParamsError, NotFoundError
from ..model.converter import unstructure
from ..model.definitions import IngestionPipeline, Processor
from ..registry.ingestion import PIPELINE_STATUSES, lookup_processor, trigger_names
from ..registry.steps import TEMPLATE_PATTERN
from ..registry.values import MISSING
from ..rules.compile import CompiledConditions
from ..workspace.loader import Workspace
from ..workspace.repository import DefinitionRepository, definition_repository
from .idempotency import (
    ATTEMPTS,
    append_key,
    check_claim,
    check_idempotency_key,
    claim,
    execution_id,
    recorded,
    request_hash,
)
from .processors import (
    LLM,
    PROCESSOR_FUNCTIONS,
    ProcessorContext,
    ProcessorError,
    ProcessorSkipped,
    count_of,
)
from .routing import Router, RouteRun, compile_condition_list, conditions_hold, event_lookup, resolve_reference
from .templates import TemplateVariables
from .validate import validate_pipeline

LOG_INSTANCE = "ingestion"
LOG_EVENT_TYPE = "ingestion.execution"
Observer = Callable[[str, dict[str, Any]], None]
Observers = list[Observer]  # module-level: inside the engine class, `list` names the method

_log = logging.getLogger(__name__)
_RESERVED = ("id", "type", "input", "output")
_TEMPLATE = re.compile(TEMPLATE_PATTERN)


@define
class _Prepared:
    """What is worked out once per definition version: its validation and compiled conditions."""

    definition: IngestionPipeline
    errors: list[dict[str, Any]]
    where: CompiledConditions | None
    conditions: list[CompiledConditions | None]


@define
class _Event:
    """What one call brings: the event and, when the caller may retry it, its idempotency key."""

    trigger: str
    payload: dict[str, Any]
    scope_variables: dict[str, Any]
    additional_variables: dict[str, Any]
    key: str | None = None
    owner: str | None = None  # the caller's token name: its keys are its own
    digest: str = ""

    def __attrs_post_init__(self) -> None:
        if self.key is not None:
            self.digest = request_hash(self.trigger, self.payload, self.scope_variables, self.additional_variables)

    def execution_id(self, pipeline_id: str) -> str:
        return execution_id(pipeline_id, self.key, self.owner)


@define
class _Execution:
    pipeline_id: str
    trigger: str
    execution_id: str
    observers: list[Observer]
    key: str | None = None
    started: float = field(factory=time.perf_counter)
    processors: list[dict[str, Any]] = field(factory=list)
    routes: list[dict[str, Any]] = field(factory=list)
    warnings: list[str] = field(factory=list)
    status: str = "ok"
    error: str | None = None

    def notify(self, event: str, data: dict[str, Any]) -> None:
        for observer in self.observers:
            try:
                observer(event, data)
            except Exception:  # a notification that cannot be sent never fails the ingestion
                _log.exception("ingestion observer failed on %s", event)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"execution_id": self.execution_id, "pipeline_id": self.pipeline_id,
                               "trigger": self.trigger, "status": self.status, "processors": self.processors,
                               "routes": self.routes, "warnings": self.warnings,
                               "duration_ms": _ms(self.started)}
        if self.key is not None:
            out["idempotency_key"] = self.key
        if self.error is not None:
            out["error"] = self.error
        return out


class IngestionEngine:
    def __init__(self, memory: Any, workspace: Callable[[], Workspace], *,
                 repository: DefinitionRepository | None = None, llm: LLM | None = None,
                 observer: Observer | None = None, custom: Mapping[str, Callable[..., Any]] | None = None,
                 key_owner: Callable[[], str | None] = lambda: None) -> None:
        self.memory = memory
        self.key_owner = key_owner  # the caller's token name, whose idempotency keys are its own
        self.workspace = workspace
        self.repository = repository if repository is not None \
            else definition_repository(memory.layout, "ingestion-pipeline")
        self.llm = llm
        self.observer = observer
        self.custom = dict(custom or {})
        self._prepared: dict[int, _Prepared] = {}
        self._lock = threading.Lock()  # the sidecar may run executions on several threads

    # -- queries

    def list(self, active_only: bool = False) -> list[dict[str, Any]]:
        pipelines = self._pipelines()
        return [copy.deepcopy(unstructure(d)) for _, d in sorted(pipelines.items()) if not active_only or d.active]

    def get(self, pipeline_id: str) -> dict[str, Any]:
        return copy.deepcopy(unstructure(self._definition(pipeline_id)))

    def set_status(self, pipeline_id: str, status: str) -> dict[str, Any]:
        """Write `status` into the pipeline's file (activate: "active", disable: "disabled")."""
        if status not in PIPELINE_STATUSES:
            raise InvalidParamsError(f"unknown status {status!r}", [
                {"path": "/status", "message": f"must be one of {', '.join(PIPELINE_STATUSES)}"}])
        return self.repository.update(pipeline_id, {"status": status})

    # -- runs

    def on_event(self, trigger: str, payload: dict[str, Any], *, scope_variables: dict[str, Any] | None = None,
                 additional_variables: dict[str, Any] | None = None, observer: Observer | None = None,
                 idempotency_key: str | None = None) -> dict[str, Any]:
        event = self._event(trigger, payload, scope_variables, additional_variables, idempotency_key)
        lookup = event_lookup(payload, trigger, scope_variables, additional_variables)
        pipelines = sorted(self._pipelines().items())
        for pipeline_id, definition in pipelines:  # a reused key is refused before anything runs
            if trigger in definition.triggers and event.key is not None:
                check_claim(self.memory, LOG_INSTANCE, event.execution_id(pipeline_id), event.digest, event.key,
                            pipeline_id)
        executions: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        for pipeline_id, definition in pipelines:
            if trigger not in definition.triggers:
                continue
            if not definition.active:
                skipped.append({"pipeline_id": pipeline_id, "reason": "disabled"})
                continue
            prepared = self._prepare(definition)
            if prepared.where is not None and not conditions_hold(prepared.where, lookup):
                reason = ("trigger_config.where is invalid: " + "; ".join(prepared.where.errors)
                          if prepared.where.errors else "trigger_config.where does not hold for this event")
                skipped.append({"pipeline_id": pipeline_id, "reason": reason})
                continue
            executions.append(self._attempt(pipeline_id, prepared, event, observer, None))
        return {"trigger": trigger, "executions": executions, "skipped": skipped}

    def execute(self, pipeline_id: str, payload: dict[str, Any], *, trigger: str = "manual",
                scope_variables: dict[str, Any] | None = None, additional_variables: dict[str, Any] | None = None,
                observer: Observer | None = None, cancelled: Callable[[], bool] | None = None,
                idempotency_key: str | None = None) -> dict[str, Any]:
        event = self._event(trigger, payload, scope_variables, additional_variables, idempotency_key)
        definition = self._definition(pipeline_id)
        return self._attempt(pipeline_id, self._prepare(definition), event, observer, cancelled)

    # -- internals

    def _event(self, trigger: str, payload: dict[str, Any], scope_variables: dict[str, Any] | None,
               additional_variables: dict[str, Any] | None, key: str | None) -> _Event:
        _check_trigger(trigger)
        _check_event(payload, scope_variables, additional_variables)
        return _Event(trigger, payload, scope_variables or {}, additional_variables or {}, check_idempotency_key(key),
                      self.key_owner())

    def _attempt(self, pipeline_id: str, prepared: _Prepared, event: _Event, observer: Observer | None,
                 cancelled: Callable[[], bool] | None) -> dict[str, Any]:
        """One pipeline's run of the event; with an idempotency key, the recorded run if it ended ok."""
        execution = event.execution_id(pipeline_id)
        with ATTEMPTS.one_at_a_time(execution if event.key is not None else None):
            if event.key is not None:
                claim(self.memory, LOG_INSTANCE, execution, event.digest, event.key, pipeline_id)
                done = recorded(self.memory, LOG_INSTANCE, execution)
                if done is not None:
                    return done
            return self._run(pipeline_id, prepared, event, execution, observer, cancelled)

    def _pipelines(self) -> dict[str, IngestionPipeline]:
        pipelines = self.workspace().ingestion
        live = {id(d) for d in pipelines.values()}
        with self._lock:
            for key in [k for k in self._prepared if k not in live]:
                del self._prepared[key]  # files that changed or went away
        return pipelines

    def _definition(self, pipeline_id: str) -> IngestionPipeline:
        definition = self._pipelines().get(pipeline_id) if isinstance(pipeline_id, str) else None
        if definition is None:
            raise NotFoundError(f"ingestion pipeline {pipeline_id!r} not found", {"id": pipeline_id})
        return definition

    def _prepare(self, definition: IngestionPipeline) -> _Prepared:
        # Keyed by identity: the loader hands out the same object until the file changes.
        with self._lock:
            prepared = self._prepared.get(id(definition))
        if prepared is not None and prepared.definition is definition:
            return prepared
        report = validate_pipeline(unstructure(definition), custom_names=set(self.custom))
        where = definition.trigger_config.where if definition.trigger_config is not None else None
        conditions = [compile_condition_list(r.condition) if r.condition is not None else None
                      for r in definition.routing or []]
        prepared = _Prepared(definition, report["errors"], compile_condition_list(where) if where else None,
                             conditions)
        with self._lock:
            self._prepared[id(definition)] = prepared
        return prepared

    def _observers(self, observer: Observer | None) -> Observers:
        found = [o for o in (self.observer, observer) if o is not None]
        return found if len(found) < 2 or found[0] is not found[1] else found[:1]

    def _run(self, pipeline_id: str, prepared: _Prepared, event: _Event, execution: str,
             observer: Observer | None, cancelled: Callable[[], bool] | None) -> dict[str, Any]:
        trigger = event.trigger
        run = _Execution(pipeline_id, trigger, execution, self._observers(observer), event.key)
        definition = prepared.definition
        run.notify("executionStarted", {"execution_id": run.execution_id, "pipeline_id": pipeline_id,
                                        "trigger": trigger})
        if not definition.active:
            run.status = "skipped"
            run.warnings.append(f"ingestion pipeline {pipeline_id!r} is disabled: nothing ran")
        elif prepared.errors:
            run.status = "failed"
            run.error = "the pipeline definition is invalid: " + "; ".join(
                f"{e['path'] or '/'}: {e['message']}" for e in prepared.errors)
        else:
            try:
                self._process(run, prepared, event, cancelled or (lambda: False))
            except Exception as exc:  # noqa: BLE001 - a run always ends recorded and reported, never half-silent
                _log.exception("ingestion pipeline %s failed unexpectedly", pipeline_id)
                run.status = "partial" if any(r["written"] for r in run.routes) else "failed"
                run.error = f"the run stopped: {type(exc).__name__}: {exc}"
        result = run.result()
        self._record(run, result)
        run.notify("executionCompleted", {
            "execution_id": run.execution_id, "pipeline_id": pipeline_id, "trigger": trigger, "status": run.status,
            "duration_ms": result["duration_ms"], "processors": len(run.processors), "routes": len(run.routes),
            "written": sum(len(r["written"]) for r in run.routes), "warnings": len(run.warnings),
            **({"error": run.error} if run.error else {})})
        return result

    def _process(self, run: _Execution, prepared: _Prepared, event: _Event, cancelled: Callable[[], bool]) -> None:
        definition = prepared.definition
        payload, scope_variables, additional_variables = event.payload, event.scope_variables, \
            event.additional_variables
        outputs: dict[str, Any] = {}
        skipped_outputs: set[str] = set()
        lookup = event_lookup(payload, run.trigger, scope_variables, additional_variables)
        variables = TemplateVariables(payload, run.trigger, run.execution_id, run.pipeline_id, time.time(),
                                      scope_variables, additional_variables, outputs)
        previous: str | None = None
        stopped = False
        for spec in definition.processors or []:
            entry: dict[str, Any] = {"id": spec.id, "type": spec.type,
                                     "output": _output_name(spec), "status": "skipped", "duration_ms": 0.0,
                                     "count": 0}
            if stopped or cancelled():
                if not stopped:
                    run.status, stopped = "cancelled", True
                    run.warnings.append("the execution was cancelled")
                run.processors.append(entry)
                self._notify_processor(run, entry)
                continue
            source = spec.input or previous or "payload"
            started = time.perf_counter()
            if source.split(".")[0] in skipped_outputs:
                entry["warning"] = f"skipped: its input '{source}' was not produced (an earlier step was skipped)"
                skipped_outputs.add(entry["output"])
                run.warnings.append(f"processor {entry['id']!r} {entry['warning']}")
            else:
                self._run_processor(run, spec, entry, source, payload, outputs, lookup, variables, skipped_outputs)
            entry["duration_ms"] = _ms(started)
            previous = entry["output"]
            run.processors.append(entry)
            self._notify_processor(run, entry)
            if entry["status"] == "failed":
                run.status, stopped = "failed", True
                run.error = f"processor {entry['id']!r} failed: {entry['error']}"
        if stopped:
            return
        keys = (lambda route, position: append_key(run.execution_id, route, position)) if run.key is not None else None
        router = Router(self.memory, variables, lookup, cancelled, keys)
        wrote = False
        for index, route in enumerate(definition.routing or []):
            source = route.from_ or "payload"
            if source.split(".")[0] in skipped_outputs:
                route_run = RouteRun(index, source, route.write_to or "", status="skipped")
                run.warnings.append(f"route {index} skipped: '{source}' was not produced")
            else:
                value = resolve_reference(source, payload, outputs)
                route_run = router.run(index, route, value, prepared.conditions[index])
            run.routes.append(route_run.result())
            wrote |= bool(route_run.written)
            if route_run.status == "cancelled":
                run.status = "cancelled"
                run.warnings.append("the execution was cancelled")
                return
            if route_run.status in ("failed", "partial"):
                run.status = "partial"
        if run.status == "partial" and not wrote:  # routes failed and none wrote anything: nothing stored
            run.status = "failed"
            run.error = "no route wrote anything: every route failed"

    def _run_processor(self, run: _Execution, spec: Processor, entry: dict[str, Any], source: str,
                       payload: dict[str, Any], outputs: dict[str, Any], lookup: Mapping[str, Any],
                       variables: TemplateVariables, skipped_outputs: set[str]) -> None:
        ptype = spec.type
        function = PROCESSOR_FUNCTIONS.get(ptype) if isinstance(ptype, str) else None
        registered = lookup_processor(ptype) if isinstance(ptype, str) else None
        if function is None or registered is None:
            entry.update(status="failed", error=f"unknown processor type {ptype!r}")
            return
        ctx = ProcessorContext(run.pipeline_id, run.execution_id, run.trigger, self.memory, variables,
                               self.llm, self.custom)
        try:
            value = resolve_reference(source, payload, outputs)
            if value is MISSING:
                raise ProcessorError(f"its input '{source}' has no value in this execution")
            params = _params(spec, registered.params, lookup)
            output = function(value, params, ctx)
        except ProcessorSkipped as exc:
            entry.update(status="skipped", warning=str(exc))
            skipped_outputs.add(entry["output"])
            run.warnings.append(f"processor {entry['id']!r}: {exc}")
        except ProcessorError as exc:
            entry.update(status="failed", error=str(exc))
        except ContextAssemblyError as exc:  # a store refused a write
            entry.update(status="failed", error=exc.message)
        except Exception as exc:  # a bug must not take the server down: it fails this run only
            _log.exception("ingestion processor %s failed", entry["id"])
            entry.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        else:
            outputs[entry["output"]] = output
            entry.update(status="ok", count=count_of(output))
        if ctx.warnings:
            entry["warning"] = "; ".join([*filter(None, [entry.get("warning")]), *ctx.warnings])
            run.warnings.extend(f"processor {entry['id']!r}: {w}" for w in ctx.warnings)

    def _notify_processor(self, run: _Execution, entry: dict[str, Any]) -> None:
        run.notify("processorCompleted", {
            "execution_id": run.execution_id, "pipeline_id": run.pipeline_id, "processor_id": entry["id"],
            "type": entry["type"], "status": entry["status"], "duration_ms": entry["duration_ms"],
            "count": entry["count"]})

    def _record(self, run: _Execution, result: dict[str, Any]) -> None:
        # A keyed run that ended ok is recorded under its execution id: a retry answers it. Other
        # outcomes are recorded without a key, so that a retry runs again (and is recorded too).
        final = run.key is not None and run.status == "ok"
        try:
            self.memory.events.append(LOG_INSTANCE, LOG_EVENT_TYPE, result, key=run.execution_id if final else None)
        except Exception as exc:  # the run happened; a log that cannot be written is a warning
            _log.warning("cannot record ingestion execution %s: %s", run.execution_id, exc)
            result["warnings"].append(f"the execution could not be recorded in log://{LOG_INSTANCE}: {exc}")


# -- helpers


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _output_name(spec: Processor) -> str:
    return spec.output or spec.id or ""


def _check_trigger(trigger: Any) -> None:
    if trigger not in trigger_names():
        raise InvalidParamsError(f"unknown trigger {trigger!r}", [
            {"path": "/trigger", "message": f"must be one of {', '.join(trigger_names())}"}])


def _check_event(payload: Any, scope_variables: Any, additional_variables: Any) -> None:
    problems = []
    if not isinstance(payload, dict):
        problems.append({"path": "/payload", "message": "the payload must be an object"})
    if scope_variables is not None and not isinstance(scope_variables, dict):
        problems.append({"path": "/scope_variables", "message": "must be an object of scopes"})
    if additional_variables is not None and not isinstance(additional_variables, dict):
        problems.append({"path": "/additional_variables", "message": "must be an object"})
    if problems:
        raise InvalidParamsError("invalid ingestion event", problems)


def _params(spec: Processor, declared: Any, lookup: Mapping[str, Any]) -> dict[str, Any]:
    """The processor's parameters: defaults filled in, whole-value `${variable}` templates resolved."""
    params = {p.name: copy.deepcopy(p.default) for p in declared if p.default is not None}
    for name, value in spec.extra.items():
        if name in _RESERVED:
            continue
        if isinstance(value, str) and _TEMPLATE.fullmatch(value):
            key = value[2:-1].strip()
            if key not in lookup:
                raise ProcessorError(f"{name}: ${{{key}}} has no value in this event")
            value = lookup[key]
        params[name] = value
    return params


__all__ = ["LOG_EVENT_TYPE", "LOG_INSTANCE", "IngestionEngine"]
