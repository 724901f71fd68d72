"""assembly-request (SPEC §6), assembled-context (§6 stage 7) and settings (§9)."""

from __future__ import annotations

from ..limits import LIMITS
from .fragments import (
    FILE_ID_PATTERN,
    FILE_ID_RULE,
    SAFE_INTEGER,
    SCHEMA_KEY,
    Schema,
    boolean,
    described,
    document,
    enum,
    fields,
    integer,
    listing,
    obj,
    ref,
    string,
    strings,
)
from .sources import Sources

_SCALAR = {"type": ["string", "number", "boolean", "null"]}


def _scope_variables(src: Sources) -> Schema:
    scopes = {
        scope.name: {
            "type": ["object", "null"],
            "title": f"{scope.name} scope",
            "description": f"{scope.description} Read as scope.{scope.name}.<field>; fields beyond the "
            "documented ones are allowed and looked up the same way.",
            "properties": {
                name: described(_SCALAR, f"Read as scope.{scope.name}.{name}.") for name in scope.fields
            },
        }
        for scope in src.scopes
    }
    return obj("Scope variables", "The 8 scopes of the current execution context (all optional, "
               "but the object itself is required).", scopes)


def assembly_request(src: Sources) -> Schema:
    body = fields({
        "scope_variables": ref("scope_variables"),
        "additional_variables": described(
            {"type": "object"}, "Custom variables (phase, query, ...), read as addVar.<name>."),
        "input": obj("Input", "The task input.", {
            "text": described({"type": ["string", "null"]}, "The task text, read as input.text; also the "
                              "default search query. @mentions in it are explicit references."),
        }),
        "explicit_memory": strings("Memories to include whatever the rules say: persistent-memory ids "
                                   "or store URIs."),
        "constraints": obj("Constraints", "Limits on the assembled context.", {
            "max_tokens": described({"type": ["integer", "null"], "minimum": 1, "maximum": SAFE_INTEGER},
                                    "The token budget (null = none; the settings' default applies)."),
        }),
        "rule_engine_ids": strings("Evaluate exactly these rule engines (default: every enabled one)."),
        "thread_id": string("The conversation thread (header x-thread-id in the source documents)."),
        "explain": enum(("all", "matched", "none"), "How much of the per-condition trace evaluateRules and "
                        "contextRuleEngine/evaluate return (assemble ignores it).\n" + listing((
                            ("all", "every rule of the engines, matched or not, each with its conditions"),
                            ("matched", "only the rules that matched, each with its conditions"),
                            ("none", "only the rules that matched, without conditions (the fastest)"),
                        )), "all"),
        "trace_format": enum(("full", "compact"), "How evaluateRules and contextRuleEngine/evaluate write the "
                             "rules and the per-condition trace (assemble ignores it).\n" + listing((
                                 ("full", "every rule entry whole, one object per condition (the SPEC's shape)"),
                                 ("compact", "the answer's other keys as they are and, per engine, the key of its "
                                  "static layout (contextRuleEngine/traceLayout) and the matched rules' indexes "
                                  "instead of their entries; with explain all or matched also every condition's "
                                  "outcome as bits and each variable's value once in actual_values. The client "
                                  "expands it into exactly the full answer"),
                             )), "full"),
        "system_prompt": described({"type": ["string", "null"]}, "The agent's system prompt: packed first in "
                                   "constraints (critical)."),
        "tools": described({"type": ["array", "null"], "items": obj(
            "Tool", "One tool schema as the agent's model API takes it.",
            {"name": described({"type": "string", "minLength": 1}, "The tool's name."),
             "description": string("What the tool does (compared with the task).")},
            ["name"], closed=False)},
            "Tool schemas ({name, description, parameters | input_schema, ...}): the ones most relevant to the task "
            "(settings tools.top_k, tools.min_score) go to knowledge (high); the trace says why."),
        "assembly_id": described({"type": "string", "pattern": FILE_ID_PATTERN},
                                 "An id for this assembly, chosen by the caller (default: generated): its "
                                 "contextAssembly/* notifications and its snapshot file carry it, so a caller "
                                 "running several at once can tell its events apart. " + FILE_ID_RULE + "."),
        "workDoneToken": described({"type": ["integer", "string"]}, "LSP progress token."),
        "partialResultToken": described({"type": ["integer", "string"]}, "LSP partial-result token."),
    }, ["scope_variables"])
    return document(
        "assembly-request", "Context assembly request",
        "What contextAssembly/assemble, validate and evaluateRules take.",
        {**body, "$defs": {"scope_variables": _scope_variables(src)}},
    )


def _context_item(src: Sources) -> Schema:
    return obj("Context item", "One piece of assembled context.", {
        "id": string("The item's id."),
        "content": string("The text handed to the model."),
        "memory_id": described({"type": ["string", "null"]},
                               "The persistent-memory definition that produced it (null for a direct "
                               "store reference)."),
        "source": string("Where it came from: a store URI or memory id."),
        "section": enum(src.section_names, "The section it belongs to.", title="Section"),
        "priority": enum(src.priority_names, "Its priority within the section.", title="Priority"),
        "score": described({"type": ["number", "null"]}, "Its relevance score (after boosts), if any."),
        "tokens": integer("Its token estimate."),
        "metadata": described({"type": "object"}, "Anything else: provenance, title, path, ..."),
    }, ["id", "content", "memory_id", "source", "section", "priority", "score", "tokens", "metadata"])


def _section_trace() -> Schema:
    return obj("Section trace", "What the budget did to one section.", {
        "tokens": integer("Tokens the section's kept items use."),
        "items": integer("Items kept."),
        "truncated": boolean("True when caps or the budget dropped or cut anything here."),
        "dropped": integer("Items dropped by caps and the budget."),
    }, ["tokens", "items", "truncated", "dropped"])


def _open_records(description: str) -> Schema:
    return described({"type": "array", "items": {"type": "object"}}, description)


def assembled_context(src: Sources) -> Schema:
    context = obj("Context", "The sections in their fixed order (highest priority first).\n"
                  + listing((s.name, s.description) for s in src.sections),
                  {s.name: described({"type": "array", "items": ref("context_item")}, s.description)
                   for s in src.sections},
                  src.section_names)
    trace = obj("Trace", "Why the context is what it is.", {
        "memory_calls": _open_records("Each memory pipeline run: memory, source of activation, "
                                      "duration, items, cache hit, error."),
        "rules_applied": _open_records("Each rule that matched and what it did."),
        "variables_used": strings("Variable keys read by rules and pipelines."),
        "missing_variables": strings("Variable keys read but absent from the request."),
        "sections": obj("Sections", "Per-section token use.",
                        {s.name: ref("section_trace") for s in src.sections}),
        "decisions": _open_records("Conflicts settled, caps applied, items dropped, and why."),
        "ladder": _open_records("Each step of the budget ladder: strategy, action, item, tokens before and "
                                "after, reason (and a summary's method)."),
        "tools": _open_records("Each tool of the request: name, score, kept, reason."),
    }, ["memory_calls", "rules_applied", "variables_used", "missing_variables", "sections", "decisions"],
        closed=False)
    meta = obj("Meta", "About this assembly.", {
        "assembly_id": string("The id notifications and snapshots carry."),
        "token_estimate": integer("Tokens the context uses; never above max_tokens."),
        "total_items": integer("Items in the context."),
        "truncated": boolean("True when the budget dropped or cut anything."),
        "duration_ms": described({"type": "number", "minimum": 0}, "Wall time of the assembly."),
    }, ["assembly_id", "token_estimate", "total_items", "truncated", "duration_ms"], closed=False)
    body = fields({"context": context, "trace": trace, "meta": meta}, ["context", "trace", "meta"])
    return document(
        "assembled-context", "Assembled context",
        "What contextAssembly/assemble returns: the sections, the trace and the meta data.",
        {**body, "$defs": {"context_item": _context_item(src), "section_trace": _section_trace()}},
    )


def _number(description: str, default: float, maximum: float | None = None) -> Schema:
    schema: Schema = {"type": "number", "minimum": 0}
    if maximum is not None:
        schema["maximum"] = maximum
    return described(schema, description, default)


def _budget(src: Sources) -> Schema:
    ladder = described({"type": "array", "items": {"enum": [s.name for s in src.strategies]},
                        "uniqueItems": True},
                       "The strategies applied, in this order, when the context is over its budget; leave one "
                       "out to switch it off (whole items are still dropped from the lowest-priority end).\n"
                       + listing((s.name, s.description) for s in src.strategies),
                       [s.name for s in src.strategies])
    return obj("Budget", "What the assembly does when the context is over its budget (the seed-003 ladder).", {
        "ladder": ladder,
        "relevance_floor": _number("relevance_floor: scored hits below this are dropped first.", 0.2, 1),
        "keep_recent_turns": integer("compress_turns: the newest turns of a thread kept verbatim.", 0, 4),
        "summarize_above_tokens": integer("summarize: items longer than this are summarised.", 1, 300),
        "summary_tokens": integer("compress_turns, summarize: the size a summary aims at.", 1, 120),
        "summary_timeout_ms": integer("summarize: how long the client's model may take per summary before "
                                      "the extractive summary is used.", 1, 3000),
        "min_truncated_tokens": integer("truncate: a cut item keeps at least this many tokens, else it is "
                                        "dropped.", 1, 8),
        "warnings_max_tokens": integer("The warnings section's own cap (warnings of one kind are folded "
                                       "first).", 1, 200),
        "vector_min_score": _number("The score floor of a vector:// collection used directly as a reference.",
                                    0.2, 1),
    })


def settings(src: Sources) -> Schema:
    max_tokens = described({"type": ["integer", "null"], "minimum": 1, "maximum": SAFE_INTEGER},
                           "The default token budget of an assembly (null = no budget).")
    max_tokens["default"] = None
    body = fields({
        "$schema": SCHEMA_KEY,
        "max_tokens": max_tokens,
        "tokenizer": enum(("estimate", "cl100k", "o200k"), "How tokens are counted.\n" + listing((
            ("estimate", "ceil(characters / 4), as the source documents do"),
            ("cl100k", "exact, the cl100k_base encoding"),
            ("o200k", "exact, the o200k_base encoding"),
        )), "estimate", title="Tokenizer"),
        "pipeline_timeout_ms": integer("Timeout of each memory pipeline.", 1, 5000),
        "cache_ttl_s": described({"type": "number", "minimum": 0}, "How long pipeline results are "
                                 "cached (0 = no cache); any store write invalidates them.", 30),
        "snapshots": boolean("Write each assembled context to .codebolt/memory/context/{assembly_id}.json "
                             "for replay.", False),
        "stores": obj("Stores", "Store backends.", {
            "backend": enum(("embedded", "postgres"), "The store implementation.\n" + listing((
                ("embedded", "SQLite, Kuzu and files under .codebolt/: nothing to install or start"),
                ("postgres", "one PostgreSQL database with pgvector that many sidecars share (stores.dsn)"),
            )), "embedded", title="Store backend"),
            "dsn": described({"type": "string", "minLength": 1}, "PostgreSQL connection string "
                             "(postgresql://user@host/db, or ?host=/socket/dir); the environment variable "
                             "CONTEXT_ASSEMBLY_DSN overrides it, so passwords stay out of this file."),
            "project": described({"type": "string", "minLength": 1, "maxLength": 128}, "The project key in the "
                                 "shared database (default: the workspace folder's name); sidecars with the "
                                 "same key share every store."),
            "invalidation": enum(("notify", "read"), "postgres: how a sidecar learns that another one wrote, "
                                 "so its cached pipeline results are not used.\n" + listing((
                                     ("notify", "pushed by the database (LISTEN/NOTIFY) and kept in memory; "
                                      "read from the database before each use while the push is not proven live"),
                                     ("read", "read from the database before each use of a cached result: no "
                                      "window at all between a write and its effect elsewhere, one round trip "
                                      "more per assembly"),
                                 )), "notify", title="Cache invalidation"),
            "ef_search": described({"type": "integer", "minimum": 10, "maximum": 1000}, "postgres: how many "
                                   "candidates an HNSW vector search looks at (pgvector's hnsw.ef_search, set per "
                                   "search): higher finds more of the exact nearest chunks and takes longer "
                                   "(bench/stores measures both).", 100),
        }),
        "diagnostics_debounce_ms": integer("Delay before an edited file is re-validated.", 0, 300),
        "budget": _budget(src),
        "tools": obj("Tools", "Tool schemas a request passes in (`tools`): which are kept.", {
            "top_k": integer("At most this many tools, the most relevant to the task first.", 0, 8),
            "min_score": _number("Tools less similar to the task than this are left out.", 0.1, 1),
        }),
        "limits": obj("Limits", "Size limits (README, \"Running it for a team\"); a value past one is refused "
                      "with a clear error.", {spec.name: {**integer(spec.description, spec.minimum, spec.default),
                                                         "maximum": spec.maximum}
                                              for spec in LIMITS if spec.settable}),
        "access": {"type": "object", "description": "Access policy per token name (an agent or a role): the "
                   "methods it may call and the memory URIs it may read and write (glob patterns). Read "
                   "from this file only, never from a client's configuration.",
                   "additionalProperties": {"type": "object", "title": "Grant",
                                            "description": "What one token name may do; a list left out "
                                                           "allows everything of its kind.",
                                            "additionalProperties": False, "properties": {
                       key: {"type": "array", "items": {"type": "string"}, "description": text}
                       for key, text in (("methods", "Method names it may call (globs, e.g. memory/*)."),
                                         ("read", "Memory URIs it may read, in any method (reference patterns: "
                                                  "* within one segment, ** across, e.g. kv://users/*)."),
                                         ("write", "Memory URIs it may write or delete, in any method "
                                                   "(memory/*, endTurn, ingestion routes)."))}}},
    })
    return document(
        "settings", "Context assembly settings",
        "Settings in .codebolt/context-assembly.json (overridable through the LSP configuration "
        "section contextAssembly).",
        body,
    )
