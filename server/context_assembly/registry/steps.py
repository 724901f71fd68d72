"""Persistent-memory pipeline step types (SPEC §5.2): each defined once, with its parameters.

The JSON Schemas, the linter, completion, hover, the reference docs, `persistentMemory/stepSpecs`
and the step runner read this table (at call time, through `step_types()` / `lookup_step()`), so
a new step type or parameter is one edit here: its entry names the function that runs it (`run`,
written beside its group's steps in `pipelines/steps/`), and nothing else lists step types.

A parameter's `schema` is a JSON Schema fragment; the fragments in CONDITION_LIST / CONDITIONS /
STEP_LIST refer to definitions every schema that embeds steps provides in its `$defs` (the
condition language of §4.2, and nested steps).
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from ..limits import BY_NAME

# A `${variable}` template: step parameters may hold one wherever a string or number is expected.
TEMPLATE_PATTERN = r"^\$\{[^}]+\}$"
TEMPLATE: dict[str, Any] = {
    "type": "string",
    "pattern": TEMPLATE_PATTERN,
    "description": "A ${variable} template, filled from the request's variables, the derived query "
    "or an earlier step's output.",
}

# Shared definitions (see the module docstring).
CONDITION_LIST: dict[str, Any] = {"$ref": "#/$defs/condition_list"}
CONDITIONS: dict[str, Any] = {"$ref": "#/$defs/conditions"}  # one condition or a list (AND)
STEP_LIST: dict[str, Any] = {"$ref": "#/$defs/step_list"}

MEMORY_STATUSES: tuple[str, ...] = ("active", "deprecated", "disabled")
FORMATS: tuple[str, ...] = ("bullet_list", "numbered", "prose", "json", "markdown")
VARIABLE_TYPES: tuple[str, ...] = ("string", "number", "integer", "boolean", "array", "object")
ALIAS_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"


def templated(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema`, or a `${variable}` template standing in for the value."""
    return {"anyOf": [schema, TEMPLATE]}


def integer(minimum: int = 1) -> dict[str, Any]:
    return templated({"type": "integer", "minimum": minimum})


def number(minimum: float | None = None, maximum: float | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return templated(schema)


def choice(*values: str) -> dict[str, Any]:
    return templated({"enum": list(values)})


STRING: dict[str, Any] = {"type": "string", "minLength": 1}
STRINGS: dict[str, Any] = {"type": "array", "items": STRING}
STRING_OR_STRINGS: dict[str, Any] = {"anyOf": [STRING, STRINGS]}
OBJECT: dict[str, Any] = {"type": "object"}


@frozen
class ParamSpec:
    name: str
    schema: dict[str, Any]  # JSON Schema fragment for the value
    description: str
    required: bool = False
    default: Any = None  # None = no default
    # the runner leaves `${...}` templates in it unfilled: the step fills them itself (per item, or
    # nested steps that must see the state at the time they run)
    lazy: bool = False
    # the settable limit (`limits.<name>`, limits.py) the store holds this count to: a larger value
    # fails every run, so the schema says so and `check` warns against the workspace's limits
    limit: str | None = None


@frozen
class StepGroup:
    name: str
    description: str


@frozen
class StepSpec:
    name: str
    group: str
    description: str
    params: tuple[ParamSpec, ...]
    example: dict[str, Any]
    # at least one of these parameters must be present (e.g. markdown_read: note or notes)
    one_of: tuple[str, ...] = ()
    # the store (URI scheme) the step reads: a write there invalidates cached pipeline results
    reads: str | None = None
    # the function that runs it, "module:function"; a module starting with "." is in
    # `context_assembly.pipelines.steps` (the registry names it: it cannot import the pipelines layer)
    run: str = ""

    @property
    def lazy_params(self) -> frozenset[str]:
        return frozenset(p.name for p in self.params if p.lazy)

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)


STEP_GROUPS: tuple[StepGroup, ...] = (
    StepGroup("input", "Derive or rewrite the query the later steps search with."),
    StepGroup("retrieval", "Read items from a store."),
    StepGroup("expansion", "Add related items from the knowledge graph."),
    StepGroup("filter", "Drop items."),
    StepGroup("aggregation", "Combine items."),
    StepGroup("ranking", "Order and score items."),
    StepGroup("transform", "Shape items for the context window."),
    StepGroup("control", "Branch or stop the pipeline."),
)

# Accepted by every step, besides `type` (or `step` in the seed-002 shorthand).
COMMON_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("alias", {"type": "string", "pattern": ALIAS_PATTERN},
              "A name for this step's output, so later steps can use it in ${alias} templates."),
    ParamSpec("timeout_ms", integer(1), "Give up on this step after this many milliseconds."),
)


def _p(name: str, schema: dict[str, Any], description: str, required: bool = False,
       default: Any = None, lazy: bool = False, limit: str | None = None) -> ParamSpec:
    if limit is not None:  # said where people read it: hover, the schema, stepSpecs
        description += f" At most limits.{limit} ({BY_NAME[limit].default:,} unless the settings change it)."
    return ParamSpec(name, schema, description, required, default, lazy, limit)


_LIMIT = "The most items to return."

STEP_TYPES: tuple[StepSpec, ...] = (
    # input
    StepSpec("derive_query", "input", "Derive the search query from the task and variables.", (
        _p("from", STRING_OR_STRINGS, "Variable keys to build the query from, in order "
           "(e.g. input.text, addVar.query).", default=["input.text"]),
        _p("method", choice("passthrough", "keyword_extract", "llm_rephrase"),
           "passthrough uses the text as it is; keyword_extract keeps the salient words; "
           "llm_rephrase asks the connected client's model to rephrase it.", default="passthrough"),
    ), {"type": "derive_query", "from": ["input.text", "addVar.query"], "method": "keyword_extract"},
             run=".input:derive_query"),
    StepSpec("rewrite_query", "input", "Replace the query with a template over variables and the current query.", (
        _p("template", STRING, "The new query text; ${query} is the current query.", required=True),
    ), {"type": "rewrite_query", "template": "${query} ${scope.project.project_name}"}, run=".input:rewrite_query"),
    # retrieval
    StepSpec("vector_search", "retrieval", "Similarity search in a vector collection.", (
        _p("collection", STRING, "The vector collection to search.", required=True),
        _p("query", STRING, "The search text (default: the derived query)."),
        _p("topK", integer(1), "How many nearest items to return.", default=5, limit="search_top_k"),
        _p("minScore", number(0, 1), "Drop items scoring below this similarity.", default=0.5),
        _p("mode", choice("vector", "hybrid"),
           "vector, or hybrid = vector + BM25 full text fused by reciprocal rank.", default="vector"),
    ), {"type": "vector_search", "collection": "docs", "topK": 8, "minScore": 0.3}, reads="vector",
             run=".retrieval:vector_search"),
    StepSpec("graph_view_read", "retrieval", "Run a named knowledge-graph view.", (
        _p("view", STRING, "The view id (knowledgegraph/views/{id}.json).", required=True),
        _p("params", OBJECT, "Values bound as Cypher parameters (never spliced into the query text)."),
    ), {"type": "graph_view_read", "view": "module-dependencies", "params": {"module": "${addVar.module}"}},
        reads="graph", run=".retrieval:graph_view_read"),
    StepSpec("kv_get", "retrieval", "Read keys from the KV store.", (
        _p("instance", STRING, "The KV instance.", default="default"),
        _p("namespace", STRING, "The namespace within the instance.", default="default"),
        _p("keys", STRING_OR_STRINGS, "The key or keys to read (default: every key of the namespace)."),
    ), {"type": "kv_get", "namespace": "prefs", "keys": ["user-preferences"]}, reads="kv", run=".retrieval:kv_get"),
    StepSpec("json_get", "retrieval", "Read a JSON document, or the part a JSON pointer names.", (
        _p("doc", STRING, "The document name.", required=True),
        _p("pointer", {"type": "string", "pattern": r"^(/([^~/]|~[01])*)*$"},
           'A JSON pointer into the document ("" = the whole document).', default=""),
    ), {"type": "json_get", "doc": "project-config", "pointer": "/conventions"}, reads="json",
             run=".retrieval:json_get"),
    StepSpec("markdown_read", "retrieval", "Read markdown notes from .codebolt/memory/.", (
        _p("note", STRING, "One note name (.codebolt/memory/<note>.md)."),
        _p("notes", STRINGS, "Several note names."),
    ), {"type": "markdown_read", "note": "architecture-notes"}, one_of=("note", "notes"), reads="markdown",
             run=".retrieval:markdown_read"),
    StepSpec("log_search", "retrieval", "Search the event log, newest first.", (
        _p("instance", STRING, "The event-log instance.", default="default"),
        _p("eventType", STRING_OR_STRINGS, "Only events of this type (or these types)."),
        _p("since", STRING, "Only events after this time: an ISO 8601 timestamp or a relative "
           "age such as -7d, -12h, -30m."),
        _p("fields", OBJECT, "Only events whose payload fields equal these values."),
        _p("limit", integer(1), _LIMIT, default=20, limit="log_limit"),
    ), {"type": "log_search", "eventType": "tool_error", "since": "-7d", "limit": 10}, reads="log",
             run=".retrieval:log_search"),
    StepSpec("episodic_recent", "retrieval", "The thread's most recent turns.", (
        _p("thread_id", STRING, "The thread (default: the request's thread)."),
        _p("limit", integer(1), "How many recent turns.", default=10, limit="log_limit"),
    ), {"type": "episodic_recent", "limit": 6}, reads="episodic", run=".retrieval:episodic_recent"),
    StepSpec("file_read", "retrieval", "Read a file of the workspace.", (
        _p("path", STRING, "A workspace-relative path.", required=True),
    ), {"type": "file_read", "path": "${addVar.active_file}"}, reads="file", run=".retrieval:file_read"),
    # expansion
    StepSpec("graph_neighbor_expand", "expansion", "Add the graph neighbours of the items found so far.", (
        _p("depth", integer(1), "How many hops to follow.", default=1, limit="graph_depth"),
        _p("edge_kinds", STRINGS, "Follow only these edge kinds (default: all)."),
        _p("limit", integer(1), "The most neighbours to add.", default=20, limit="graph_limit"),
    ), {"type": "graph_neighbor_expand", "depth": 1, "edge_kinds": ["DEPENDS_ON"]}, reads="graph",
             run=".expansion:graph_neighbor_expand"),
    StepSpec("graph_view_expand", "expansion", "Run a named graph view once per item found so far.", (
        _p("view", STRING, "The view id (knowledgegraph/views/{id}.json).", required=True),
        _p("params", OBJECT, "Cypher parameters; templates may read the current item.", lazy=True),
    ), {"type": "graph_view_expand", "view": "callers-of", "params": {"symbol": "${item.metadata.symbol}"}},
        reads="graph", run=".expansion:graph_view_expand"),
    # filter
    StepSpec("filter", "filter", "Keep the items for which every condition holds (the condition "
             "language of rules, over item fields such as score or metadata.kind).", (
        _p("where", CONDITION_LIST, "Conditions over item fields; all must hold.", required=True),
    ), {"type": "filter", "where": [{"field": "score", "operator": "gte", "value": 0.3}]},
             run=".filtering:filter_items"),
    StepSpec("deduplicate", "filter", "Drop items that repeat an earlier item's field value.", (
        _p("by", STRING_OR_STRINGS, "The item field (or fields) that identify a duplicate.", default="content"),
    ), {"type": "deduplicate", "by": "metadata.path"}, run=".filtering:deduplicate"),
    # aggregation
    StepSpec("group_by", "aggregation", "Group items by a field, one item per group.", (
        _p("field", STRING, "The item field to group by.", required=True),
    ), {"type": "group_by", "field": "metadata.module"}, run=".aggregation:group_by"),
    StepSpec("reduce_latest", "aggregation", "Keep only the newest item per key.", (
        _p("by", STRING, "The item field that identifies a key.", required=True),
        _p("time_field", STRING, "The item field holding the time.", default="metadata.timestamp"),
    ), {"type": "reduce_latest", "by": "metadata.key", "time_field": "metadata.updated_at"},
             run=".aggregation:reduce_latest"),
    StepSpec("merge", "aggregation", "Merge the outputs of earlier steps.", (
        _p("inputs", STRINGS, "The aliases of the steps to merge (default: all earlier outputs)."),
        _p("strategy", choice("concat", "interleave", "unique"),
           "concat appends in order; interleave alternates; unique drops repeated content.",
           default="concat"),
    ), {"type": "merge", "inputs": ["docs", "notes"], "strategy": "interleave"}, run=".aggregation:merge"),
    # ranking
    StepSpec("rank", "ranking", "Order the items.", (
        _p("strategy", choice("score_desc", "recency", "relevance"),
           "score_desc by score; recency newest first; relevance by similarity to the query.",
           default="score_desc"),
        _p("topK", integer(1), "Keep only this many items."),
    ), {"type": "rank", "strategy": "score_desc", "topK": 5}, run=".ranking:rank"),
    StepSpec("score", "ranking", "Recompute each item's score as a weighted sum of its fields.", (
        _p("weights", {"type": "object", "additionalProperties": number(), "minProperties": 1},
           "Item field -> weight (at least one).", required=True),
    ), {"type": "score", "weights": {"score": 1.0, "metadata.recency": 0.5}}, run=".ranking:score"),
    # transform
    StepSpec("summarize", "transform", "Condense the items: fewer items (max_items), shorter items (max_tokens: "
             "an extractive summary of each longer item, lead sentence plus those sharing most words with the "
             "query); at least one of the two.", (
        _p("max_items", integer(1), "The most items to keep; a last item names the rest."),
        _p("max_tokens", integer(1), "Items longer than this (ceil(chars/4)) are summarised to it."),
    ), {"type": "summarize", "max_items": 3, "max_tokens": 200}, one_of=("max_items", "max_tokens"),
             run=".transform:summarize"),
    StepSpec("format", "transform", "Render each item's content for the context window.", (
        _p("format", choice(*FORMATS), "A built-in format.", default="bullet_list"),
        _p("template", {"type": "string"}, "A logic-less {{field}} template; wins over format."),
    ), {"type": "format", "format": "markdown", "template": "### {{title}}\n{{content}}"},
             run=".transform:format_items"),
    StepSpec("annotate", "transform", "Add fields and provenance to each item's metadata.", (
        _p("fields", OBJECT, "Metadata fields to set (values may be templates). An assembly sets `origin` "
           "itself (why the memory ran): a field of that name is not kept there. `sources` and `source` "
           "are refused: what an item came from decides who may read it.", lazy=True),
        _p("provenance", {"type": "boolean"}, "Record the memory, step and store each item came from.",
           default=True),
    ), {"type": "annotate", "fields": {"topic": "docs"}, "provenance": True}, run=".transform:annotate"),
    # control
    StepSpec("conditional", "control", "Run then_steps when the condition holds, else else_steps.", (
        _p("condition", CONDITIONS, "A condition (or a list, all of which must hold) over variables.",
           required=True),
        _p("then_steps", STEP_LIST, "Steps to run when the condition holds.", required=True, lazy=True),
        _p("else_steps", STEP_LIST, "Steps to run otherwise.", lazy=True),
    ), {"type": "conditional",
        "condition": {"field": "addVar.phase", "operator": "eq", "value": "planning"},
        "then_steps": [{"type": "rank", "strategy": "recency"}]}, run=".control:conditional"),
    StepSpec("early_exit", "control", "Stop the pipeline here, returning the items so far, when the "
             "condition holds or at least min_items items are present.", (
        _p("when", CONDITIONS, "A condition (or a list, all of which must hold)."),
        _p("min_items", integer(0), "Stop when at least this many items are present."),
    ), {"type": "early_exit", "min_items": 5}, one_of=("when", "min_items"), run=".control:early_exit"),
)

_INDEX: tuple[tuple[StepSpec, ...], dict[str, StepSpec]] = ((), {})


def step_types() -> tuple[StepSpec, ...]:
    """The step types as the table holds them now (read at call time, so tests may extend it)."""
    return STEP_TYPES


def step_names() -> list[str]:
    return [s.name for s in STEP_TYPES]


def lookup_step(name: object) -> StepSpec | None:
    global _INDEX
    if _INDEX[0] is not STEP_TYPES:
        _INDEX = (STEP_TYPES, {s.name: s for s in STEP_TYPES})
    return _INDEX[1].get(name) if isinstance(name, str) else None
