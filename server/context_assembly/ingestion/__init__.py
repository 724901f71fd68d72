"""The write path (SPEC §7): ingestion pipelines run on events, their processors, routing and validation."""

from __future__ import annotations

from typing import Any

from ..registry.ingestion import COMMON_PROCESSOR_PARAMS, PROCESSORS, ROUTE_FIELDS, TRIGGERS
from ..registry.steps import ParamSpec
from .engine import LOG_EVENT_TYPE, LOG_INSTANCE, IngestionEngine
from .processors import ENTRY_POINT_GROUP, PROCESSOR_FUNCTIONS, LLMUnavailable
from .templates import TemplateError
from .validate import validate_pipeline


def _param(spec: ParamSpec) -> dict[str, Any]:
    return {"name": spec.name, "schema": spec.schema, "description": spec.description,
            "required": spec.required, "default": spec.default}


def processor_specs() -> list[dict[str, Any]]:
    """Every processor type for `memoryIngestion/processorSpecs`: the common parameters first."""
    return [{"name": p.name, "description": p.description, "uses_llm": p.uses_llm,
             "params": [_param(c) for c in COMMON_PROCESSOR_PARAMS] + [_param(x) for x in p.params],
             "example": p.example} for p in PROCESSORS]


def trigger_specs() -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description} for t in TRIGGERS]


def route_specs() -> list[dict[str, Any]]:
    """The fields of a route."""
    return [_param(f) for f in ROUTE_FIELDS]


def specs() -> dict[str, Any]:
    """Processors, triggers and route fields in one answer."""
    return {"processors": processor_specs(), "triggers": trigger_specs(), "routing": route_specs()}


__all__ = ["ENTRY_POINT_GROUP", "LOG_EVENT_TYPE", "LOG_INSTANCE", "PROCESSOR_FUNCTIONS", "IngestionEngine",
           "LLMUnavailable", "TemplateError", "processor_specs", "route_specs", "specs", "trigger_specs",
           "validate_pipeline"]
