"""Ingestion triggers, processors and routing (SPEC §7): each defined once.

The JSON Schemas, the linter, completion, hover and `memoryIngestion/processorSpecs` read these
tables. Parameters use the same `ParamSpec` as pipeline steps.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from .steps import (
    CONDITIONS,
    OBJECT,
    STRING,
    STRINGS,
    ParamSpec,
    choice,
    integer,
)


@frozen
class Trigger:
    name: str
    description: str


TRIGGERS: tuple[Trigger, ...] = (
    Trigger("onConversationStart", "A conversation with the agent starts."),
    Trigger("onConversationEnd", "The agent's current conversation completes."),
    Trigger("onTaskStart", "A task starts."),
    Trigger("onTaskCompleted", "A task transitions to the completed state."),
    Trigger("onTaskFailure", "A task fails or times out."),
    Trigger("onAction", "A tool call or significant action is logged."),
    Trigger("onError", "An error is reported."),
    Trigger("manual", "An agent or a person calls memoryIngestion/execute or sends memory/event explicitly."),
)

PIPELINE_STATUSES: tuple[str, ...] = ("active", "disabled")

# Where routing may write: the §5.1 stores that accept writes (file:// is read-only).
DESTINATION_SCHEMES: tuple[str, ...] = (
    "kv", "json", "markdown", "vector", "graph", "log", "episodic", "working", "blob",
)

NORMALIZER_OPERATIONS: tuple[str, ...] = ("trim", "whitespace", "lowercase", "remove_nulls", "redact_pii")
PARSER_FORMATS: tuple[str, ...] = ("json", "yaml", "markdown", "code")


@frozen
class ProcessorSpec:
    name: str
    description: str
    params: tuple[ParamSpec, ...]
    example: dict[str, Any]
    uses_llm: bool = False  # runs through the client's `llm/complete`; skipped without one

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)


# Every processor has these besides `type`.
COMMON_PROCESSOR_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("id", STRING, "The processor's id, unique in the pipeline; named in run results.", required=True),
    ParamSpec("input", STRING, "What it reads: `payload`, a path into it (`payload.summary`) or an "
              "earlier processor's output name."),
    ParamSpec("output", STRING, "The name its result is stored under, for later processors and routing."),
)

PROCESSORS: tuple[ProcessorSpec, ...] = (
    ProcessorSpec("chunker", "Split text into overlapping chunks of a token size.", (
        ParamSpec("chunk_size", integer(1), "Chunk size in tokens.", default=400),
        ParamSpec("overlap", integer(0), "Tokens shared by consecutive chunks.", default=50),
    ), {"id": "c1", "type": "chunker", "input": "payload.summary", "output": "chunks",
        "chunk_size": 400, "overlap": 50}),
    ProcessorSpec("normalizer", "Clean text: trim, collapse whitespace, lowercase, drop nulls, redact PII.", (
        ParamSpec("operations", {"type": "array", "items": {"enum": list(NORMALIZER_OPERATIONS)},
                                 "uniqueItems": True},
                  "The operations, applied in order.", default=["trim", "whitespace"]),
    ), {"id": "n1", "type": "normalizer", "input": "chunks", "output": "clean",
        "operations": ["trim", "whitespace", "redact_pii"]}),
    ProcessorSpec("parser", "Parse structured input into records.", (
        ParamSpec("format", choice(*PARSER_FORMATS), "The input format.", required=True),
        ParamSpec("path", STRING, "The part of the parsed document to keep (a JSON pointer or dotted path)."),
    ), {"id": "p1", "type": "parser", "input": "payload.result", "output": "record",
        "format": "json", "path": "/files"}),
    ProcessorSpec("vector_embed", "Embed each chunk for a vector collection.", (
        ParamSpec("collection", STRING, "The collection whose embedding settings to use "
                  "(default: the routing destination's)."),
        ParamSpec("model", STRING, "The embedding model (default: the collection's)."),
    ), {"id": "e1", "type": "vector_embed", "input": "chunks", "output": "embedded"}),
    ProcessorSpec("llm_extract", "Ask the client's model to extract structured fields.", (
        ParamSpec("instructions", STRING, "What to extract."),
        ParamSpec("output_schema", OBJECT, "A JSON Schema the extracted value must satisfy."),
    ), {"id": "x1", "type": "llm_extract", "input": "payload.summary", "output": "facts",
        "instructions": "List the decisions made."}, uses_llm=True),
    ProcessorSpec("llm_extract_kb", "Ask the client's model for knowledge-graph nodes and edges.", (
        ParamSpec("instructions", STRING, "What to extract."),
        ParamSpec("node_kinds", STRINGS, "The node kinds to extract (default: any)."),
        ParamSpec("edge_kinds", STRINGS, "The edge kinds to extract (default: any)."),
    ), {"id": "k1", "type": "llm_extract_kb", "input": "clean", "output": "graph",
        "node_kinds": ["Module", "Decision"], "edge_kinds": ["depends_on"]}, uses_llm=True),
    ProcessorSpec("blob_store", "Store raw bytes in a blob bucket.", (
        ParamSpec("bucket", STRING, "The bucket.", required=True),
        ParamSpec("key", STRING, "The key; may hold {{variable}} templates (default: generated)."),
    ), {"id": "b1", "type": "blob_store", "input": "payload.attachment", "output": "stored",
        "bucket": "attachments"}),
    ProcessorSpec("custom", "A Python callable registered under an entry point.", (
        ParamSpec("entry_point", STRING, "The entry point name (group context_assembly.processors).",
                  required=True),
        ParamSpec("config", OBJECT, "Passed to the callable as it is."),
    ), {"id": "u1", "type": "custom", "input": "payload", "output": "custom",
        "entry_point": "my_package:summarise"}),
)

ROUTE_FIELDS: tuple[ParamSpec, ...] = (
    ParamSpec("id", STRING, "A name for this route in run results."),
    ParamSpec("from", STRING, "The output (or `payload`) to write.", default="payload"),
    ParamSpec("foreach", {"type": "boolean"}, "Write each element of the array separately.", default=False),
    ParamSpec("condition", CONDITIONS, "Write only when this condition (or all of these) holds for the item."),
    ParamSpec("write_to", {"type": "string",
                           "pattern": "^(?:" + "|".join(DESTINATION_SCHEMES) + r")://\S"},
              "The destination: a store URI (" + ", ".join(f"{s}://" for s in DESTINATION_SCHEMES)
              + "; file:// is read-only). May hold {{variable}} templates filled from the event.",
              required=True),
)

_TRIGGERS: dict[str, Trigger] = {t.name: t for t in TRIGGERS}
_PROCESSORS: dict[str, ProcessorSpec] = {p.name: p for p in PROCESSORS}


def trigger_names() -> list[str]:
    return [t.name for t in TRIGGERS]


def lookup_trigger(name: str) -> Trigger | None:
    return _TRIGGERS.get(name) if isinstance(name, str) else None


def processor_names() -> list[str]:
    return [p.name for p in PROCESSORS]


def lookup_processor(name: str) -> ProcessorSpec | None:
    return _PROCESSORS.get(name) if isinstance(name, str) else None
