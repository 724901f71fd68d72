"""persistent-memory (SPEC §5.2), ingestion-pipeline (§7) and graph-view, from the step,
processor and trigger registries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..registry.ingestion import COMMON_PROCESSOR_PARAMS, PIPELINE_STATUSES, ROUTE_FIELDS
from ..registry.steps import (
    COMMON_PARAMS,
    FORMATS,
    MEMORY_STATUSES,
    VARIABLE_TYPES,
    ParamSpec,
)
from .conditions import ADDVAR_NAME, ITEM_FIELD, condition_defs
from .fragments import (
    SCHEMA_KEY,
    VIEW_ID_PATTERN,
    Schema,
    boolean,
    described,
    document,
    enum,
    fields,
    file_id,
    integer,
    listing,
    obj,
    one_or_list,
    ref,
    string,
)
from .sources import Sources


def param_schema(param: ParamSpec) -> Schema:
    return described(param.schema, param.description, param.default)


def _params(params: Iterable[ParamSpec]) -> dict[str, Schema]:
    return {p.name: param_schema(p) for p in params}


def _kind_dispatch(keys: tuple[str, ...], names: Iterable[str], prefix: str) -> list[Schema]:
    """`if <key> is X then #/$defs/<prefix>X` for every kind: one closed schema per kind.

    The dot in the prefix keeps kind names from colliding with other definitions (`step_list`)."""
    rules = []
    for name in names:
        matches = [{"properties": {key: {"const": name}}, "required": [key]} for key in keys]
        condition = matches[0] if len(matches) == 1 else {"anyOf": matches}
        rules.append({"if": condition, "then": ref(prefix + name)})
    return rules


# -- persistent memory ------------------------------------------------------------------------------


def _step_type(src: Sources, description: str) -> Schema:
    groups = {g.name: g.description for g in src.step_groups}
    text = listing((s.name, f"({s.group}: {groups.get(s.group, '')}) {s.description}") for s in src.steps)
    return enum([s.name for s in src.steps], f"{description}\n{text}", title="Step type")


def _step_defs(src: Sources) -> dict[str, Schema]:
    defs: dict[str, Schema] = {
        "step": {
            "type": "object",
            "title": "Step",
            "description": "One pipeline step: `type` (or `step`, the seed-002 shorthand) names it; "
            "its parameters sit beside it.",
            "properties": {
                "type": ref("step_type"),
                "step": described(ref("step_type"), "The step type (seed-002 shorthand for `type`)."),
            },
            "if": {"not": {"required": ["step"]}},
            "then": {"required": ["type"]},
            "allOf": _kind_dispatch(("type", "step"), (s.name for s in src.steps), "step."),
        },
        "step_type": _step_type(src, "The step type."),
        "step_list": {"title": "Steps", "description": "Steps run in order; each reads the items the "
                      "previous one produced.", "type": "array", "items": ref("step")},
    }
    for spec in src.steps:
        properties = {
            "type": {"description": "The step type."},
            "step": {"description": "The step type (seed-002 shorthand)."},
            **_params(COMMON_PARAMS),
            **_params(spec.params),
        }
        extra: dict[str, Any] = {}
        if spec.one_of:
            extra["anyOf"] = [{"required": [name]} for name in spec.one_of]
        defs["step." + spec.name] = obj(
            f"{spec.name} step", f"{spec.description} ({spec.group} step)", properties,
            [p.name for p in spec.params if p.required], examples=[spec.example], **extra)
    return defs


def _additional_variable() -> Schema:
    return obj("Additional variable", "A variable the definition reads from additional_variables.", {
        "name": described({"type": "string", "pattern": f"^{ADDVAR_NAME}$"},
                          "The variable name (read as addVar.<name>)."),
        "type": enum(VARIABLE_TYPES, "The JSON type of its value.", "string", title="Variable type"),
        "required": boolean("When true, a request without it skips this memory (with a warning).", False),
        "description": string("What the variable means."),
        "default": {"description": "The value used when the request does not pass one."},
    }, ["name"])


def _contribution(src: Sources) -> Schema:
    return obj("Contribution", "Where and how the pipeline's items enter the assembled context.", {
        "section": enum(src.section_names, "The context section.\n"
                        + listing((s.name, s.description) for s in src.sections), "knowledge",
                        title="Section"),
        "priority": enum(src.priority_names, "The items' priority within the section.\n"
                         + listing((p.name, p.description) for p in src.priorities), "medium",
                         title="Priority"),
        "format": enum(FORMATS, "Accepted for the builder documentation's shape and kept as written, but "
                       "not applied: the items keep the content the pipeline gave them. To render them, end "
                       "the pipeline with a `format` step (`{\"type\": \"format\", \"format\": "
                       "\"numbered\"}`).", title="Format"),
        "max_items": integer("The most items this memory contributes.", 1),
        "max_tokens": integer("The most tokens this memory contributes.", 1),
    })


def persistent_memory(src: Sources) -> Schema:
    scopes = listing((s.name, s.description) for s in src.scopes)
    body = fields({
        "$schema": SCHEMA_KEY,
        "id": file_id("memory definition"),
        "name": described({"type": "string", "minLength": 1},
                          "Seed-002 shorthand: the definition's human-readable name, read as `label` (a "
                          "`label` written beside it wins). It is not the id: the id is the file name "
                          "({id}.json), which references to this memory use."),
        "label": string("A human-readable name."),
        "description": string("What the memory holds; shown in completion and hover."),
        "version": string("The definition's version (e.g. 1.0.0)."),
        "status": enum(MEMORY_STATUSES, "Only `disabled` definitions are skipped.", "active", title="Status"),
        "enabled": boolean("Seed-002 shorthand: false means status `disabled`."),
        "inputs_scope": described(
            {"type": "array", "items": {"enum": src.scope_names}, "uniqueItems": True},
            "Scopes the request must carry for this memory to run.\n" + scopes),
        "additional_variables": described({"type": "array", "items": ref("additional_variable")},
                                          "Additional variables the pipeline reads."),
        "retrieval": obj("Retrieval", "The retrieval pipeline.", {"pipeline": ref("step_list")},
                         ["pipeline"]),
        "pipeline": described(ref("step_list"), "Seed-002 shorthand for retrieval.pipeline."),
        "contribution": ref("contribution"),
    }, allOf=[
        {"if": {"not": {"required": ["name"]}}, "then": {"required": ["id"]}},
        {"if": {"not": {"required": ["pipeline"]}}, "then": {"required": ["retrieval"]}},
    ])
    defs = {
        **_step_defs(src),
        "additional_variable": _additional_variable(),
        "contribution": _contribution(src),
        **condition_defs(src, ITEM_FIELD),
    }
    return document(
        "persistent-memory", "Persistent-memory definition",
        "A retrieval pipeline in .codebolt/PersistentMemory/{id}.json or .yaml: typed steps that "
        "read the stores and yield context items. The seed-002 shorthand (name, enabled, a "
        "top-level pipeline, `step:` for `type:`) is accepted too.",
        {**body, "$defs": defs},
    )


# -- ingestion --------------------------------------------------------------------------------------


def _processor_defs(src: Sources) -> dict[str, Schema]:
    names = [p.name for p in src.processors]
    defs: dict[str, Schema] = {
        "processor": {
            "type": "object",
            "title": "Processor",
            "description": "One processor: reads `input`, writes `output`.",
            "properties": {"type": enum(names, "The processor type.\n" + listing(
                (p.name, p.description + (" (runs the client's model)" if p.uses_llm else ""))
                for p in src.processors), title="Processor type")},
            "required": ["type"],
            "allOf": _kind_dispatch(("type",), names, "processor."),
        },
    }
    for spec in src.processors:
        params = (*COMMON_PROCESSOR_PARAMS, *spec.params)
        defs["processor." + spec.name] = obj(
            f"{spec.name} processor", spec.description,
            {"type": {"description": "The processor type."}, **_params(params)},
            [p.name for p in params if p.required], examples=[spec.example])
    return defs


def ingestion_pipeline(src: Sources) -> Schema:
    trigger = enum([t.name for t in src.triggers], "The event that runs the pipeline.\n"
                   + listing((t.name, t.description) for t in src.triggers), title="Trigger")
    body = fields({
        "$schema": SCHEMA_KEY,
        "id": file_id("ingestion pipeline"),
        "label": string("A human-readable name."),
        "description": string("What the pipeline stores."),
        "status": enum(PIPELINE_STATUSES, "Only active pipelines run on their triggers.", "active",
                       title="Status"),
        "trigger": one_or_list(trigger, "Trigger", "The trigger, or several triggers.", unique=True),
        "trigger_config": obj("Trigger settings", "Narrows which events run the pipeline.", {
            "where": described(ref("condition_list"),
                               "Conditions over the event (payload.<field>, scope variables)."),
        }),
        "processors": described({"type": "array", "items": ref("processor")},
                                "Processors, run in sequence."),
        "routing": described({"type": "array", "items": ref("route")}, "Where results are written."),
    }, ["id", "trigger"])
    defs = {
        **_processor_defs(src),
        "route": obj("Route", "Write an output (each element with foreach) to a store URI.",
                     _params(ROUTE_FIELDS), [p.name for p in ROUTE_FIELDS if p.required]),
        **condition_defs(src, ITEM_FIELD),
    }
    return document(
        "ingestion-pipeline", "Memory ingestion pipeline",
        "An ingestion pipeline in .codebolt/MemoryIngestion/{id}.json or .yaml: a trigger, "
        "processors run in sequence, and routes that write the results to stores.",
        {**body, "$defs": defs},
    )


# -- graph views ------------------------------------------------------------------------------------

_CYPHER_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"  # what Cypher accepts after `$` unquoted


def _typed_default(kind: str) -> Schema:
    """A default of another type than the parameter's makes every read of the view fail."""
    declared: Schema = {"properties": {"type": {"const": kind}}, "required": ["type"]}
    when = {"anyOf": [declared, {"not": {"required": ["type"]}}]} if kind == "string" else declared
    return {"if": when, "then": {"properties": {"default": {"type": kind}}}}


def graph_view(_src: Sources) -> Schema:
    param = obj("View parameter", "A Cypher parameter of the view ($name in the query).", {
        "type": enum(VARIABLE_TYPES, "The JSON type of the value.", "string", title="Parameter type"),
        "description": string("What the parameter means."),
        "default": {"description": "The value used when the step does not bind one; of the parameter's type."},
    }, allOf=[_typed_default(kind) for kind in VARIABLE_TYPES])
    body = fields({
        "$schema": SCHEMA_KEY,
        "id": file_id("graph view", VIEW_ID_PATTERN, "1-128 letters, digits, '_', '.' or '-', not starting "
                      "with '.' or '-'"),
        "description": string("What the view returns."),
        "cypher": described({"type": "string", "minLength": 1},
                            "The Cypher query; parameters are bound as $name, never spliced in. Runs on the "
                            "embedded graph only; use match (the portable form) for every backend."),
        "match": obj("Entity lookup", "The portable form: the nodes of an instance with this kind, name "
                     "and/or id, at least one of the three (a value \"$param\" is a parameter declared "
                     "in params).", {
                         "instance": string("The graph instance (default \"default\")."),
                         "kind": string("The node kind."),
                         "name": string("The exact node name."),
                         "id": string("The node id."),
                     }, anyOf=[{"required": [key]} for key in ("kind", "name", "id")]),
        "expand": obj("Expansion", "The portable form: the nodes reached from the matched ones, breadth-first.", {
            "depth": {"description": "Hops, 1-5 (or a \"$param\").", "default": 1},
            "edge_kinds": {"description": "Only edges of these kinds (or a \"$param\")."},
            "direction": {"description": "both, out or in (or a \"$param\").", "default": "both"},
        }),
        "limit": {"description": "The portable form: at most this many rows (or a \"$param\").", "default": 100},
        "params": described({
            "type": "object",
            "propertyNames": {"title": "Parameter name", "pattern": _CYPHER_NAME,
                              "description": "An identifier."},
            "additionalProperties": ref("param"),
        }, "The view's parameters by name."),
    }, ["id"])
    body["oneOf"] = [{"required": ["cypher"]}, {"required": ["match"]}]
    return document(
        "graph-view", "Knowledge-graph view",
        "A named, parameterised Cypher view in .codebolt/knowledgegraph/views/{id}.json, read by "
        "graph_view_read and graph_view_expand steps and graph:// references.",
        {**body, "$defs": {"param": param}},
    )
