"""Realistic documents for every published schema: valid ones, and broken ones with the JSON
pointers their errors must point at."""

from __future__ import annotations

from typing import Any

from context_assembly.registry.ingestion import PROCESSORS, TRIGGERS
from context_assembly.registry.operators import OPERATORS
from context_assembly.registry.steps import STEP_TYPES

Doc = dict[str, Any]


def _engine(*conditions: Any, then: Doc | None = None) -> Doc:
    return {"id": "e", "rules": [{"id": "r", "when": list(conditions), "then": then or {"add_memories": ["m"]}}]}


RULE_ENGINE_SPEC: Doc = {
    "$schema": "../../schemas/rule-engine.schema.json",
    "id": "planning", "name": "Planning phase rules", "description": "Activate architecture memories.",
    "enabled": True,
    "rules": [
        {"id": "arch-in-planning", "name": "Include architecture docs in planning", "priority": 10,
         "when": [{"field": "addVar.phase", "operator": "eq", "value": "planning"}],
         "then": {"add_memories": ["architecture-docs", "project-conventions"]}},
    ],
}

RULE_ENGINE_FULL: Doc = {
    "id": "everything",
    "rules": [
        {"id": "always", "then": {"add_memories": ["style-guide"]}},
        {"id": "nested", "priority": 2.5, "when": [
            {"any": [
                {"field": "task.text", "operator": "contains", "value": "refactor", "ignore_case": False},
                {"all": [
                    {"field": "scope.task.task_type", "operator": "in", "value": ["bugfix", "refactor"]},
                    {"not": {"field": "scope.project.project_name", "operator": "matches", "value": "^legacy"}},
                ]},
            ]},
            {"field": "session.turnCount", "operator": "lte", "value": "10"},
            {"field": "memory.source", "operator": "startsWith", "value": "vector://"},
            {"field": "addVar.my-var", "operator": "exists"},
            {"field": "agent.name", "operator": "not_equals", "value": None},
        ], "then": {
            "add_memories": ["architecture-docs", "kv://user-preferences"],
            "exclude_memories": ["vector://test-*"],
            "caps": [{"target": "vector://*", "max_tokens": 512}, {"target": "history", "max_items": 3},
                     {"target": "knowledge", "max_tokens": 2000, "max_items": 10}],
            "set_priority": {"history": "high", "suggestions": "low"},
            "boost": [{"target": "AuthService", "weight": 2.0}, {"target": "markdown://decisions", "weight": 1}],
        }},
    ],
}

# one engine per operator spelling, with the registry's own example value
OPERATOR_ENGINES: list[tuple[str, Doc]] = [
    (spelling, _engine({**op.example, "operator": spelling}))
    for op in OPERATORS for spelling in (op.name, *op.aliases)
]

CONTEXT_RULES: list[Any] = [
    {"condition": {"field": "task.text", "op": "contains", "value": "refactor"},
     "action": {"include": "markdown://architecture-notes"}},
    {"name": "include-architecture-on-refactor",
     "condition": {"field": "task.text", "op": "contains", "value": "refactor"},
     "action": {"include": "markdown://architecture-decisions"}},
    [
        {"condition": [{"field": "task.text", "op": "contains", "value": "payment"},
                       {"field": "task.text", "op": "not_contains", "value": "refund"}],
         "action": {"include": "vector://payment-architecture"}},
        {"name": "always-style-guide", "condition": {"field": "task.text", "op": "exists"},
         "action": {"include": "markdown://style-guide"}},
        {"condition": {"field": "task.text", "op": "contains", "value": "quick question"},
         "action": {"cap": {"source": "vector://", "tokens": 512}}},
        {"name": "short-history-for-quick-questions",
         "condition": {"field": "task.type", "op": "equals", "value": "question"},
         "action": {"cap": {"section": "history", "tokens": 1000}}},
        {"name": "code-agent-context", "condition": {"field": "agent.name", "op": "equals", "value": "code-agent"},
         "action": {"include": ["json://code-agent-config", "kv://agent-prefs"], "exclude": "vector://test-suite-history"}},
        {"condition": {"field": "session.turnCount", "op": "gt", "value": 20},
         "action": {"setPriority": {"section": "history", "value": "high"}}},
        {"condition": {"any": [{"field": "project.name", "op": "endsWith", "value": "-api"},
                               {"not": {"field": "scope.agent.agent_type", "op": "in", "value": ["reviewer"]}}]},
         "action": {"exclude": ["vector://noise"]}},
    ],
    {"when": {"task_contains": ["auth", "login", "session"]},
     "then": {"always_include": [{"path": "docs/security-decisions.md"}],
              "boost": [{"kg_entity": "AuthService", "weight": 2.0}],
              "exclude": [{"path": "generated/**"}]}},
]

PERSISTENT_MEMORY_SPEC: Doc = {
    "id": "architecture-docs", "label": "Architecture docs", "description": "Design documents.",
    "version": "1.0.0", "status": "active",
    "inputs_scope": ["project"],
    "additional_variables": [{"name": "phase", "type": "string", "required": False}],
    "retrieval": {"pipeline": [
        {"type": "derive_query", "from": ["input.text", "addVar.query"], "method": "keyword_extract"},
        {"type": "vector_search", "collection": "docs", "topK": 8, "minScore": 0.3},
        {"type": "filter", "where": [{"field": "score", "operator": "gte", "value": 0.3}]},
        {"type": "rank", "strategy": "score_desc", "topK": 5},
        {"type": "format", "format": "markdown", "template": "### {{title}}\n{{content}}"},
    ]},
    "contribution": {"section": "knowledge", "priority": "high", "format": "markdown",
                     "max_items": 5, "max_tokens": 2000},
}

PERSISTENT_MEMORY_SHORTHAND: Doc = {
    "name": "recent-errors",
    "enabled": True,
    "pipeline": [
        {"step": "derive_query", "from": "input.text"},
        {"step": "log_search", "eventType": ["tool_error", "test_failure"], "since": "-7d",
         "fields": {"agent": "code-agent"}, "limit": "${addVar.limit}", "alias": "errors", "timeout_ms": 500},
        {"step": "reduce_latest", "by": "metadata.tool"},
        {"step": "rank", "strategy": "recency", "topK": 3},
        {"step": "format", "format": "bullet_list"},
    ],
}

PERSISTENT_MEMORY_ALL_STEPS: Doc = {
    "id": "every-step",
    "retrieval": {"pipeline": [spec.example for spec in STEP_TYPES] + [
        {"type": "markdown_read", "notes": ["a", "b"]},
        {"type": "early_exit", "when": [{"any": [{"field": "items.count", "operator": "gte", "value": 3},
                                                 {"not": {"field": "addVar.more", "operator": "exists"}}]}]},
        {"type": "conditional", "condition": [{"field": "addVar.phase", "operator": "in", "value": ["a"]}],
         "then_steps": [{"step": "vector_search", "collection": "docs", "mode": "hybrid", "topK": "${addVar.k}"}],
         "else_steps": [{"type": "conditional", "condition": {"field": "x", "operator": "exists"},
                         "then_steps": []}]},
    ]},
}

INGESTION_SPEC: Doc = {
    "id": "task-completion-embed", "label": "Embed task completions", "status": "active",
    "trigger": "onTaskCompleted",
    "trigger_config": {"where": [{"field": "payload.status", "operator": "eq", "value": "done"}]},
    "processors": [
        {"id": "c1", "type": "chunker", "input": "payload.summary", "output": "chunks",
         "chunk_size": 400, "overlap": 50},
        {"id": "e1", "type": "vector_embed", "input": "chunks", "output": "embedded"},
    ],
    "routing": [{"from": "embedded", "foreach": True,
                 "condition": [{"field": "score", "operator": "gt", "value": 0.7}],
                 "write_to": "vector://task-history"}],
}

INGESTION_ALL: Doc = {
    "id": "all-processors",
    "trigger": [t.name for t in TRIGGERS],
    "processors": [p.example for p in PROCESSORS],
    "routing": [
        {"from": "graph", "write_to": "graph://main/node/{{id}}"},
        {"from": "facts", "condition": {"field": "kind", "operator": "eq", "value": "decision"},
         "write_to": "kv://sessions/{{sessionId}}"},
        {"id": "log", "write_to": "log://agent"},
    ],
}

GRAPH_VIEW: Doc = {
    "id": "module-dependencies",
    "description": "Modules a module depends on.",
    "cypher": "MATCH (m:Module {name: $module})-[:DEPENDS_ON*1..$depth]->(d) RETURN d",
    "params": {"module": {"type": "string", "description": "The module."},
               "depth": {"type": "integer", "default": 2}},
}

REQUEST: Doc = {
    "scope_variables": {
        "swarm": {"swarm_id": "s1", "swarm_name": "alpha"},
        "project": {"project_id": "p1", "project_path": "/srv/app", "project_name": "app"},
        "agent": {"agent_id": "a1", "agent_name": "code-agent", "agent_type": "coder"},
        "thread": {"thread_id": "t1"}, "task": {"task_id": "k1", "task_type": "bugfix"},
        "user": {"user_id": "u1"}, "org": {"org_id": "o1"}, "orchestrator": None,
    },
    "additional_variables": {"phase": "planning", "query": "auth flow", "turn_count": 3},
    "input": {"text": "refactor @architecture-docs"},
    "explicit_memory": ["kv://user-preferences"],
    "constraints": {"max_tokens": 8000},
    "rule_engine_ids": ["planning"],
    "thread_id": "t1",
}

_ITEM: Doc = {"id": "i1", "content": "Use the repository pattern.", "memory_id": "architecture-docs",
              "source": "vector://docs/adr-1.md", "section": "knowledge", "priority": "high",
              "score": 0.82, "tokens": 7, "metadata": {"title": "ADR 1"}}
_SECTIONS = ("state", "warnings", "constraints", "knowledge", "history", "suggestions", "working_memory")

ASSEMBLED: Doc = {
    "context": {name: ([_ITEM] if name == "knowledge" else []) for name in _SECTIONS},
    "trace": {
        "memory_calls": [{"memory_id": "architecture-docs", "duration_ms": 4.2, "items": 1}],
        "rules_applied": [{"engine_id": "planning", "rule_id": "arch-in-planning"}],
        "variables_used": ["addVar.phase"], "missing_variables": [],
        "sections": {"knowledge": {"tokens": 7, "items": 1, "truncated": False, "dropped": 0}},
        "decisions": [],
    },
    "meta": {"assembly_id": "a-1", "token_estimate": 7, "total_items": 1, "truncated": False,
             "duration_ms": 12.5},
}

SETTINGS: Doc = {"$schema": "../schemas/settings.schema.json", "max_tokens": None, "tokenizer": "cl100k",
                 "pipeline_timeout_ms": 5000, "cache_ttl_s": 0.5, "snapshots": True,
                 "stores": {"backend": "embedded"}, "diagnostics_debounce_ms": 0}

VALID: list[tuple[str, Any]] = [
    ("rule-engine", RULE_ENGINE_SPEC),
    ("rule-engine", RULE_ENGINE_FULL),
    *[("rule-engine", doc) for _, doc in OPERATOR_ENGINES],
    *[("context-rules", doc) for doc in CONTEXT_RULES],
    ("persistent-memory", PERSISTENT_MEMORY_SPEC),
    ("persistent-memory", PERSISTENT_MEMORY_SHORTHAND),
    ("persistent-memory", PERSISTENT_MEMORY_ALL_STEPS),
    ("ingestion-pipeline", INGESTION_SPEC),
    ("ingestion-pipeline", INGESTION_ALL),
    ("graph-view", GRAPH_VIEW),
    ("assembly-request", REQUEST),
    ("assembly-request", {"scope_variables": {}}),
    ("assembled-context", ASSEMBLED),
    ("settings", SETTINGS),
    ("settings", {}),
]


def _cond(**condition: Any) -> Doc:
    return _engine(condition)


# (schema, document, the JSON pointers the errors must be at)
INVALID: list[tuple[str, str, Any, set[str]]] = [
    ("unknown operator", "rule-engine",
     _cond(field="input.text", operator="looks_like", value="x"), {"/rules/0/when/0/operator"}),
    ("string value for gt", "rule-engine", _cond(field="addVar.n", operator="gt", value="many"),
     {"/rules/0/when/0/value"}),
    ("boolean value for gte", "rule-engine", _cond(field="addVar.n", operator="gte", value=True),
     {"/rules/0/when/0/value"}),
    ("in with a scalar", "rule-engine", _cond(field="addVar.env", operator="in", value="prod"),
     {"/rules/0/when/0/value"}),
    ("missing value", "rule-engine", _cond(field="addVar.env", operator="eq"), {"/rules/0/when/0"}),
    ("unsafe regex", "rule-engine", _cond(field="input.text", operator="regex", value="(?<=a)b"),
     {"/rules/0/when/0/value"}),
    ("unknown scope", "rule-engine", _cond(field="scope.foo.bar", operator="exists"),
     {"/rules/0/when/0/field"}),
    ("not a variable", "rule-engine", _cond(field="phase", operator="exists"), {"/rules/0/when/0/field"}),
    ("unknown property", "rule-engine",
     {"id": "e", "color": "red", "rules": [{"id": "r", "then": {}, "prio": 1}]}, {"", "/rules/0"}),
    ("missing then", "rule-engine", {"id": "e", "rules": [{"id": "r", "when": []}]}, {"/rules/0"}),
    ("missing id", "rule-engine", {"rules": []}, {""}),
    ("bad section in set_priority", "rule-engine",
     _engine(then={"set_priority": {"footnotes": "high", "history": "urgent"}}),
     {"/rules/0/then/set_priority", "/rules/0/then/set_priority/history"}),
    ("bad actions", "rule-engine",
     _engine(then={"add_memories": ["a", "a"], "caps": [{"target": "x"}], "boost": [{"target": "x", "weight": 0}]}),
     {"/rules/0/then/add_memories", "/rules/0/then/caps/0", "/rules/0/then/boost/0/weight"}),
    ("deep nested mistake", "rule-engine",
     _cond(any=[{"all": [{"not": {"field": "input.text", "operator": "startsWith", "value": 1}}]}]),
     {"/rules/0/when/0/any/0/all/0/not/value"}),
    ("condition not an object", "rule-engine", _engine("input.text contains x"), {"/rules/0/when/0"}),
    ("group with extra key", "rule-engine", _cond(any=[], field="x"), {"/rules/0/when/0"}),
    ("seed-004 bad op", "context-rules",
     [{"condition": {"field": "task.text", "op": "like", "value": "x"}, "action": {"include": "kv://a"}}],
     {"/0/condition/op"}),
    ("seed-004 bad action", "context-rules",
     {"condition": {"field": "task.text", "op": "exists"},
      "action": {"cap": {"tokens": 5}, "setPriority": {"section": "footer", "value": "high"}, "drop": "x"}},
     {"/action", "/action/cap", "/action/setPriority/section"}),
    ("seed-004 empty action", "context-rules", {"action": {}}, {"/action"}),
    ("bad step type", "persistent-memory",
     {"id": "m", "retrieval": {"pipeline": [{"type": "vector_serach", "collection": "docs"}]}},
     {"/retrieval/pipeline/0/type"}),
    ("bad step params", "persistent-memory",
     {"name": "m", "pipeline": [{"step": "vector_search", "topK": "many", "mode": "fuzzy"},
                                {"step": "kv_get", "key": "a"}, {"alias": "x"},
                                {"type": "filter", "where": [{"field": "score", "operator": "gte", "value": "hi"}]}]},
     {"/pipeline/0", "/pipeline/0/topK", "/pipeline/0/mode", "/pipeline/1", "/pipeline/2",
      "/pipeline/3/where/0/value"}),
    ("memory without pipeline or id", "persistent-memory", {"label": "x", "status": "paused"}, {"", "/status"}),
    ("bad contribution", "persistent-memory",
     {"id": "m", "retrieval": {"pipeline": []}, "contribution": {"section": "misc", "priority": "urgent"}},
     {"/contribution/section", "/contribution/priority"}),
    ("bad ingestion", "ingestion-pipeline",
     {"id": "i", "trigger": "onSave", "processors": [{"id": "c", "type": "chunker", "chunk_size": 0},
                                                     {"type": "splitter"}],
      "routing": [{"from": "chunks", "write_to": "file://x"}]},
     {"/trigger", "/processors/0/chunk_size", "/processors/1/type", "/routing/0/write_to"}),
    ("bad graph view", "graph-view", {"id": "v", "params": {"a b": {"type": "text"}}},
     {"", "/params", "/params/a b/type"}),
    ("settings with unknown key", "settings", {"max_token": 100, "tokenizer": "gpt2"}, {"", "/tokenizer"}),
    ("settings wrong types", "settings", {"max_tokens": 0, "stores": {"backend": "mysql"}, "snapshots": "yes"},
     {"/max_tokens", "/stores/backend", "/snapshots"}),
    ("request without scope_variables", "assembly-request", {"input": {"text": "hi"}}, {""}),
    ("max_tokens 0", "assembly-request", {"scope_variables": {}, "constraints": {"max_tokens": 0}},
     {"/constraints/max_tokens"}),
    ("unknown scope name", "assembly-request", {"scope_variables": {"galaxy": {"id": 1}, "task": "t1"}},
     {"/scope_variables", "/scope_variables/task"}),
    ("context missing a section", "assembled-context",
     {**ASSEMBLED, "context": {k: v for k, v in ASSEMBLED["context"].items() if k != "warnings"}},
     {"/context"}),
    ("bad context item", "assembled-context",
     {**ASSEMBLED, "context": {**ASSEMBLED["context"], "state": [{**_ITEM, "section": "misc", "tokens": -1}]}},
     {"/context/state/0/section", "/context/state/0/tokens"}),
]
