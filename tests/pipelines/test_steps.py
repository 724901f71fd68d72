"""Each step type against in-memory stores."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.pipelines.runner import PipelineRun, run_pipeline
from context_assembly.pipelines.steps.input import keywords
from context_assembly.pipelines.steps.retrieval import parse_time

from .fakes import FakeGraph, FakeKV, definition, event_log, example_stores, make_request


def run(steps: list[Any], **request_changes: Any) -> PipelineRun:
    stores = request_changes.pop("stores", None) or example_stores()
    result = run_pipeline(definition(steps), make_request(**request_changes), stores)
    assert result.status == "ok", result.error
    return result


def contents(result: PipelineRun) -> list[str]:
    return [i.content for i in result.items]


def seeded(*scored: tuple[str, float | None], ts: list[float] | None = None) -> list[dict[str, Any]]:
    """Steps that put items with given contents and scores in place (via a vector collection)."""
    docs = [{"id": f"x{i}", "doc_uri": f"d{i}", "chunk": 0, "text": text,
             "metadata": {"title": f"T{i}", "kind": "even" if i % 2 == 0 else "odd",
                          **({"timestamp": ts[i]} if ts else {})}, "score_override": s}
            for i, (text, s) in enumerate(scored)]
    return docs


class ScoredVectors:
    """Returns its documents in order with their own scores (for ranking tests)."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def search(self, collection: str, query: str, top_k: int = 5, min_score: float = 0.0,
               mode: str = "vector") -> list[dict[str, Any]]:
        return [{**d, "score": d["score_override"]} for d in self.docs][:top_k]


def with_items(*scored: tuple[str, float | None], ts: list[float] | None = None) -> dict[str, Any]:
    return {"stores": example_stores(vectors=ScoredVectors(seeded(*scored, ts=ts)))}


SEARCH = {"type": "vector_search", "collection": "c", "query": "q", "topK": 50, "minScore": 0}


# -- input ------------------------------------------------------------------------------------------


def test_derive_query_passthrough_takes_the_first_non_empty_key() -> None:
    result = run([{"type": "derive_query", "from": ["addVar.query", "input.text"]}])
    assert result.query == "Fix the login timeout and refactor the auth session handling"


def test_derive_query_keyword_extract() -> None:
    result = run([{"type": "derive_query", "method": "keyword_extract"}])
    assert result.query == "fix login timeout refactor auth session handling"
    assert keywords("The auth_service.py, the AUTH service!") == ["auth_service.py", "auth", "service"]


def test_derive_query_llm_rephrase_falls_back_with_a_warning() -> None:
    result = run([{"type": "derive_query", "method": "llm_rephrase"}])
    assert result.query == "fix login timeout refactor auth session handling"
    assert result.steps[0].warnings == [
        "llm_rephrase: the client offers no model (llm/complete); used keyword_extract instead"]


def test_derive_query_llm_rephrase_does_not_wait_long_for_a_slow_model() -> None:
    release = threading.Event()

    def slow(request: dict[str, Any]) -> dict[str, Any]:
        release.wait(5)
        return {"text": "too late"}

    started = time.monotonic()
    memory = definition([{"type": "derive_query", "method": "llm_rephrase"}, {"type": "format"}])
    result = run_pipeline(memory, make_request(), example_stores(), deadline=started + 0.4, llm=slow)
    release.set()
    # half the time left, so the fallback query still leaves the later steps time to run
    assert result.ok and time.monotonic() - started < 0.35
    assert result.query == "fix login timeout refactor auth session handling"
    assert "did not answer within" in result.warnings[0] and "keyword_extract" in result.warnings[0]


def test_derive_query_llm_rephrase_stops_waiting_when_cancelled() -> None:
    release = threading.Event()
    started = time.monotonic()
    result = run_pipeline(definition([{"type": "derive_query", "method": "llm_rephrase"}]), make_request(),
                          example_stores(), cancelled=lambda: time.monotonic() - started > 0.1,
                          llm=lambda request: {"text": "late"} if release.wait(5) else {})
    release.set()
    assert result.status == "cancelled" and time.monotonic() - started < 1


def test_derive_query_without_values_gives_an_empty_query_and_a_warning() -> None:
    result = run([{"type": "derive_query", "from": "addVar.query"}])
    assert result.query == "" and result.steps[0].warnings


def test_rewrite_query_fills_the_template() -> None:
    result = run([{"type": "derive_query", "method": "keyword_extract", "from": "addVar.phase"},
                  {"type": "rewrite_query", "template": "${query} ${scope.project.project_name}"}])
    assert result.query == "planning shop"


# -- retrieval --------------------------------------------------------------------------------------


def test_kv_get_one_item_per_existing_key() -> None:
    result = run([{"type": "kv_get", "namespace": "users", "keys": ["u-ada", "u-nobody"]}])
    [item] = result.items
    assert item.source == "kv://default/users/u-ada"
    assert json.loads(item.content) == {"review_style": "terse", "language": "en"}
    assert "kv://default/users/u-nobody does not exist" in result.steps[0].warnings[0]


def test_kv_get_without_keys_reads_the_namespace() -> None:
    result = run([{"type": "kv_get", "namespace": "prefs"}])
    assert contents(result) == ["dark"]  # strings as they are


def test_json_get_with_a_pointer() -> None:
    result = run([{"type": "json_get", "doc": "project-config", "pointer": "/conventions"}])
    assert result.items[0].source == "json://project-config#/conventions"
    assert json.loads(result.items[0].content) == {"indent": 4}


def test_markdown_read_titles_come_from_the_heading() -> None:
    result = run([{"type": "markdown_read", "notes": ["style-guide", "coding-standards", "gone"]}])
    assert [i.title for i in result.items] == ["Style guide", "Coding standards"]
    assert [i.source for i in result.items] == ["markdown://style-guide", "markdown://coding-standards"]
    assert any("markdown://gone" in w for w in result.warnings)


def test_log_search_type_since_fields_limit() -> None:
    result = run([{"type": "log_search", "eventType": "tool_error", "limit": 5}])
    assert [i.metadata["event_id"] for i in result.items] == [3, 1]  # newest first
    assert result.items[0].content == "tool_error: tool=mypy, code=2"
    filtered = run([{"type": "log_search", "eventType": ["tool_error", "tool_call"], "fields": {"tool": "git"}}])
    assert [i.metadata["event_id"] for i in filtered.items] == [2]
    assert run([{"type": "log_search", "since": "-7d"}]).items == []  # the fake events are from 1970


def test_log_search_finds_an_older_match_behind_many_newer_events() -> None:
    """`fields` is the store's search (indexed, exact): the step filtered the newest `limit × 10`
    events itself, so a match older than that window was never found."""
    events = [(1.0, "tool_call", {"tool": "grep"})] + [(2.0 + i, "tool_call", {"tool": "ls"}) for i in range(30)]
    stores = example_stores(events=event_log(events))
    found = run_pipeline(definition([{"type": "log_search", "fields": {"tool": "grep"}, "limit": 2}]),
                         make_request(), stores)
    assert found.status == "ok" and [i.metadata["event_id"] for i in found.items] == [1]
    # a boolean equals only a boolean (not 1, not 1.0), as the rules' `eq` says
    flags = event_log([(1.0, "run", {"retries": True}), (2.0, "run", {"retries": 1}), (3.0, "run", {"retries": 1.0})])
    by_bool = run_pipeline(definition([{"type": "log_search", "fields": {"retries": True}}]), make_request(),
                           example_stores(events=flags))
    assert [i.metadata["event_id"] for i in by_bool.items] == [1]
    by_number = run_pipeline(definition([{"type": "log_search", "fields": {"retries": 1}}]), make_request(),
                             example_stores(events=flags))
    assert [i.metadata["event_id"] for i in by_number.items] == [3, 2]


def test_parse_time_forms() -> None:
    assert parse_time("-2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_time("1970-01-01T00:01:00Z") == 60.0
    assert parse_time("1970-01-01T00:01:00") == 60.0


def test_episodic_recent_uses_the_request_thread() -> None:
    result = run([{"type": "episodic_recent", "limit": 3}])
    assert contents(result) == ["user: turn 7", "user: turn 8", "user: turn 9"]
    assert {i.source for i in result.items} == {"episodic://t-42"}


def test_file_read() -> None:
    result = run([{"type": "file_read", "path": "${addVar.active_file}"}])
    assert result.items[0].source == "file://src/auth/login.py"
    assert result.items[0].content.strip()


def test_vector_search_uses_the_derived_query() -> None:
    stores = example_stores()
    result = run([{"type": "derive_query", "method": "keyword_extract"},
                  {"type": "vector_search", "collection": "docs", "topK": 2, "minScore": 0.2, "mode": "hybrid"}],
                 stores=stores)
    assert stores.vectors.calls[0] == {"collection": "docs", "query": result.query, "top_k": 2,
                                       "min_score": 0.2, "mode": "hybrid"}
    assert [i.title for i in result.items] == ["Session handling", "Login"]
    assert result.items[0].source == "vector://docs/adr/sessions.md"
    assert result.items[0].score is not None and result.items[0].score > 0.2


def test_vector_search_defaults_drop_low_scores() -> None:
    stores = example_stores()
    run([{"type": "vector_search", "collection": "docs", "query": "anything"}], stores=stores)
    assert stores.vectors.calls[0]["top_k"] == 5 and stores.vectors.calls[0]["min_score"] == 0.5


def test_graph_view_read_binds_params() -> None:
    stores = example_stores()
    result = run([{"type": "graph_view_read", "view": "dependents", "params": {"name": "auth", "limit": 1}}],
                 stores=stores)
    assert stores.graph.calls == [("dependents", {"name": "auth", "limit": 1})]
    assert contents(result) == ["id: session\nname: session\nkind: module"]
    assert result.items[0].source == "graph://dependents"


# -- expansion --------------------------------------------------------------------------------------


def test_graph_neighbor_expand_adds_neighbours_of_item_nodes() -> None:
    result = run([{"type": "graph_view_read", "view": "dependents", "params": {"name": "auth"}},
                  {"type": "graph_neighbor_expand", "depth": 1, "edge_kinds": ["depends_on"]}])
    assert [i.title for i in result.items] == ["session", "billing", "auth", "db"]
    assert result.items[2].source == "graph://default/node/auth"
    assert result.steps[1].count == 2


def test_graph_rows_without_an_id_are_told_apart_by_content() -> None:
    def by_kind(params: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"name": name} for name in {"module": ["auth", "billing"], "person": ["Ada"]}[params["kind"]]]

    steps = [{"type": "graph_view_read", "view": "by-kind", "params": {"kind": "module"}},
             {"type": "graph_view_read", "view": "by-kind", "params": {"kind": "person"}}]
    first = run(steps, stores=example_stores(graph=FakeGraph({"by-kind": by_kind})))
    ids = {i.content: i.id for i in first.items}
    assert list(ids) == ["name: auth", "name: billing", "name: Ada"] and len(set(ids.values())) == 3
    again = run(steps[::-1], stores=example_stores(graph=FakeGraph({"by-kind": by_kind})))
    assert {i.content: i.id for i in again.items} == ids  # the same row, the same id, in any run


def test_graph_view_expand_runs_the_view_per_item() -> None:
    stores = example_stores()
    result = run([{"type": "kv_get", "namespace": "prefs", "keys": ["theme"]},
                  {"type": "annotate", "fields": {"module": "auth"}, "provenance": False},
                  {"type": "graph_view_expand", "view": "dependents", "params": {"name": "${item.metadata.module}"}}],
                 stores=stores)
    assert stores.graph.calls == [("dependents", {"name": "auth"})]
    assert [i.title for i in result.items] == ["theme", "session", "billing"]


# -- filter -----------------------------------------------------------------------------------------


def test_filter_keeps_items_the_conditions_hold_for() -> None:
    result = run([SEARCH, {"type": "filter", "where": [{"field": "score", "operator": "gte", "value": 0.5},
                                                      {"field": "metadata.kind", "operator": "eq", "value": "even"}]}],
                 **with_items(("a", 0.9), ("b", 0.8), ("c", 0.1), ("d", None)))
    assert contents(result) == ["a"]


def test_filter_reads_request_variables_and_nested_groups() -> None:
    where = [{"any": [{"field": "content", "operator": "contains", "value": "B"},
                      {"field": "addVar.phase", "operator": "eq", "value": "review"}]}]
    result = run([SEARCH, {"type": "filter", "where": where}], **with_items(("a", 1), ("b", 1)))
    assert contents(result) == ["b"]


def test_deduplicate_by_content_and_by_field() -> None:
    result = run([SEARCH, {"type": "deduplicate"}], **with_items(("a", 1), ("a", 0.5), ("b", 1)))
    assert contents(result) == ["a", "b"]
    by_kind = run([SEARCH, {"type": "deduplicate", "by": "metadata.kind"}], **with_items(("a", 1), ("b", 1), ("c", 1)))
    assert contents(by_kind) == ["a", "b"]


# -- aggregation ------------------------------------------------------------------------------------


def test_group_by_one_item_per_group() -> None:
    result = run([SEARCH, {"type": "group_by", "field": "metadata.kind"}],
                 **with_items(("a", 0.1), ("b", 0.2), ("c", 0.3)))
    assert [(i.title, i.content, i.metadata["count"], i.score) for i in result.items] == [
        ("even", "a\nc", 2, 0.3), ("odd", "b", 1, 0.2)]


def test_reduce_latest_keeps_the_newest_per_key() -> None:
    result = run([SEARCH, {"type": "reduce_latest", "by": "metadata.kind"}],
                 **with_items(("a", 1), ("b", 1), ("c", 1), ("d", 1), ts=[5.0, 1.0, 3.0, 9.0]))
    assert contents(result) == ["a", "d"]


def test_merge_strategies_over_aliases() -> None:
    steps = [{"type": "kv_get", "namespace": "users", "keys": ["u-ada"], "alias": "prefs"},
             {"type": "markdown_read", "notes": ["style-guide", "coding-standards"], "alias": "notes"}]
    interleaved = run([*steps, {"type": "merge", "inputs": ["notes", "prefs"], "strategy": "interleave"}])
    assert [i.source for i in interleaved.items] == ["markdown://style-guide", "kv://default/users/u-ada",
                                                     "markdown://coding-standards"]
    default = run([*steps, {"type": "merge", "strategy": "interleave"}])
    assert [i.source for i in default.items][:2] == ["kv://default/users/u-ada", "markdown://style-guide"]
    unique = run([*steps, {"type": "merge", "inputs": ["notes", "notes"], "strategy": "unique"}])
    assert len(unique.items) == 2


# -- ranking ----------------------------------------------------------------------------------------


def test_rank_score_desc_with_top_k() -> None:
    result = run([SEARCH, {"type": "rank", "topK": 2}], **with_items(("a", 0.1), ("b", None), ("c", 0.9)))
    assert contents(result) == ["c", "a"]


def test_rank_recency_newest_first_untimed_last() -> None:
    docs = seeded(("a", 1), ("b", 1), ("c", 1))
    docs[0]["metadata"]["timestamp"], docs[1]["metadata"]["timestamp"] = 1.0, 2.0
    stores = example_stores(vectors=ScoredVectors(docs))
    assert contents(run([SEARCH, {"type": "rank", "strategy": "recency"}], stores=stores)) == ["b", "a", "c"]


def test_rank_relevance_by_query_overlap_ties_by_score() -> None:
    result = run([{"type": "derive_query", "from": "addVar.query"}, {"type": "rewrite_query", "template": "auth login"},
                  SEARCH, {"type": "rank", "strategy": "relevance"}],
                 **with_items(("nothing here", 0.9), ("auth only", 0.1), ("login and auth", 0.2), ("auth too", 0.3)))
    assert contents(result) == ["login and auth", "auth too", "auth only", "nothing here"]


def test_score_weights_fields_and_recency() -> None:
    docs = seeded(("old", 0.5), ("new", 0.5))
    docs[0]["metadata"].update(timestamp=100.0, boost=2)
    docs[1]["metadata"].update(timestamp=200.0)
    stores = example_stores(vectors=ScoredVectors(docs))
    result = run([SEARCH, {"type": "score", "weights": {"score": 2, "metadata.boost": 0.25, "recency": 1}}],
                 stores=stores)
    assert [i.score for i in result.items] == [1.5, 2.0]


# -- transform --------------------------------------------------------------------------------------


def test_summarize_keeps_the_first_items_and_names_the_rest() -> None:
    result = run([SEARCH, {"type": "summarize", "max_items": 2}], **with_items(("a", 1), ("b", 1), ("c", 1), ("d", 1)))
    assert contents(result) == ["a", "b", "… and 2 more: T2, T3"]
    assert result.items[-1].metadata["omitted"] == 2


def test_summarize_with_max_tokens_summarises_each_long_item_extractively() -> None:
    long = "Lead sentence here. " + " ".join(f"Filler {i} says nothing." for i in range(30)) + " The login timeout."
    task = {"input": {"text": "fix the login timeout"}}
    result = run([SEARCH, {"type": "summarize", "max_tokens": 12}], **with_items((long, 1), ("short one.", 1)),
                 **task)
    summary, short = contents(result)
    assert summary == "Lead sentence here. The login timeout." and short == "short one."
    assert result.items[0].metadata["summarised"] is True and result.items[0].metadata["original_tokens"] > 100
    both = run([SEARCH, {"type": "summarize", "max_items": 1, "max_tokens": 12}], **with_items((long, 1), ("b", 1)),
               **task)
    assert contents(both)[0] == "Lead sentence here. The login timeout." and len(both.items) == 2
    output = json.dumps({"command": "pytest", "stdout": "login timeout " * 200}, indent=2)
    cut = run([SEARCH, {"type": "summarize", "max_tokens": 40}], **with_items((output, 1)), **task)
    assert contents(cut)[0].startswith('{\n  "command": "pytest",\n  "stdout": "login timeout')
    assert "[… truncated" in contents(cut)[0] and cut.items[0].metadata["truncated"] is True
    assert "summarised" not in cut.items[0].metadata  # a cut, said as such: not a summary
    failed = run_pipeline(definition([{"type": "summarize"}]), make_request(), example_stores())
    assert failed.status == "failed" and "needs one of 'max_items', 'max_tokens'" in (failed.error or "")


@pytest.mark.parametrize(("style", "expected"), [
    ("bullet_list", ["- a\n  line", "- b"]),
    ("numbered", ["1. a\n   line", "2. b"]),
    ("prose", ["a\nline", "b"]),
    ("markdown", ["### T0\n\na\nline", "### T1\n\nb"]),
])
def test_format_styles(style: str, expected: list[str]) -> None:
    result = run([SEARCH, {"type": "format", "format": style}], **with_items(("a\nline", 1), ("b", 0.5)))
    assert contents(result) == expected


def test_format_json_and_template() -> None:
    result = run([SEARCH, {"type": "format", "format": "json"}], **with_items(("a", 1)))
    assert json.loads(result.items[0].content)["title"] == "T0"
    templated = run([SEARCH, {"type": "format", "template": "{{title}} ({{metadata.kind}}{{missing}}): {{content}}"}],
                    **with_items(("a ${addVar.phase} {{title}}", 1)))
    assert contents(templated) == ["T0 (even): a ${addVar.phase} {{title}}"]  # filled values stay literal


def test_format_default_is_bullet_list() -> None:
    assert contents(run([SEARCH, {"type": "format"}], **with_items(("a", 1)))) == ["- a"]


def test_annotate_sets_fields_and_provenance() -> None:
    result = run([SEARCH | {"alias": "hits"}, {"type": "annotate", "fields": {"origin": "docs", "t": "${item.title}",
                                                                               "phase": "${addVar.phase}"}}],
                 **with_items(("a", 1)))
    meta = result.items[0].metadata
    assert (meta["origin"], meta["t"], meta["phase"]) == ("docs", "T0", "planning")
    assert meta["provenance"] == {"memory": "m", "step": "hits", "store": "vector", "source": "vector://c/d0"}


# -- control ----------------------------------------------------------------------------------------


def test_conditional_runs_the_matching_branch() -> None:
    step = {"type": "conditional", "condition": {"field": "addVar.phase", "operator": "eq", "value": "planning"},
            "then_steps": [{"type": "rank", "strategy": "score_desc", "topK": 1}],
            "else_steps": [{"type": "summarize", "max_items": 1}]}
    result = run([SEARCH, step], **with_items(("a", 0.1), ("b", 0.9)))
    assert contents(result) == ["b"]
    assert result.steps[1].branch == "then_steps" and result.steps[2].depth == 1
    other = run([SEARCH, step], additional_variables={"phase": "review"}, **with_items(("a", 0.1), ("b", 0.9)))
    assert contents(other) == ["a", "… and 1 more: T1"]


def test_conditional_reads_items_count() -> None:
    step = {"type": "conditional", "condition": [{"field": "items.count", "operator": "gt", "value": 1}],
            "then_steps": [{"type": "format", "format": "numbered"}]}
    assert contents(run([SEARCH, step], **with_items(("a", 1), ("b", 1))))[1] == "2. b"
    assert contents(run([SEARCH, step], **with_items(("a", 1)))) == ["a"]


def test_early_exit_on_min_items_and_condition() -> None:
    steps = [SEARCH, {"type": "early_exit", "min_items": 2}, {"type": "format"}]
    result = run(steps, **with_items(("a", 1), ("b", 1)))
    assert contents(result) == ["a", "b"] and result.steps[2].skipped
    assert contents(run(steps, **with_items(("a", 1)))) == ["- a"]
    high = [SEARCH, {"type": "early_exit", "when": {"field": "score", "operator": "gte", "value": 0.9}},
            {"type": "format"}]
    assert contents(run(high, **with_items(("a", 0.95), ("b", 0.1)))) == ["a", "b"]
    assert contents(run(high, **with_items(("a", 0.5)))) == ["- a"]


def test_every_step_type_has_a_test_here() -> None:
    from context_assembly.registry.steps import step_names

    source = Path(__file__).read_text()
    assert [n for n in step_names() if f'"type": "{n}"' not in source] == []


def test_retrieval_ids_are_stable() -> None:
    first = run([{"type": "markdown_read", "note": "style-guide"}])
    time.sleep(0.001)
    assert first.items[0].id == run([{"type": "markdown_read", "note": "style-guide"}, {"type": "format"}]).items[0].id


def test_kv_store_without_listing_needs_keys() -> None:
    class Plain(FakeKV):
        keys = None  # type: ignore[assignment]

    result = run_pipeline(definition([{"type": "kv_get", "namespace": "prefs"}]), make_request(),
                          example_stores(kv=Plain()))
    assert result.status == "failed" and "'keys' is required" in (result.error or "")


def test_variables_read_by_conditions_are_in_variables_used() -> None:
    # the trace's variables_used says what a memory depended on: conditions read variables too
    gated = run([{"type": "conditional", "condition": {"field": "project.name", "operator": "eq", "value": "shop"},
                  "then_steps": [{"type": "markdown_read", "note": "style-guide"}]},
                 {"type": "filter", "where": [{"field": "scope.agent.agent_name", "operator": "eq",
                                               "value": "code-agent"}, {"field": "score", "operator": "exists"}]},
                 {"type": "early_exit", "min_items": 0, "when": {"field": "addVar.phase", "operator": "exists"}}])
    assert gated.variables_used == ["addVar.phase", "scope.agent.agent_name", "scope.project.project_name"]
    summarised = run([{"type": "markdown_read", "note": "style-guide"}, {"type": "summarize", "max_tokens": 5}])
    assert summarised.variables_used == ["input.text"]  # no query yet: the task text picked the sentences
