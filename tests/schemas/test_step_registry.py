"""The step, processor and trigger registries (SPEC §5.2, §7) and the schemas built from them."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from context_assembly.registry.ingestion import (
    COMMON_PROCESSOR_PARAMS,
    PROCESSORS,
    ROUTE_FIELDS,
    TRIGGERS,
    ProcessorSpec,
    lookup_processor,
    lookup_trigger,
    processor_names,
    trigger_names,
)
from context_assembly.registry.steps import (
    COMMON_PARAMS,
    STEP_GROUPS,
    STEP_TYPES,
    ParamSpec,
    StepSpec,
    lookup_step,
    step_names,
)
from context_assembly.schemas import build_schema, validation_errors

SPEC_STEPS = {
    "input": {"derive_query", "rewrite_query"},
    "retrieval": {"vector_search", "graph_view_read", "kv_get", "json_get", "markdown_read", "log_search",
                  "episodic_recent", "file_read"},
    "expansion": {"graph_neighbor_expand", "graph_view_expand"},
    "filter": {"filter", "deduplicate"},
    "aggregation": {"group_by", "reduce_latest", "merge"},
    "ranking": {"rank", "score"},
    "transform": {"summarize", "format", "annotate"},
    "control": {"conditional", "early_exit"},
}
SPEC_PARAMS = {
    "derive_query": {"from", "method"}, "vector_search": {"collection", "topK", "minScore", "mode"},
    "graph_view_read": {"view", "params"}, "kv_get": {"instance", "namespace", "keys"},
    "json_get": {"doc", "pointer"}, "markdown_read": {"note", "notes"},
    "log_search": {"instance", "eventType", "since", "fields", "limit"}, "episodic_recent": {"limit"},
    "file_read": {"path"}, "filter": {"where"}, "merge": {"strategy"}, "rank": {"strategy", "topK"},
    "score": {"weights"}, "summarize": {"max_items"}, "format": {"format", "template"},
    "conditional": {"condition", "then_steps", "else_steps"}, "early_exit": {"when", "min_items"},
    "graph_view_expand": {"view", "params"}, "deduplicate": {"by"}, "group_by": {"field"},
    "reduce_latest": {"by", "time_field"},
}
SPEC_TRIGGERS = ["onConversationStart", "onConversationEnd", "onTaskStart", "onTaskCompleted", "onTaskFailure",
                 "onAction", "onError", "manual"]
SPEC_PROCESSORS = {"chunker", "normalizer", "parser", "vector_embed", "llm_extract", "llm_extract_kb",
                   "blob_store", "custom"}


def _memory(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"id": "m", "retrieval": {"pipeline": list(steps)}}


def test_every_spec_step_is_registered_in_its_group() -> None:
    groups: dict[str, set[str]] = {}
    for spec in STEP_TYPES:
        groups.setdefault(spec.group, set()).add(spec.name)
    assert groups == SPEC_STEPS
    assert {g.name for g in STEP_GROUPS} == set(SPEC_STEPS)
    assert len(step_names()) == len(set(step_names()))


@pytest.mark.parametrize("name", sorted(SPEC_PARAMS))
def test_spec_parameters_are_registered(name: str) -> None:
    spec = lookup_step(name)
    assert spec is not None
    assert SPEC_PARAMS[name] <= {p.name for p in spec.params}


@pytest.mark.parametrize("spec", STEP_TYPES, ids=lambda s: s.name)
def test_step_spec_is_consistent(spec: StepSpec) -> None:
    names = [p.name for p in spec.params]
    assert len(names) == len(set(names))
    assert not set(names) & ({"type", "step"} | {p.name for p in COMMON_PARAMS})
    assert set(spec.one_of) <= set(names)
    assert spec.description and all(p.description for p in spec.params)
    assert spec.example["type"] == spec.name
    assert lookup_step(spec.name) is spec and spec.param(names[0]) is spec.params[0]


def _standalone(param: ParamSpec) -> bool:
    return "$ref" not in str(param.schema)


@pytest.mark.parametrize("param", [p for s in STEP_TYPES for p in s.params if p.default is not None]
                         + [p for s in PROCESSORS for p in s.params if p.default is not None],
                         ids=lambda p: p.name)
def test_defaults_satisfy_their_own_schema(param: ParamSpec) -> None:
    if _standalone(param):
        jsonschema.validate(param.default, param.schema)


@pytest.mark.parametrize("spec", STEP_TYPES, ids=lambda s: s.name)
def test_each_step_example_validates_in_both_spellings(spec: StepSpec) -> None:
    canonical = _memory(spec.example)
    shorthand = {"name": "m", "enabled": False,
                 "pipeline": [{"step": spec.name, **{k: v for k, v in spec.example.items() if k != "type"}}]}
    for doc in (canonical, shorthand):
        assert validation_errors("persistent-memory", doc) == []


@pytest.mark.parametrize("spec", STEP_TYPES, ids=lambda s: s.name)
def test_each_step_rejects_an_unknown_parameter(spec: StepSpec) -> None:
    doc = _memory({**spec.example, "colour": "red"})
    assert {e["path"] for e in validation_errors("persistent-memory", doc)} == {"/retrieval/pipeline/0"}


@pytest.mark.parametrize("spec", [s for s in STEP_TYPES if any(p.required for p in s.params)], ids=lambda s: s.name)
def test_required_parameters_are_required(spec: StepSpec) -> None:
    doc = _memory({"type": spec.name})
    messages = [e["message"] for e in validation_errors("persistent-memory", doc)]
    for param in spec.params:
        if param.required:
            assert f"missing required property '{param.name}'" in messages


def test_number_parameters_take_templates() -> None:
    doc = _memory({"type": "vector_search", "collection": "${addVar.collection}", "topK": "${addVar.k}",
                   "minScore": "${addVar.min}", "mode": "${addVar.mode}"},
                  {"type": "log_search", "limit": "${addVar.limit}"})
    assert validation_errors("persistent-memory", doc) == []
    doc = _memory({"type": "vector_search", "collection": "docs", "topK": "${unclosed"})
    assert [e["path"] for e in validation_errors("persistent-memory", doc)] == ["/retrieval/pipeline/0/topK"]


def test_yaml_shorthand_definition() -> None:
    text = """
name: auth-context
enabled: true
description: What we know about authentication.
inputs_scope: [project, agent]
pipeline:
  - step: derive_query
    method: passthrough
  - step: vector_search
    collection: code
    topK: 10
    mode: hybrid
    alias: hits
  - step: graph_view_read
    view: callers-of
    params: {symbol: AuthService}
    alias: callers
  - step: merge
    inputs: [hits, callers]
    strategy: unique
  - step: filter
    where:
      - any:
          - {field: score, operator: gte, value: 0.4}
          - {field: metadata.kind, operator: in, value: [decision, adr]}
  - step: rank
    strategy: relevance
    topK: 5
  - step: format
    format: bullet_list
contribution: {section: knowledge, priority: high, max_tokens: 1500}
"""
    doc = yaml.safe_load(text)
    assert validation_errors("persistent-memory", doc, engine="rust") == []
    assert validation_errors("persistent-memory", doc, engine="python") == []


def test_step_type_enum_lists_every_step() -> None:
    defs = build_schema("persistent-memory")["$defs"]
    assert defs["step_type"]["enum"] == step_names()
    assert {f"step.{n}" for n in step_names()} <= set(defs)


# -- ingestion --------------------------------------------------------------------------------------


def test_triggers_and_processors_are_the_spec_ones() -> None:
    assert trigger_names() == SPEC_TRIGGERS
    assert set(processor_names()) == SPEC_PROCESSORS
    assert all(t.description for t in TRIGGERS)
    assert lookup_trigger("manual") is TRIGGERS[-1] and lookup_trigger("nope") is None
    assert lookup_processor("chunker") is PROCESSORS[0] and lookup_processor("nope") is None
    assert {p.name for p in COMMON_PROCESSOR_PARAMS} == {"id", "input", "output"}
    assert {p.name for p in ROUTE_FIELDS} >= {"from", "foreach", "condition", "write_to"}


@pytest.mark.parametrize("spec", PROCESSORS, ids=lambda p: p.name)
def test_each_processor_example_validates(spec: ProcessorSpec) -> None:
    doc = {"id": "i", "trigger": "manual", "processors": [spec.example]}
    assert validation_errors("ingestion-pipeline", doc) == []
    assert spec.example["type"] == spec.name
    bad = {"id": "i", "trigger": "manual", "processors": [{**spec.example, "colour": 1}]}
    assert [e["path"] for e in validation_errors("ingestion-pipeline", bad)] == ["/processors/0"]


def test_processor_parameters() -> None:
    ok = {"id": "i", "trigger": ["onTaskCompleted", "onTaskFailure"], "processors": [
        {"id": "n", "type": "normalizer", "operations": ["trim", "whitespace", "lowercase", "remove_nulls",
                                                        "redact_pii"]},
        {"id": "p", "type": "parser", "format": "yaml", "path": "/items"},
        {"id": "c", "type": "chunker", "chunk_size": "${chunk}", "overlap": 0},
    ]}
    assert validation_errors("ingestion-pipeline", ok) == []
    bad = {"id": "i", "trigger": ["manual", "manual"], "processors": [
        {"id": "n", "type": "normalizer", "operations": ["shout"]},
        {"id": "p", "type": "parser", "format": "xml"},
        {"type": "custom", "entry_point": "x:y"},
    ]}
    paths = {e["path"] for e in validation_errors("ingestion-pipeline", bad)}
    assert paths == {"/trigger", "/processors/0/operations/0", "/processors/1/format", "/processors/2"}
