"""persistentMemory/validate: the schema, then meaning."""

from __future__ import annotations

from typing import Any

import pytest

from context_assembly.model.converter import unstructure
from context_assembly.pipelines.steps import step_function
from context_assembly.pipelines.validate import validate_definition
from context_assembly.registry.steps import lookup_step, step_names
from context_assembly.rules.checks import LintContext
from context_assembly.workspace.loader import load_workspace

from ..conftest import EXAMPLE
from .fakes import definition


def problems(steps: list[Any], **extra: Any) -> dict[str, Any]:
    return validate_definition(definition(steps, **extra))


def codes(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["path"], e["code"]) for e in entries]


def test_every_registered_step_names_its_function() -> None:
    for kind in step_names():
        spec = lookup_step(kind)
        assert spec is not None and callable(step_function(spec)), kind


def test_the_examples_are_valid() -> None:
    for memory_id, memory in load_workspace(EXAMPLE).memories.items():
        result = validate_definition(unstructure(memory))
        assert result["valid"] and result["errors"] == [], memory_id


def test_the_shorthand_is_a_warning() -> None:
    result = validate_definition({"name": "n", "pipeline": [{"step": "markdown_read", "note": "x"}]})
    assert result["valid"] and codes(result["warnings"]) == [("", "shorthand")]


def test_unknown_step_type_with_did_you_mean() -> None:
    result = problems([{"type": "rnak"}])
    assert not result["valid"]
    assert result["errors"] == [{"path": "/retrieval/pipeline/0/type", "code": "unknown-step",
                                 "message": "unknown step type 'rnak' (did you mean rank?)"}]
    shorthand = validate_definition({"name": "n", "pipeline": [{"step": "fromat"}]})
    assert ("/pipeline/0/step", "unknown-step") in codes(shorthand["errors"])


def test_schema_errors_are_reported() -> None:
    result = problems([{"type": "vector_search", "topK": 0}])
    assert {e["path"] for e in result["errors"]} >= {"/retrieval/pipeline/0", "/retrieval/pipeline/0/topK"}
    assert validate_definition([1])["errors"][0]["code"] == "schema"


@pytest.mark.parametrize(("template", "code"), [
    ("${later}", "alias-before-definition"),
    ("${nope}", "unknown-variable"),
    ("${scope.galaxy.id}", "unknown-variable"),
    ("${item.title}", "unknown-variable"),
    ("${}", "unknown-variable"),
    ("${kv.first}", "unknown-variable"),
])
def test_variables_that_can_never_be_filled(template: str, code: str) -> None:
    steps = [{"type": "kv_get", "keys": ["a"], "alias": "kv"},
             {"type": "rewrite_query", "template": template},
             {"type": "kv_get", "keys": ["b"], "alias": "later"}]
    result = problems(steps)
    assert (("/retrieval/pipeline/1/template", code) in codes(result["errors"])), result


def test_variables_that_can_be_filled() -> None:
    steps = [{"type": "kv_get", "keys": ["${scope.user.user_id}"], "alias": "kv"},
             {"type": "rewrite_query", "template": "${query} ${kv} ${kv.count} ${kv.0.metadata.key} ${input.text}"},
             {"type": "graph_view_expand", "view": "v", "params": {"x": "${item.metadata.key}"}},
             {"type": "annotate", "fields": {"t": "${item.title}"}}]
    result = problems(steps, inputs_scope=["user"])
    assert result["valid"] and result["warnings"] == [], result


def test_variable_warnings() -> None:
    steps = [{"type": "rewrite_query", "template": "${addVar.module} ${scope.user.user_id} ${addVar.phase}"},
             {"type": "kv_get", "keys": ["a"], "alias": "x"}, {"type": "kv_get", "keys": ["b"], "alias": "x"},
             {"type": "kv_get", "keys": ["c"], "alias": "query"}]
    result = problems(steps)
    assert result["valid"]
    assert codes(result["warnings"]) == [
        ("/retrieval/pipeline/0/template", "undeclared-variable"),
        ("/retrieval/pipeline/0/template", "scope-not-required"),
        ("/retrieval/pipeline/2/alias", "duplicate-alias"),
        ("/retrieval/pipeline/3/alias", "reserved-alias"),
    ]
    declared = problems(steps[:1], inputs_scope=["user"], additional_variables=[{"name": "module"}])
    assert declared["warnings"] == []


def test_filter_conditions_use_the_rule_checks_with_item_fields() -> None:
    where = [{"field": "score", "operator": "gte", "value": 0.3},
             {"any": [{"field": "metadata.kind", "operator": "equals", "value": "adr"},
                      {"field": "content", "operator": "regex", "value": "(a)\\1"}]},
             {"field": "score", "operator": "gtee", "value": 1}]
    result = problems([{"type": "filter", "where": where}])
    assert codes(result["errors"]) == [
        ("/retrieval/pipeline/0/where/1/any/1/value", "unsafe-regex"),
        ("/retrieval/pipeline/0/where/2/operator", "unknown-operator"),
    ]
    assert "did you mean 'gte'" in result["errors"][1]["message"]
    assert ("/retrieval/pipeline/0/where/1/any/0/operator", "operator-alias") in codes(result["warnings"])


def test_control_conditions() -> None:
    steps = [{"type": "conditional", "condition": {"field": "score", "operator": "gt", "value": 1},
              "then_steps": [{"type": "rank", "alias": "r"}], "else_steps": [{"type": "rnak"}]},
             {"type": "early_exit", "when": [{"field": "items.count", "operator": "gte", "value": 3},
                                             {"field": "score", "operator": "gte", "value": 0.9}]},
             {"type": "rewrite_query", "template": "${r.count}"}]
    result = problems(steps)
    assert codes(result["errors"]) == [("/retrieval/pipeline/0/condition/field", "unknown-variable"),
                                       ("/retrieval/pipeline/0/else_steps/0/type", "unknown-step")]


def test_query_checks() -> None:
    result = problems([{"type": "vector_search", "collection": "docs"}])
    assert codes(result["warnings"]) == [("/retrieval/pipeline/0", "no-query")]
    assert problems([{"type": "derive_query", "from": ["input.text"]},
                     {"type": "vector_search", "collection": "docs"}])["warnings"] == []
    bad = problems([{"type": "derive_query", "from": ["input.txt"]}])
    assert codes(bad["errors"]) == [("/retrieval/pipeline/0/from/0", "unknown-variable")]


def test_workspace_context_declares_variables() -> None:
    steps = [{"type": "filter", "where": [{"field": "addVar.module", "operator": "eq", "value": "x"}]}]
    lonely = problems(steps)
    assert any(w["code"] == "unknown-variable" for w in lonely["warnings"])
    known = validate_definition(definition(steps), LintContext(declared_variables={"addVar.module"}))
    assert known["warnings"] == []
