"""A realistic, deterministic workspace for the assembly benchmark (`run.py`).

Everything comes from one seeded `random.Random`: the same sizes and seed give the same files and
store contents. `ensure()` reuses a workspace whose manifest records the same parameters and
generator version, and rebuilds it otherwise.

Contents, at full size (`Sizes.full()`; `--quick` is about ten times smaller):

- ~20 persistent-memory definitions covering every section and the step kinds kv_get, json_get,
  markdown_read (several notes), log_search, episodic_recent, graph_view_read +
  graph_neighbor_expand, vector_search (vector and hybrid), filter, rank, format, deduplicate,
  summarize, plus conditional, merge, score, annotate, reduce_latest and rewrite_query;
- 4 rule engines, ~50 rules activating them by scope, variables and task text, one always on;
- 10,000 KV entries, 3 JSON documents, 1,000 markdown notes, 60 source files;
- one vector collection `docs` of 100,000 one-chunk documents (default embedder, `upsert_many`);
- a knowledge graph of 10,000 nodes and ~20,000 edges (bulk `load`), 3 named views;
- ~3,000 events and ~2,000 episodic turns over 12 threads.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GENERATOR_VERSION = 3
SEED = 20260511
COLLECTION = "docs"
VECTOR_BATCH = 5_000
GRAPH_BATCH = 5_000

MODULES = (
    "auth", "session", "billing", "payments", "invoices", "search", "indexer", "cache", "scheduler",
    "notifications", "webhooks", "storage", "gateway", "router", "metrics", "logging", "config",
    "migrations", "users", "orders", "inventory", "shipping", "catalog", "pricing", "analytics", "reports",
    "exports", "imports", "queue", "worker", "mailer", "oauth", "tokens", "audit", "permissions",
    "profiles", "uploads", "thumbnails", "flags", "ratelimit",
)
CONCEPTS = (
    "timeout", "retry", "race condition", "deadlock", "memory leak", "null reference", "latency",
    "throughput", "pagination", "rate limit", "encryption", "validation", "serialization",
    "schema migration", "cache invalidation", "idempotency", "backoff", "circuit breaker",
    "connection pool", "transaction", "index", "query plan", "batching", "error handling", "logging",
    "configuration", "feature flag", "permission check", "token expiry", "webhook signature",
    "currency rounding", "time zone", "unicode handling", "file upload", "bulk export", "audit trail",
    "session renewal", "password hashing", "email template", "queue backlog",
)
VERBS = ("fix", "refactor", "add", "remove", "optimise", "document", "test", "migrate", "rename", "split",
         "redesign", "review", "investigate", "debug", "speed up", "harden", "simplify", "extend")
PAST = {"fix": "fixed", "refactor": "refactored", "add": "added", "remove": "removed", "optimise": "optimised",
        "document": "documented", "test": "tested", "migrate": "migrated", "rename": "renamed", "split": "split",
        "redesign": "redesigned", "review": "reviewed", "investigate": "investigated", "debug": "debugged",
        "speed up": "sped up", "harden": "hardened", "simplify": "simplified", "extend": "extended"}
ARTEFACTS = ("handler", "endpoint", "service", "client", "worker", "job", "test suite", "fixture", "model",
             "schema", "config loader", "CLI", "dashboard", "query", "middleware", "serializer", "adapter")
PHASES = ("planning", "implementation", "review", "testing", "deploy")
TASK_TYPES = ("bugfix", "feature", "refactor", "docs", "chore", "question")
AGENT_TYPES = ("coder", "reviewer", "planner", "tester")
DOC_KINDS = (("doc", 0.55), ("task", 0.25), ("incident", 0.12), ("adr", 0.08))
EVENT_TYPES = (("tool_call", 0.45), ("tool_error", 0.2), ("test_failure", 0.15), ("deploy", 0.1),
               ("incident", 0.05), ("alert", 0.05))
PEOPLE = ("ada", "grace", "linus", "barbara", "ken", "margaret", "dennis", "frances", "donald", "radia",
          "edsger", "john", "leslie", "niklaus", "tony", "alan", "katherine", "guido", "bjarne", "anders")
STANDARD_NOTES = ("coding-standards", "style-guide", "review-checklist", "testing-guide")
ADRS = tuple(f"adr-{n:03d}" for n in range(1, 9))
FLAGS = tuple(f"flag-{n:02d}" for n in range(8))
VIEWS = ("dependents", "module-node", "owners")

_FALLBACK_WORDS = (
    "system", "request", "response", "value", "record", "account", "customer", "result", "change", "update",
    "state", "error", "message", "client", "server", "process", "thread", "buffer", "field", "table", "row",
    "column", "check", "limit", "count", "total", "order", "path", "file", "name", "type", "version", "build",
    "release", "deploy", "user", "admin", "group", "role", "access", "policy", "event", "signal", "handler",
    "payload", "header", "body", "status", "code", "line", "branch", "commit", "merge", "review", "test",
)


def background_words() -> list[str]:
    """~9k English words in rough frequency order (the embedder's own vocabulary when available)."""
    try:
        from vectors import vocabulary  # bench/assemble/vectors.py, next to this file
        words = vocabulary()
        if len(words) > 2000 and not words[0].startswith("w0"):
            return words
    except Exception:  # the other benchmark missing or changed: fall back to a small list
        pass
    return list(_FALLBACK_WORDS)


@dataclass(frozen=True)
class Sizes:
    kv: int
    notes: int
    chunks: int
    nodes: int
    edges: int
    events: int
    threads: int
    turns_per_thread: int
    files: int

    @classmethod
    def full(cls) -> Sizes:
        return cls(kv=10_000, notes=1_000, chunks=100_000, nodes=10_000, edges=20_000, events=3_000, threads=12,
                   turns_per_thread=170, files=60)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(kv=1_000, notes=100, chunks=10_000, nodes=1_000, edges=2_000, events=300, threads=6,
                   turns_per_thread=40, files=20)


# -- generated text ----------------------------------------------------------------------------


class Words:
    """Sentences mixing the domain vocabulary with Zipf-distributed English background words."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = background_words()
        weights = [1.0 / rank for rank in range(1, len(self.words) + 1)]
        total, acc = sum(weights), 0.0
        self.cum = []
        for w in weights:
            acc += w / total
            self.cum.append(acc)

    def filler(self, n: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum, k=n))

    def sentence(self, module: str) -> str:
        r = self.rng
        verb = r.choice(VERBS)
        concept = r.choice(CONCEPTS)
        artefact = r.choice(ARTEFACTS)
        shape = r.randrange(5)
        if shape == 0:
            text = f"The {module} {artefact} {PAST[verb]} the {concept} {self.filler(6)}"
        elif shape == 1:
            text = f"When the {concept} happens in {module}, the {artefact} {self.filler(8)}"
        elif shape == 2:
            text = f"{module}.{artefact.replace(' ', '_')} handles {concept} and {r.choice(CONCEPTS)} {self.filler(5)}"
        elif shape == 3:
            text = f"We {PAST[verb]} {module} after a {concept} in the {r.choice(MODULES)} {artefact}"
        else:
            text = self.filler(r.randint(8, 14))
        return text[0].upper() + text[1:] + "."

    def paragraph(self, module: str, sentences: int) -> str:
        return " ".join(self.sentence(module) for _ in range(sentences))

    def task_text(self, module: str | None = None) -> str:
        r = self.rng
        module = module or r.choice(MODULES)
        verb = r.choice(VERBS)
        text = f"{verb.capitalize()} the {r.choice(CONCEPTS)} in the {module} {r.choice(ARTEFACTS)}"
        extra = r.random()
        if extra < 0.25:
            text += f" and the {r.choice(CONCEPTS)} it causes in {r.choice(MODULES)}"
        elif extra < 0.4:
            text += f"; {self.filler(r.randint(4, 10))}"
        elif extra < 0.5:
            text += f" before the {r.choice(('release', 'deploy', 'demo', 'audit'))}"
        return text


def weighted(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([k for k, _ in table], weights=[w for _, w in table], k=1)[0]


# -- definitions -------------------------------------------------------------------------------


def _memory(mid: str, label: str, steps: list[dict[str, Any]], section: str, priority: str, *,
            scopes: list[str] | None = None, variables: list[dict[str, Any]] | None = None,
            max_items: int | None = None, max_tokens: int | None = None, fmt: str | None = None) -> dict[str, Any]:
    contribution: dict[str, Any] = {"section": section, "priority": priority}
    for key, value in (("format", fmt), ("max_items", max_items), ("max_tokens", max_tokens)):
        if value is not None:
            contribution[key] = value
    out: dict[str, Any] = {"$schema": "urn:context-assembly:schema:persistent-memory", "id": mid, "label": label,
                           "description": f"{label} (generated for the assembly benchmark).", "version": "1.0.0",
                           "status": "active"}
    if scopes:
        out["inputs_scope"] = scopes
    if variables:
        out["additional_variables"] = variables
    out["retrieval"] = {"pipeline": steps}
    out["contribution"] = contribution
    return out


MODULE_VAR = [{"name": "module", "type": "string", "required": True, "description": "The module the task is about."}]
PHASE_VAR = [{"name": "phase", "type": "string", "required": False, "default": "implementation"}]


def definitions() -> dict[str, dict[str, Any]]:
    """The persistent-memory definitions, by id (21 of them)."""
    m = _memory
    defs = [
        # constraints
        m("user-preferences", "User preferences", [
            {"type": "kv_get", "namespace": "users", "keys": ["${scope.user.user_id}"]},
            {"type": "format", "format": "bullet_list"}], "constraints", "high", scopes=["user"], max_items=5),
        m("coding-standards", "Coding standards", [
            {"type": "markdown_read", "notes": list(STANDARD_NOTES)},
            {"type": "format", "format": "prose"}], "constraints", "critical", max_tokens=1500),
        m("team-conventions", "Team conventions", [
            {"type": "kv_get", "namespace": "teams", "keys": ["team-${scope.agent.agent_type}", "team-all"]},
            {"type": "format", "format": "bullet_list"}], "constraints", "medium", scopes=["agent"]),
        m("module-owners", "Module owners", [
            {"type": "graph_view_read", "view": "owners", "params": {"name": "${addVar.module}"}},
            {"type": "format", "format": "bullet_list"}], "constraints", "medium", variables=MODULE_VAR,
          max_items=5),
        # state
        m("project-config", "Project configuration", [
            {"type": "json_get", "doc": "project-config", "pointer": "/services"},
            {"type": "format", "format": "json"}], "state", "high"),
        m("feature-flags", "Feature flags", [
            {"type": "kv_get", "namespace": "flags", "keys": list(FLAGS)},
            {"type": "filter", "where": [{"field": "content", "operator": "contains", "value": "enabled"}]},
            {"type": "format", "format": "bullet_list"}], "state", "medium", max_items=8),
        # knowledge
        m("module-config", "Module configuration", [
            {"type": "json_get", "doc": "modules", "pointer": "/${addVar.module}"},
            {"type": "format", "format": "json"}], "knowledge", "medium", variables=MODULE_VAR),
        m("module-notes", "Module notes and runbook", [
            {"type": "markdown_read", "notes": ["modules/${addVar.module}", "runbooks/${addVar.module}"]},
            {"type": "format", "format": "markdown"}], "knowledge", "high", variables=MODULE_VAR,
          max_tokens=1500),
        m("architecture-decisions", "Architecture decision records", [
            {"type": "markdown_read", "notes": list(ADRS)},
            {"type": "deduplicate", "by": "title"},
            {"type": "rank", "strategy": "relevance"},
            {"type": "summarize", "max_items": 3}], "knowledge", "medium", max_tokens=2000),
        m("module-dependents", "Who depends on the module", [
            {"type": "graph_view_read", "view": "dependents", "params": {"name": "${addVar.module}", "limit": 15}},
            {"type": "graph_neighbor_expand", "depth": 1, "edge_kinds": ["OWNS"], "limit": 10},
            {"type": "format", "format": "bullet_list"}], "knowledge", "medium", variables=MODULE_VAR,
          max_items=12),
        m("call-graph", "Call graph around the module", [
            {"type": "graph_view_read", "view": "module-node", "params": {"key": "default/module:${addVar.module}"}},
            {"type": "graph_neighbor_expand", "depth": 2, "limit": 25},
            {"type": "deduplicate", "by": "title"},
            {"type": "rank", "strategy": "relevance", "topK": 10},
            {"type": "format", "format": "bullet_list"}], "knowledge", "low", variables=MODULE_VAR, max_items=10),
        m("architecture-docs", "Architecture docs", [
            {"type": "derive_query", "from": ["input.text", "addVar.query"], "method": "keyword_extract"},
            {"type": "vector_search", "collection": COLLECTION, "topK": 8, "minScore": 0.2, "mode": "hybrid"},
            {"type": "filter", "where": [{"field": "score", "operator": "gte", "value": 0.2}]},
            {"type": "rank", "strategy": "score_desc", "topK": 4},
            {"type": "format", "format": "markdown", "template": "### {{title}}\n{{content}}"}],
          "knowledge", "high", scopes=["project"], max_items=4, max_tokens=1500),
        m("code-search", "Code and docs for the module", [
            {"type": "derive_query", "from": ["input.text"], "method": "passthrough"},
            {"type": "rewrite_query", "template": "${query} ${addVar.module}"},
            {"type": "vector_search", "collection": COLLECTION, "topK": 6, "minScore": 0.15, "mode": "vector"},
            {"type": "deduplicate", "by": "metadata.doc_uri"},
            {"type": "format", "format": "numbered"}], "knowledge", "medium", variables=MODULE_VAR, max_items=5),
        # suggestions
        m("related-tasks", "Related past tasks", [
            {"type": "derive_query", "from": ["input.text"], "method": "keyword_extract"},
            {"type": "vector_search", "collection": COLLECTION, "topK": 20, "minScore": 0.1, "mode": "vector"},
            {"type": "filter", "where": [{"field": "metadata.kind", "operator": "in", "value": ["task", "incident"]}]},
            {"type": "rank", "strategy": "score_desc", "topK": 3},
            {"type": "format", "format": "bullet_list"}], "suggestions", "low", max_items=3),
        m("release-notes", "Latest release", [
            {"type": "json_get", "doc": "releases", "pointer": "/latest"},
            {"type": "format", "format": "json"}], "suggestions", "low"),
        # warnings
        m("recent-errors", "Recent tool errors and test failures", [
            {"type": "log_search", "eventType": ["tool_error", "test_failure"], "since": "-60d", "limit": 12},
            {"type": "deduplicate", "by": "content"},
            {"type": "rank", "strategy": "recency", "topK": 5},
            {"type": "format", "format": "bullet_list"}], "warnings", "high", max_items=5),
        m("incident-digest", "Open incidents", [
            {"type": "log_search", "alias": "events", "eventType": ["incident", "alert"], "limit": 15},
            {"type": "markdown_read", "alias": "notes", "note": "incidents/summary"},
            {"type": "merge", "inputs": ["events", "notes"], "strategy": "interleave"},
            {"type": "reduce_latest", "by": "title", "time_field": "timestamp"},
            {"type": "score", "weights": {"recency": 1.0, "relevance": 0.5}},
            {"type": "annotate", "fields": {"origin": "incident-digest"}, "provenance": True},
            {"type": "rank", "strategy": "score_desc", "topK": 4}], "warnings", "medium", max_items=4),
        # history
        m("recent-history", "Recent turns", [
            {"type": "episodic_recent", "limit": 8}], "history", "medium", scopes=["thread"], max_items=8),
        m("review-history", "Review discussion", [
            {"type": "conditional", "condition": {"field": "addVar.phase", "operator": "eq", "value": "review"},
             "then_steps": [{"type": "episodic_recent", "limit": 30},
                            {"type": "filter", "where": [{"field": "metadata.role", "operator": "in",
                                                          "value": ["reviewer", "user"]}]},
                            {"type": "summarize", "max_items": 4}],
             "else_steps": [{"type": "episodic_recent", "limit": 4}]}],
          "history", "low", scopes=["thread"], variables=PHASE_VAR, max_items=5),
        m("module-deploys", "Recent deploys of the module", [
            {"type": "log_search", "eventType": "deploy", "fields": {"module": "${addVar.module}"}, "limit": 5},
            {"type": "format", "format": "bullet_list"}], "history", "low", variables=MODULE_VAR),
        # working memory
        m("task-checklist", "Checklist for the task type", [
            {"type": "markdown_read", "note": "checklists/${scope.task.task_type}"},
            {"type": "early_exit", "min_items": 1},
            {"type": "markdown_read", "note": "checklists/default"}], "working_memory", "medium", scopes=["task"]),
    ]
    return {d["id"]: d for d in defs}


def has_vector_step(steps: Any) -> bool:
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        if step.get("type") == "vector_search":
            return True
        if has_vector_step(step.get("then_steps")) or has_vector_step(step.get("else_steps")):
            return True
    return False


def vector_memories() -> set[str]:
    return {mid for mid, d in definitions().items() if has_vector_step(d["retrieval"]["pipeline"])}


def _cond(field: str, operator: str, value: Any = None, **extra: Any) -> dict[str, Any]:
    out = {"field": field, "operator": operator, **extra}
    if value is not None:
        out["value"] = value
    return out


def _rule(rid: str, when: list[dict[str, Any]], add: list[str], priority: int = 5,
          **then: Any) -> dict[str, Any]:
    return {"id": rid, "name": rid.replace("-", " ").capitalize(), "priority": priority, "when": when,
            "then": {"add_memories": add, **then}}


def rule_engines() -> dict[str, dict[str, Any]]:
    """Four engines, ~50 rules: phases, task types and text, agents, modules (one always-on rule)."""
    has_module = _cond("addVar.module", "exists")
    core = [
        _rule("always-on", [], ["recent-history", "coding-standards", "project-config"], priority=0,
              caps=[{"target": "recent-history", "max_tokens": 800, "max_items": 8}]),
        _rule("known-user", [_cond("scope.user.user_id", "exists")], ["user-preferences"], priority=1),
        _rule("team-rules", [_cond("scope.agent.agent_type", "in", ["coder", "reviewer"])], ["team-conventions"]),
        _rule("planning-docs", [_cond("addVar.phase", "eq", "planning")],
              ["architecture-docs", "architecture-decisions"], priority=10),
        _rule("planning-dependents", [_cond("addVar.phase", "eq", "planning"), has_module], ["module-dependents"]),
        _rule("implementation-code", [_cond("addVar.phase", "eq", "implementation"), has_module],
              ["code-search", "module-notes", "module-config"], priority=10),
        _rule("review-context", [_cond("addVar.phase", "eq", "review")], ["review-history"], priority=10,
              set_priority={"history": "high"}),
        _rule("review-owners", [_cond("addVar.phase", "eq", "review"), has_module], ["module-owners"]),
        _rule("testing-failures", [_cond("addVar.phase", "eq", "testing")], ["recent-errors", "task-checklist"]),
        _rule("deploy-context", [_cond("addVar.phase", "eq", "deploy")], ["feature-flags", "release-notes",
                                                                           "incident-digest"], priority=10),
        _rule("deploy-module", [_cond("addVar.phase", "eq", "deploy"), has_module], ["module-deploys"]),
        _rule("no-phase", [_cond("addVar.phase", "not_exists")], ["task-checklist"], priority=1),
    ]
    tasks = [
        _rule("bugfix-errors", [_cond("scope.task.task_type", "eq", "bugfix")], ["recent-errors", "related-tasks"],
              priority=8),
        _rule("feature-docs", [_cond("scope.task.task_type", "eq", "feature"), has_module], ["module-notes"]),
        _rule("refactor-graph", [_cond("scope.task.task_type", "eq", "refactor"), has_module],
              ["call-graph", "module-dependents"], priority=8, set_priority={"history": "low"}),
        _rule("docs-adrs", [_cond("scope.task.task_type", "eq", "docs")], ["architecture-decisions"]),
        _rule("chore-flags", [_cond("scope.task.task_type", "eq", "chore")], ["feature-flags"]),
        _rule("question-short-history", [_cond("scope.task.task_type", "eq", "question")], ["recent-history"],
              caps=[{"target": "history", "max_tokens": 600}]),
        _rule("text-refactor", [{"any": [_cond("input.text", "contains", "refactor"),
                                         _cond("input.text", "regex", r"\bre-?design", ignore_case=True)]},
                                {"not": _cond("scope.task.task_type", "in", ["docs", "chore"])}],
              ["architecture-decisions"], set_priority={"history": "low"}),
        _rule("text-timeouts", [{"any": [_cond("input.text", "contains", "timeout"),
                                         _cond("input.text", "contains", "latency"),
                                         _cond("input.text", "contains", "backoff")]}], ["recent-errors"]),
        _rule("text-flags", [_cond("input.text", "regex", r"\b(feature flag|toggle|flags?)\b", ignore_case=True)],
              ["feature-flags"]),
        _rule("text-release", [_cond("input.text", "regex", r"\b(release|deploy|rollout)\b", ignore_case=True)],
              ["release-notes", "incident-digest"]),
        _rule("text-incident", [_cond("input.text", "regex", r"\b(incident|outage|alert|leak|deadlock)\b",
                                      ignore_case=True)], ["incident-digest"], priority=7),
        _rule("text-investigate", [_cond("input.text", "starts_with", "Investigate")], ["related-tasks"]),
        _rule("text-debug", [_cond("input.text", "starts_with", "Debug"), has_module], ["call-graph"]),
    ]
    agents = [
        _rule("reviewer-conventions", [_cond("scope.agent.agent_type", "eq", "reviewer")],
              ["coding-standards", "module-owners"], priority=10),
        _rule("planner-docs", [_cond("scope.agent.agent_type", "eq", "planner")], ["architecture-docs"]),
        _rule("tester-checklist", [_cond("scope.agent.agent_type", "eq", "tester")], ["task-checklist",
                                                                                      "recent-errors"]),
        _rule("coder-module", [_cond("scope.agent.agent_type", "eq", "coder"), has_module], ["module-notes"]),
        _rule("large-change", [_cond("addVar.files_changed", "gte", 10),
                               _cond("scope.project.project_path", "starts_with", "/srv/")],
              ["call-graph", "architecture-decisions"], boost=[{"target": "architecture-decisions", "weight": 1.5}],
              exclude_memories=["file://generated/**"]),
        _rule("small-change", [_cond("addVar.files_changed", "lte", 2)], [],
              caps=[{"target": "knowledge", "max_tokens": 2500}]),
        _rule("many-attempts", [_cond("addVar.attempt", "gt", 2)], ["recent-errors", "related-tasks"], priority=9),
        _rule("python-file", [_cond("addVar.active_file", "ends_with", ".py")], ["coding-standards"]),
        _rule("no-reviewer-flags", [_cond("scope.agent.agent_type", "neq", "reviewer"),
                                    _cond("addVar.phase", "in", ["deploy", "testing"])], ["feature-flags"]),
    ]
    # one rule per module group: a task that names the module pulls in its notes and owners
    modules = []
    for i in range(0, len(MODULES), 2):
        names = list(MODULES[i:i + 2])
        modules.append(_rule(f"mentions-{names[0]}", [{"any": [_cond("input.text", "contains", n) for n in names]},
                                                      has_module],
                             ["module-notes"] if i % 4 == 0 else ["module-owners"], priority=2))
    return {
        "core": {"id": "core", "name": "Core rules", "enabled": True, "rules": core},
        "tasks": {"id": "tasks", "name": "Task type and text rules", "enabled": True, "rules": tasks},
        "agents": {"id": "agents", "name": "Agent rules", "enabled": True, "rules": agents},
        "modules": {"id": "modules", "name": "Module mentions", "enabled": True, "rules": modules},
    }


def graph_views() -> dict[str, dict[str, Any]]:
    limit = {"type": "integer", "description": "At most this many rows.", "default": 20}
    return {
        "dependents": {
            "id": "dependents", "description": "Modules that depend on a given module (by name).",
            "cypher": "MATCH (m:Entity {name: $name})<-[:Relates {kind: 'DEPENDS_ON'}]-(d:Entity) "
                      "RETURN d.id AS id, d.name AS name, d.kind AS kind LIMIT $limit",
            "params": {"name": {"type": "string", "description": "The module name."}, "limit": limit}},
        "module-node": {
            "id": "module-node", "description": "One node by its key (instance/id): the primary-key lookup.",
            "cypher": "MATCH (m:Entity {key: $key}) RETURN m.id AS id, m.name AS name, m.kind AS kind, "
                      "m.attributes AS attributes",
            "params": {"key": {"type": "string", "description": "instance/node id"}}},
        "owners": {
            "id": "owners", "description": "People who own a module (by name).",
            "cypher": "MATCH (p:Entity)-[:Relates {kind: 'OWNS'}]->(m:Entity {name: $name}) "
                      "RETURN p.id AS id, p.name AS name, p.attributes AS attributes LIMIT $limit",
            "params": {"name": {"type": "string", "description": "The module name."}, "limit": limit}},
    }


# -- building ----------------------------------------------------------------------------------


def _write_json(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=2) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return  # unchanged: keep the file (and its mtime, which the workspace loader watches)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def user_ids(sizes: Sizes) -> list[str]:
    return [f"u-{n:04d}" for n in range(max(10, sizes.kv // 20))]


def thread_ids(sizes: Sizes) -> list[str]:
    return [f"t-{n:03d}" for n in range(sizes.threads)]


def source_files(sizes: Sizes) -> list[str]:
    return [f"src/{MODULES[n % len(MODULES)]}/part_{n:03d}.py" for n in range(sizes.files)]


def write_definitions(root: Path, hybrid: bool = True) -> None:
    """(Re)write the definition files; `hybrid=False` turns hybrid vector searches into plain vector ones."""
    codebolt = root / ".codebolt"
    for mid, definition in definitions().items():
        if not hybrid:
            for step in definition["retrieval"]["pipeline"]:
                if step.get("mode") == "hybrid":
                    step["mode"] = "vector"
        _write_json(codebolt / "PersistentMemory" / f"{mid}.json", definition)
    for eid, engine in rule_engines().items():
        _write_json(codebolt / "context-rule-engines" / f"{eid}.json",
                    {"$schema": "urn:context-assembly:schema:rule-engine", **engine})
    for vid, view in graph_views().items():
        _write_json(codebolt / "knowledgegraph" / "views" / f"{vid}.json", view)
    _write_json(codebolt / "context-assembly.json",
                {"$schema": "urn:context-assembly:schema:settings", "max_tokens": 8000, "tokenizer": "estimate",
                 "pipeline_timeout_ms": 5000, "cache_ttl_s": 300, "snapshots": False})


def _notes(root: Path, codebolt: Path, sizes: Sizes, words: Words) -> int:
    rng = words.rng
    memory = codebolt / "memory"
    written = 0

    def note(name: str, title: str, module: str, paragraphs: int) -> None:
        nonlocal written
        body = "\n\n".join(words.paragraph(module, rng.randint(3, 6)) for _ in range(paragraphs))
        _write_text(memory / f"{name}.md", f"# {title}\n\n{body}\n")
        written += 1

    for name in STANDARD_NOTES:
        note(name, name.replace("-", " ").capitalize(), rng.choice(MODULES), 3)
    for adr in ADRS:
        note(adr, f"{adr.upper()}: {rng.choice(CONCEPTS)} in {rng.choice(MODULES)}", rng.choice(MODULES), 2)
    for module in MODULES:
        note(f"modules/{module}", f"The {module} module", module, 3)
        note(f"runbooks/{module}", f"Runbook: {module}", module, 2)
    for task_type in (*TASK_TYPES, "default"):
        note(f"checklists/{task_type}", f"Checklist for {task_type}", rng.choice(MODULES), 1)
    note("incidents/summary", "Incident summary", "gateway", 2)
    n = 0
    while written < sizes.notes:
        module = rng.choice(MODULES)
        note(f"notes/{module}/n-{n:05d}", f"{rng.choice(CONCEPTS).capitalize()} in {module}", module,
             rng.randint(1, 3))
        n += 1
    for path in source_files(sizes):
        module = path.split("/")[1]
        lines = [f'"""{words.sentence(module)}"""', ""]
        for f in range(rng.randint(3, 8)):
            lines += [f"def {module}_{f}(value):", f'    """{words.sentence(module)}"""', "    return value", ""]
        _write_text(root / path, "\n".join(lines))
    return written


def _kv_rows(sizes: Sizes, words: Words) -> list[tuple[str, str, str, Any]]:
    rng = words.rng
    rows: list[tuple[str, str, str, Any]] = []
    for uid in user_ids(sizes):
        rows.append(("default", "users", uid, {
            "review_style": rng.choice(("terse, bullet points first", "detailed with examples", "questions only")),
            "language": rng.choice(("British English", "American English", "German", "French")),
            "wants_tests": rng.random() < 0.7, "timezone": rng.choice(("UTC", "Europe/Berlin", "America/Denver"))}))
    for flag in FLAGS:
        rows.append(("default", "flags", flag, {"enabled": rng.random() < 0.6, "owner": rng.choice(PEOPLE),
                                                "note": words.sentence(rng.choice(MODULES))}))
    for team in (*(f"team-{a}" for a in AGENT_TYPES), "team-all"):
        rows.append(("default", "teams", team, words.paragraph(rng.choice(MODULES), 2)))
    n = 0
    while len(rows) < sizes.kv:
        module = rng.choice(MODULES)
        rows.append(("default", "symbols", f"{module}.sym_{n:05d}", {
            "module": module, "kind": rng.choice(("function", "class", "constant")),
            "summary": words.sentence(module), "line": rng.randint(1, 2000)}))
        n += 1
    return rows


def _chunk_docs(sizes: Sizes, words: Words) -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    rng = words.rng
    now = time.time()
    batch: list[tuple[str, str, dict[str, Any]]] = []
    for n in range(sizes.chunks):
        module = rng.choice(MODULES)
        kind = weighted(rng, DOC_KINDS)
        concept = rng.choice(CONCEPTS)
        title = f"{kind.upper()} {n}: {concept} in {module}"
        text = f"{title}. {words.paragraph(module, rng.randint(3, 6))}"
        batch.append((f"{kind}/{module}/{n:06d}", text, {
            "title": title, "kind": kind, "module": module, "path": f"docs/{module}/{n:06d}.md",
            "timestamp": round(now - rng.uniform(0, 90 * 86400))}))
        if len(batch) == VECTOR_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _graph(sizes: Sizes, rng: random.Random) -> tuple[list[Any], list[Any]]:
    from context_assembly.stores.graph import GraphEdge, GraphNode

    nodes: list[GraphNode] = []
    kinds: dict[str, list[str]] = {"module": [], "person": [], "file": [], "function": [], "concept": []}

    def node(node_id: str, kind: str, name: str, attributes: dict[str, Any]) -> None:
        nodes.append(GraphNode("default", node_id, kind, name, attributes))
        kinds[kind].append(node_id)

    for module in MODULES:
        node(f"module:{module}", "module", module, {"path": f"src/{module}/", "tier": rng.randint(1, 3)})
    for person in PEOPLE:
        node(f"person:{person}", "person", person.capitalize(), {"user_id": f"u-{rng.randrange(200):04d}"})
    for concept in CONCEPTS:
        node(f"concept:{concept.replace(' ', '_')}", "concept", concept, {})
    rest = sizes.nodes - len(nodes)
    files = rest // 4
    for n in range(files):
        module = rng.choice(MODULES)
        node(f"file:src/{module}/f{n:05d}.py", "file", f"f{n:05d}.py",
             {"module": module, "lines": rng.randint(20, 900)})
    for n in range(rest - files):
        module = rng.choice(MODULES)
        node(f"function:{module}.fn_{n:05d}", "function", f"fn_{n:05d}",
             {"module": module, "signature": f"fn_{n:05d}(value) -> None"})

    edges: list[GraphEdge] = []
    seen: set[tuple[str, str, str]] = set()

    def edge(kind: str, a: str, b: str) -> None:
        if a == b or (kind, a, b) in seen:
            return
        seen.add((kind, a, b))
        edges.append(GraphEdge("default", f"e{len(edges):06d}", kind, a, b, {}))

    mods = kinds["module"]
    for a in mods:
        for b in rng.sample(mods, 4):
            edge("DEPENDS_ON", a, b)
    for module in mods:
        for person in rng.sample(kinds["person"], 2):
            edge("OWNS", person, module)
    for f in kinds["file"]:
        module = "module:" + f.split("/")[1]
        edge("CONTAINS", module, f)
    funcs = kinds["function"]
    for fn in funcs:
        module = "module:" + fn.split(":")[1].split(".")[0]
        edge("DEFINES", module, fn)
    while len(edges) < sizes.edges:
        r = rng.random()
        if r < 0.7:
            edge("CALLS", rng.choice(funcs), rng.choice(funcs))
        elif r < 0.9:
            edge("MENTIONS", rng.choice(kinds["file"]), rng.choice(kinds["concept"]))
        else:
            edge("DEPENDS_ON", rng.choice(kinds["file"]), rng.choice(kinds["file"]))
    return nodes, edges


def build(root: Path, sizes: Sizes, seed: int = SEED, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Create the workspace at `root` (which must not exist); returns the manifest's figures."""
    from context_assembly.runtime import Runtime
    from context_assembly.stores.embedding import default_embedder_name

    rng = random.Random(seed)
    words = Words(rng)
    codebolt = root / ".codebolt"
    figures: dict[str, Any] = {}
    started = time.perf_counter()
    write_definitions(root)
    t = time.perf_counter()
    figures["notes"] = _notes(root, codebolt, sizes, words)
    figures["notes_s"] = round(time.perf_counter() - t, 2)
    runtime = Runtime(root)
    try:
        memory = runtime.memory
        t = time.perf_counter()
        figures["kv"] = memory.kv.set_many(_kv_rows(sizes, words))
        memory.write("json://project-config", {"name": "shop", "python": "3.11", "services": list(MODULES[:12]),
                                               "owners": {m: rng.choice(PEOPLE) for m in MODULES[:12]}})
        memory.write("json://modules", {m: {"timeout_s": rng.choice((1, 2, 5, 10)), "retries": rng.randint(0, 3),
                                            "owner": rng.choice(PEOPLE), "summary": words.sentence(m)}
                                        for m in MODULES})
        memory.write("json://releases", {"latest": {"version": "4.2.0", "notes": words.paragraph("gateway", 3)},
                                         "previous": {"version": "4.1.3", "notes": words.paragraph("billing", 2)}})
        figures["kv_s"] = round(time.perf_counter() - t, 2)
        log(f"  kv {figures['kv']:,} entries, json 3 documents ({figures['kv_s']} s)")

        t = time.perf_counter()
        now = time.time()
        events = memory.events
        for n in range(sizes.events):
            kind = weighted(rng, EVENT_TYPES)
            module = rng.choice(MODULES)
            payload = {"module": module, "message": words.sentence(module)}
            if kind in ("tool_call", "tool_error"):
                payload["tool"] = rng.choice(("pytest", "ruff", "git", "grep", "editor", "shell"))
            events.append("default", kind, payload, now - (sizes.events - n) * (40 * 86400 / sizes.events))
        turns = 0
        for thread in thread_ids(sizes):
            for k in range(sizes.turns_per_thread):
                role = rng.choice(("user", "assistant", "tool", "reviewer")) if k % 2 else "user"
                memory.episodic.append(thread, {"role": role, "content": words.sentence(rng.choice(MODULES)),
                                                "ts": now - (sizes.turns_per_thread - k) * 60})
                turns += 1
            memory.write(f"working://{thread}/plan", words.paragraph(rng.choice(MODULES), 2))
        figures.update(events=sizes.events, turns=turns, events_turns_s=round(time.perf_counter() - t, 2))
        log(f"  {sizes.events:,} events, {turns:,} turns ({figures['events_turns_s']} s)")

        model = default_embedder_name()
        t = time.perf_counter()
        loaded = 0
        for batch in _chunk_docs(sizes, words):
            result = runtime.vectors.upsert_many(COLLECTION, batch)
            loaded += result["chunks"]
            elapsed = time.perf_counter() - t
            log(f"  vectors {loaded:,}/{sizes.chunks:,} chunks, {loaded / elapsed:,.0f} chunks/s")
        vector_s = time.perf_counter() - t
        figures.update(chunks=loaded, embedder=model, vector_load_s=round(vector_s, 1),
                       vector_load_chunks_per_s=round(loaded / vector_s))

        t = time.perf_counter()
        nodes, edges = _graph(sizes, rng)
        for start in range(0, len(nodes), GRAPH_BATCH):
            runtime.graph.load(nodes[start:start + GRAPH_BATCH], [])
        for start in range(0, len(edges), GRAPH_BATCH):
            runtime.graph.load([], edges[start:start + GRAPH_BATCH])
            log(f"  graph {len(nodes):,} nodes, {min(start + GRAPH_BATCH, len(edges)):,}/{len(edges):,} edges "
                f"({time.perf_counter() - t:.0f} s)")
        figures.update(nodes=len(nodes), edges=len(edges), graph_load_s=round(time.perf_counter() - t, 1))
    finally:
        runtime.close()
    figures["build_s"] = round(time.perf_counter() - started, 1)
    return figures


def ensure(root: Path, sizes: Sizes, seed: int = SEED, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The workspace at `root` for these parameters: reused when its manifest matches, else rebuilt."""
    wanted = {"generator": GENERATOR_VERSION, "seed": seed, "sizes": asdict(sizes)}
    manifest_path = root / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        if {k: manifest.get(k) for k in wanted} == wanted:
            log(f"reusing the workspace generated {manifest.get('generated_at', '?')} ({root.name})")
            manifest["reused"] = True
            return dict(manifest)
    except (OSError, ValueError):
        pass
    if root.exists():
        log(f"parameters changed: removing the old workspace {root.name}")
        shutil.rmtree(root)
    root.mkdir(parents=True)
    log(f"generating the workspace {root.name}: {asdict(sizes)}")
    figures = build(root, sizes, seed, log)
    manifest = {**wanted, "generated_at": time.strftime("%Y-%m-%d %H:%M:%S"), "figures": figures}
    _write_json(manifest_path, manifest)
    manifest["reused"] = False
    return manifest


# -- requests ----------------------------------------------------------------------------------


def requests(count: int, sizes: Sizes, seed: int = SEED) -> list[dict[str, Any]]:
    """`count` varied assembly requests over the generated content (deterministic)."""
    rng = random.Random(seed + 1)
    words = Words(rng)
    users, threads, files = user_ids(sizes), thread_ids(sizes), source_files(sizes)
    out = []
    for n in range(count):
        module = rng.choice(MODULES)
        text = words.task_text(module)
        if rng.random() < 0.08:
            text += " " + rng.choice(("@architecture-decisions", f"@kv://flags/{rng.choice(FLAGS)}",
                                      f"@markdown://modules/{module}", "@release-notes"))
        thread = rng.choice(threads)
        scope: dict[str, Any] = {
            "project": {"project_id": f"p-{rng.randrange(3)}", "project_name": "shop",
                        "project_path": rng.choice(("/srv/shop", "/home/dev/shop"))},
            "agent": {"agent_id": f"a-{rng.randrange(20)}", "agent_name": "agent",
                      "agent_type": rng.choices(AGENT_TYPES, weights=(5, 2, 2, 2))[0]},
            "thread": {"thread_id": thread},
            "task": {"task_id": f"T-{1000 + n}", "task_type": rng.choice(TASK_TYPES)},
        }
        if rng.random() < 0.85:
            scope["user"] = {"user_id": rng.choice(users)}
        variables: dict[str, Any] = {}
        if rng.random() < 0.85:
            variables["phase"] = rng.choices(PHASES, weights=(2, 3, 2, 2, 1))[0]
        if rng.random() < 0.8:
            variables["module"] = module
        if rng.random() < 0.5:
            variables["files_changed"] = rng.choice((1, 2, 3, 5, 8, 12, 20))
        if rng.random() < 0.2:
            variables["attempt"] = rng.randint(1, 4)
        if rng.random() < 0.25:
            variables["active_file"] = rng.choice(files)
        request: dict[str, Any] = {"scope_variables": scope, "additional_variables": variables,
                                   "input": {"text": text}, "thread_id": thread,
                                   "constraints": {"max_tokens": rng.choice((4000, 8000, 16000))}}
        if rng.random() < 0.15:
            request["explicit_memory"] = [f"working://{thread}/plan"]
        out.append(request)
    return out


def full_size(out: Path) -> Path:
    """The root of the full-size workspace under `out` (run.py's output folder), built there once
    and reused, its definitions written with hybrid searches (as the sidecar benches serve it)."""
    root = out.resolve() / "ws" / "full"
    ensure(root, Sizes.full(), SEED)
    write_definitions(root, hybrid=True)
    return root
