"""`${variable}` step-parameter templates, `{{field}}` format templates, and items."""

from __future__ import annotations

from typing import Any

import pytest

from context_assembly.pipelines.items import Item, item_id
from context_assembly.pipelines.runner import PipelineRun, run_pipeline
from context_assembly.pipelines.templates import TemplateError, Variables, fill, placeholders, render_fields

from .fakes import definition, example_stores, make_request


def run(steps: list[Any], **changes: Any) -> tuple[PipelineRun, Any]:
    stores = example_stores()
    return run_pipeline(definition(steps), make_request(**changes), stores), stores


def variables(**lookup: Any) -> Variables:
    item = Item("body", "kv://a", title="T", metadata={"k": {"n": 2}})
    return Variables(lookup, "the query", {"notes": [item, Item("second", "kv://b")]}, None)


def test_a_lone_template_keeps_the_value_type() -> None:
    result, stores = run([{"type": "vector_search", "collection": "docs", "query": "auth",
                           "topK": "${addVar.files_changed}", "minScore": 0}])
    assert result.status == "ok" and stores.vectors.calls[0]["top_k"] == 3
    assert fill("${addVar.n}", variables(**{"addVar.n": 3})) == 3
    assert fill({"a": ["${addVar.n}", "n=${addVar.n}"]}, variables(**{"addVar.n": 3})) == {"a": [3, "n=3"]}


def test_interpolation_renders_values_as_text() -> None:
    v = variables(**{"addVar.flag": True, "addVar.list": ["a", 1], "input.text": "hi"})
    assert fill("${input.text}: ${addVar.flag} ${addVar.list} ${query}", v) == 'hi: true ["a", 1] the query'


def test_alias_outputs() -> None:
    v = variables()
    assert fill("${notes}", v) == "body\nsecond"
    assert fill("${notes.count}", v) == 2
    assert fill("${notes.0.title}", v) == "T"
    assert fill("${notes.0.metadata.k.n}", v) == 2
    assert fill("${notes.1}", v) == "second"
    with pytest.raises(TemplateError, match="produced 2 item"):
        fill("${notes.5.title}", v)


def test_alias_outputs_in_a_pipeline_are_snapshots() -> None:
    result, _ = run([{"type": "markdown_read", "note": "style-guide", "alias": "guide"},
                     {"type": "format", "format": "numbered"},
                     {"type": "rewrite_query", "template": "${guide.count}: ${guide.0.title} / ${guide}"}])
    assert result.status == "ok"
    assert result.query.startswith("1: Style guide / # Style guide")  # not the formatted "1. # Style guide"


def test_unknown_variable_fails_the_step_naming_it() -> None:
    result, _ = run([{"type": "rewrite_query", "template": "x ${nope.thing}"}])
    assert result.status == "failed"
    assert "${nope.thing}" in (result.error or "") and result.steps[0].error
    with pytest.raises(TemplateError) as info:
        fill("${nope}", variables())
    assert info.value.variable == "nope"


def test_alias_used_before_its_step_is_unknown() -> None:
    result, _ = run([{"type": "rewrite_query", "template": "${later}"},
                     {"type": "kv_get", "namespace": "prefs", "keys": ["theme"], "alias": "later"}])
    assert result.status == "failed" and "${later}" in (result.error or "")
    assert result.steps[1].skipped


def test_missing_request_variable_skips_the_pipeline_with_missing_variables() -> None:
    result, _ = run([{"type": "graph_view_read", "view": "dependents", "params": {"name": "${addVar.module}"}}])
    assert result.status == "skipped"
    assert result.missing_variables == ["addVar.module"]
    assert "${addVar.module}" in (result.error or "")


def test_seed_004_names_work_in_templates() -> None:
    result, _ = run([{"type": "rewrite_query", "template": "${task.type}/${project.name}"}])
    assert result.query == "bugfix/shop"
    assert "scope.task.task_type" in result.variables_used


def test_filled_values_are_not_evaluated_again() -> None:
    result, _ = run([{"type": "rewrite_query", "template": "${input.text}!"}],
                    input={"text": "${addVar.phase} {{title}}"})
    assert result.query == "${addVar.phase} {{title}}!"


@pytest.mark.parametrize("step", [
    {"type": "file_read", "path": "${addVar.active_file}"},
    {"type": "markdown_read", "note": "${addVar.active_file}"},
    {"type": "kv_get", "keys": ["${addVar.active_file}"]},
])
def test_traversal_in_a_filled_value_fails_the_step_not_the_server(step: dict[str, Any]) -> None:
    result, _ = run([step], additional_variables={"active_file": "../../etc/passwd"})
    assert result.status == "failed"
    assert "leaves the workspace" in (result.error or "")
    assert result.items == []


def test_placeholders_lists_every_variable() -> None:
    assert placeholders({"a": ["${x}", "y ${ z.count }"], "b": 1}) == ["x", "z.count"]


def test_render_fields_missing_fields_are_empty() -> None:
    item = Item("c", "kv://k", title=None, score=0.5, metadata={"kind": "adr"})
    assert render_fields("{{title}}|{{score}}|{{metadata.kind}}|{{ content }}|{{nope}}", item) == "|0.5|adr|c|"


def test_item_ids_are_stable_and_context_items_have_the_spec_shape() -> None:
    item = Item.create("text", "kv://default/users/u-1", "u-1", title="u-1", score=0.7, metadata={"a": {"b": 1}})
    assert item.id == item_id("kv://default/users/u-1", "u-1") == Item.create("other", item.source, "u-1").id
    assert Item("x", "kv://a").id == Item("x", "kv://a").id != Item("y", "kv://a").id
    assert item.fields()["metadata.a.b"] == 1 and item.get("metadata.a.b") == 1
    context = item.to_context_item("prefs", "constraints", "high", 2)
    assert set(context) == {"id", "content", "memory_id", "source", "section", "priority", "score", "tokens",
                            "metadata"}
    assert context["metadata"]["title"] == "u-1" and context["score"] == 0.7


def test_format_never_renders_a_filled_value_as_a_field_template() -> None:
    # the task text is the user's: `{{...}}` in it must not pull an item's metadata into view
    result, _ = run([{"type": "kv_get", "namespace": "prefs", "keys": ["theme"]},
                     {"type": "annotate", "fields": {"secret": "s3cr3t-token"}, "provenance": False},
                     {"type": "format", "template": "Task: ${input.text} | {{content}} ({{metadata.secret}})"}],
                    input={"text": "hello {{metadata.secret}} {{ source }}"})
    assert result.status == "ok", result.error
    assert [i.content for i in result.items] == ["Task: hello {{metadata.secret}} {{ source }} | dark (s3cr3t-token)"]
    assert "input.text" in result.variables_used


def test_a_format_template_fills_its_variables_even_without_items() -> None:
    result, _ = run([{"type": "format", "template": "${addVar.module}: {{content}}"}])
    assert result.status == "skipped" and result.missing_variables == ["addVar.module"]
