"""The budget ladder of seed 003 end to end: shorten before dropping, compress before cutting, every
step traced (README "When the budget is tight")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.model import unstructure
from context_assembly.runtime import Runtime
from context_assembly.schemas import validation_errors

from ..workspace.builder import write

SCOPES = {"project": {"project_id": "p"}, "thread": {"thread_id": "t-1"}}
MARKER = re.compile(r"\[… truncated: (\d+) of (\d+) tokens left out\]$")


def definition(memory_id: str, steps: list[dict[str, Any]], section: str = "knowledge", priority: str = "medium",
               **contribution: Any) -> dict[str, Any]:
    return {"id": memory_id, "label": memory_id, "status": "active", "retrieval": {"pipeline": steps},
            "contribution": {"section": section, "priority": priority, **contribution}}


def sentences(word: str, count: int) -> str:
    return " ".join(f"The {word} sentence number {i} says something about the service layout." for i in range(count))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write(tmp_path, "context-rule-engines/main.json", {"id": "main", "rules": []})
    (tmp_path / ".codebolt/memory").mkdir(parents=True)
    return tmp_path


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root)
    yield rt
    rt.close()


def assemble(rt: Runtime, text: str = "explain the service layout", **extra: Any) -> dict[str, Any]:
    result = unstructure(rt.assemble({"scope_variables": SCOPES, "input": {"text": text}, "thread_id": "t-1",
                                      **extra}))
    assert validation_errors("assembled-context", result) == []
    assert result["meta"]["token_estimate"] <= (result["meta"].get("max_tokens") or 10**9)
    return result


def items(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for section in result["context"].values() for item in section]


def steps(result: dict[str, Any], strategy: str) -> list[dict[str, Any]]:
    return [s for s in result["trace"]["ladder"] if s["strategy"] == strategy]


def test_a_critical_document_over_the_budget_is_shortened_not_lost(runtime: Runtime, root: Path) -> None:
    write(root, "PersistentMemory/arch.json",
          definition("arch", [{"type": "markdown_read", "note": "arch"}], "constraints", "critical"))
    (root / ".codebolt/memory/arch.md").write_text(sentences("architecture", 60))
    result = assemble(runtime, explicit_memory=["arch"], constraints={"max_tokens": 120})
    [doc] = [i for i in result["context"]["constraints"] if i["memory_id"] == "arch"]
    found = MARKER.search(doc["content"])
    assert found and int(found.group(2)) > 900 and doc["metadata"]["truncated"] is True
    assert doc["content"][: found.start()].rstrip().endswith(".")  # at a sentence boundary
    assert [s["item_id"] for s in steps(result, "truncate")] == [doc["id"]]


def test_any_item_not_only_the_first_is_shortened(runtime: Runtime, root: Path) -> None:
    (root / ".codebolt/memory/short.md").write_text("A short note about the layout.")
    (root / ".codebolt/memory/long.md").write_text(sentences("long", 40))
    full = assemble(runtime, explicit_memory=["markdown://short", "markdown://long"])
    budget = full["meta"]["token_estimate"] - 200
    request = {"explicit_memory": ["markdown://short", "markdown://long"], "constraints": {"max_tokens": budget}}
    result = assemble(runtime, **request)
    kept = {i["source"]: i for i in result["context"]["knowledge"]}
    assert set(kept) == {"markdown://short", "markdown://long"}
    assert kept["markdown://long"]["metadata"]["summary"] == "extractive"  # summarised before any cut
    assert [s["strategy"] for s in result["trace"]["ladder"]] == ["summarize"]
    write(root, "context-assembly.json", {"budget": {"ladder": ["truncate"]}})
    result = assemble(runtime, **request)
    kept = {i["source"]: i for i in result["context"]["knowledge"]}
    assert set(kept) == {"markdown://short", "markdown://long"}
    assert MARKER.search(kept["markdown://long"]["content"])


def test_a_per_memory_max_tokens_shortens_its_last_item_rather_than_emptying_the_source(
        runtime: Runtime, root: Path) -> None:
    write(root, "PersistentMemory/docs.json",
          definition("docs", [{"type": "markdown_read", "note": "big"}], max_tokens=60))
    (root / ".codebolt/memory/big.md").write_text(sentences("big", 20))
    result = assemble(runtime, explicit_memory=["docs"])
    [doc] = [i for i in result["context"]["knowledge"] if i["memory_id"] == "docs"]
    assert doc["tokens"] <= 60 and MARKER.search(doc["content"])
    assert any(d["kind"] == "shortened" and d["by"] == "contribution of docs" for d in result["trace"]["decisions"])
    # kept, cut: the section is truncated, and nothing of it was dropped
    assert result["trace"]["sections"]["knowledge"] == {"tokens": doc["tokens"], "items": 1, "truncated": True,
                                                        "dropped": 0}


def test_a_rule_cap_shortens_the_item_that_crosses_it(runtime: Runtime, root: Path) -> None:
    """A rule cap's `max_tokens` as a contribution's: the item crossing it is cut with the marker,
    so a cap smaller than an item does not empty the source (per-source caps the same)."""
    write(root, "PersistentMemory/docs.json", definition("docs", [{"type": "markdown_read", "note": "big"}]))
    (root / ".codebolt/memory/big.md").write_text(sentences("big", 20))
    write(root, "context-rule-engines/main.json", {"id": "main", "rules": [
        {"id": "cap-docs", "priority": 1, "when": [],
         "then": {"add_memories": ["docs"], "caps": [{"target": "docs", "max_tokens": 60}]}},
        {"id": "cap-source", "priority": 1,
         "when": [{"field": "memory.source", "operator": "eq", "value": "markdown://small"}],
         "then": {"caps": [{"target": "markdown://small", "max_tokens": 30}]}}]})
    (root / ".codebolt/memory/small.md").write_text(sentences("small", 10))
    result = assemble(runtime, explicit_memory=["markdown://small"])
    kept = {i["memory_id"] or i["source"]: i for i in result["context"]["knowledge"]}
    assert kept["docs"]["tokens"] <= 60 and MARKER.search(kept["docs"]["content"])
    assert kept["markdown://small"]["tokens"] <= 30 and MARKER.search(kept["markdown://small"]["content"])
    shortened = {d["by"] for d in result["trace"]["decisions"] if d["kind"] == "shortened"}
    assert "cap of main/cap-docs on docs" in shortened
    assert any(by.startswith("per-source cap of main/cap-source") for by in shortened), shortened
    assert not [d for d in result["trace"]["decisions"] if d["kind"] == "cap"]


def test_a_tool_output_over_the_budget_keeps_what_fits_of_its_long_value(runtime: Runtime) -> None:
    """A KV value holding a tool's output is JSON, its log one long string: the ladder's summary
    cannot pick sentences from it (it kept `{ "command": …, }` and the trace said "summarised"),
    so the truncate step cuts it where the room ends."""
    log = "\n".join(f"tests/test_login.py::test_{i} FAILED - TimeoutError after 5 s (attempt {i})"
                    for i in range(60))
    runtime.memory.write("kv://tool-output/pytest", {"command": "pytest -x", "exit_code": 1, "stdout": log})
    result = assemble(runtime, explicit_memory=["kv://tool-output/pytest"], constraints={"max_tokens": 600})
    [output] = [i for i in items(result) if i["source"] == "kv://tool-output/pytest"]
    assert '"stdout": "tests/test_login.py::test_0 FAILED' in output["content"] and MARKER.search(output["content"])
    assert result["meta"]["token_estimate"] > 500  # the room is used, not left empty
    assert not steps(result, "summarize") and steps(result, "truncate")


def _docs(rt: Runtime) -> None:
    rt.memory.write("vector://docs/a", {"text": "The login timeout is configured in auth settings."})
    rt.memory.write("vector://docs/b", {"text": "Bananas are yellow fruit grown in warm places timeout."})
    rt.memory.write("vector://docs/c", {"text": "Gardening tips for spring tomatoes."})


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_min_score_is_honoured_by_vector_and_hybrid_search(runtime: Runtime, root: Path, mode: str) -> None:
    _docs(runtime)
    steps = [{"type": "derive_query", "from": ["input.text"], "method": "passthrough"},
             {"type": "vector_search", "collection": "docs", "topK": 5, "minScore": 0.5, "mode": mode}]
    write(root, "PersistentMemory/search.json", definition("search", steps))
    result = assemble(runtime, "login timeout", explicit_memory=["search"])
    assert [i["metadata"]["doc_uri"] for i in result["context"]["knowledge"]] == ["a"]


def test_a_collection_used_directly_has_a_relevance_floor_from_the_settings(runtime: Runtime, root: Path) -> None:
    _docs(runtime)
    result = assemble(runtime, "login timeout", explicit_memory=["vector://docs"])
    assert {i["source"] for i in result["context"]["knowledge"]} == {"vector://docs/a", "vector://docs/b"}  # not 0.02
    write(root, "context-assembly.json", {"budget": {"vector_min_score": 0.5}})
    result = assemble(runtime, "login timeout", explicit_memory=["vector://docs"])
    assert [i["source"] for i in result["context"]["knowledge"]] == ["vector://docs/a"]


def test_dedupe_is_on_the_raw_content_before_format_templates(runtime: Runtime, root: Path) -> None:
    runtime.memory.write("kv://notes/auth", "Sessions expire after 30 minutes.")
    write(root, "PersistentMemory/plain.json", definition("plain", [{"type": "kv_get", "namespace": "notes",
                                                                      "keys": ["auth"]}], priority="high"))
    write(root, "PersistentMemory/fancy.json", definition("fancy", [
        {"type": "kv_get", "namespace": "notes", "keys": ["auth"]},
        {"type": "format", "template": "### Auth\n{{content}}"}]))
    result = assemble(runtime, explicit_memory=["plain", "fancy"])
    assert [i["memory_id"] for i in result["context"]["knowledge"]] == ["plain"]
    [duplicate] = [d for d in result["trace"]["decisions"] if d["kind"] == "duplicate"]
    assert duplicate["memory_id"] == "fancy"


def test_warnings_of_one_kind_are_folded_capped_and_never_crowd_out_a_constraint(
        runtime: Runtime, root: Path) -> None:
    write(root, "PersistentMemory/rules.json",
          definition("rules", [{"type": "markdown_read", "note": "rules"}], "constraints", "high"))
    (root / ".codebolt/memory/rules.md").write_text("Never push to main. Always run the tests before a commit.")
    missing = [f"kv://gone-{i}" for i in range(15)]
    result = assemble(runtime, explicit_memory=["rules", *missing], constraints={"max_tokens": 90})
    assert [i["memory_id"] for i in result["context"]["constraints"]] == ["rules"]
    folded = [w for w in result["context"]["warnings"] if w["metadata"].get("folded")]
    assert folded and folded[0]["content"].startswith("Warning: 15 memory references do not resolve: kv://gone-0")
    assert folded[0]["metadata"]["references"] == missing
    wide = assemble(runtime, explicit_memory=["rules", *missing])
    assert sum(w["tokens"] for w in wide["context"]["warnings"]) <= 200  # budget.warnings_max_tokens
    write(root, "context-assembly.json", {"budget": {"warnings_max_tokens": 30}})
    capped = assemble(runtime, explicit_memory=["rules", *missing])
    assert sum(w["tokens"] for w in capped["context"]["warnings"]) <= 30
    assert "truncated" in capped["context"]["warnings"][0]["content"]


def test_a_kv_reference_naming_a_namespace_loads_all_of_it_under_the_caps(runtime: Runtime, root: Path) -> None:
    for key, value in (("tone", "terse"), ("lang", "en"), ("editor", {"name": "vim"})):
        runtime.memory.write(f"kv://prefs/{key}", value)
    runtime.memory.write("kv://team/prefs/tone", "formal")
    runtime.memory.write("kv://flags", {"beta": True})  # a key of the default namespace wins over a namespace
    result = assemble(runtime, explicit_memory=["kv://prefs", "kv://team/prefs", "kv://flags"])
    contents = [i["content"].split(":")[0] for i in result["context"]["knowledge"]]
    assert contents[:3] == ["editor", "lang", "tone"] and len(contents) == 5
    assert "tone: formal" in [i["content"] for i in result["context"]["knowledge"]]
    sources = {i["source"] for i in result["context"]["knowledge"]}
    assert {"kv://prefs/tone", "kv://team/prefs/tone", "kv://flags"} <= sources
    write(root, "context-rule-engines/main.json", {"id": "main", "rules": [
        {"id": "cap", "when": [], "then": {"caps": [{"target": "kv://prefs", "max_items": 2}]}}]})
    capped = assemble(runtime, explicit_memory=["kv://prefs"])
    assert len(capped["context"]["knowledge"]) == 2
    assert any(d["kind"] == "cap" for d in capped["trace"]["decisions"])
    missing = assemble(runtime, explicit_memory=["kv://nothing-here"])
    assert "kv://nothing-here" in missing["context"]["warnings"][0]["content"]


TOOLS = [
    {"name": "read_file", "description": "Read a file of the project from disk.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "run_tests", "description": "Run the test suite and report failing tests.",
     "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}},
    {"name": "send_email", "description": "Send an email message to a recipient."},
    {"name": "weather", "description": "Current weather forecast for a city."},
]


def test_system_prompt_and_relevant_tools_from_the_request(runtime: Runtime, root: Path) -> None:
    write(root, "context-assembly.json", {"tools": {"top_k": 2, "min_score": 0.05}})
    result = assemble(runtime, "read the file and run the failing tests", system_prompt="You are a careful coder.",
                      tools=TOOLS)
    [prompt] = [i for i in result["context"]["constraints"] if i["id"] == "request:system_prompt"]
    assert prompt["content"] == "You are a careful coder." and prompt["priority"] == "critical"
    tools = [i for i in result["context"]["knowledge"] if i["metadata"].get("kind") == "tool"]
    assert {t["metadata"]["tool"] for t in tools} == {"read_file", "run_tests"}
    assert all(t["priority"] == "high" and '"path"' in t["content"] or '"pattern"' in t["content"] for t in tools)
    told = {t["name"]: t for t in result["trace"]["tools"]}
    assert set(told) == {t["name"] for t in TOOLS}
    assert told["read_file"]["kept"] is True and told["send_email"]["kept"] is False
    assert "top_k" in told["send_email"]["reason"] or "min_score" in told["send_email"]["reason"]
    assert all(isinstance(t["score"], float) for t in told.values())


def test_tools_below_the_floor_are_left_out_and_bad_tools_are_refused(runtime: Runtime, root: Path) -> None:
    write(root, "context-assembly.json", {"tools": {"top_k": 8, "min_score": 0.99}})
    result = assemble(runtime, "read the file", tools=TOOLS)
    assert not [i for i in result["context"]["knowledge"] if i["metadata"].get("kind") == "tool"]
    assert all("min_score" in t["reason"] for t in result["trace"]["tools"])
    from context_assembly.errors import InvalidParamsError

    with pytest.raises(InvalidParamsError) as caught:
        runtime.assemble({"scope_variables": SCOPES, "tools": [{"description": "no name"}], "system_prompt": 3})
    paths = {e["path"] for e in caught.value.errors}
    assert "/tools/0/name" in paths and "/system_prompt" in paths


def test_memory_calls_say_when_the_result_came_from_the_cache(runtime: Runtime, root: Path) -> None:
    runtime.memory.write("kv://notes/auth", "Sessions expire after 30 minutes.")
    write(root, "PersistentMemory/plain.json", definition("plain", [{"type": "kv_get", "namespace": "notes",
                                                                      "keys": ["auth"]}]))
    first, second = (assemble(runtime, explicit_memory=["plain"])["trace"]["memory_calls"][0] for _ in range(2))
    assert (first["cached"], second["cached"]) == (False, True) and second["status"] == "cached"


def test_older_turns_are_compressed_end_to_end_and_every_step_is_traced(runtime: Runtime) -> None:
    for i in range(12):
        runtime.memory.write("episodic://t-1", {"role": "user" if i % 2 else "assistant",
                                                "content": f"Turn {i} discusses the service layout in detail. " * 3})
    full = assemble(runtime, explicit_memory=["episodic://t-1"])
    result = assemble(runtime, explicit_memory=["episodic://t-1"],
                      constraints={"max_tokens": full["meta"]["token_estimate"] - 100})
    [step] = [s for s in result["trace"]["ladder"] if s["strategy"] == "compress_turns"]
    assert step["tokens_after"] < step["tokens_before"] and step["method"] == "extractive"
    history = result["context"]["history"]
    assert history[0]["content"].startswith("Earlier turns (8, summarised):")
    assert [h["content"] for h in history[1:]] == [h["content"] for h in full["context"]["history"][-4:]]
    assert result["trace"]["sections"]["history"]["truncated"] is True


def test_the_final_fit_keeps_the_newest_turns(runtime: Runtime) -> None:
    """Past compress_turns, the final fit walked the history oldest first and dropped the newest
    turns, the very ones compress_turns had kept verbatim."""
    for i in range(12):
        runtime.memory.write("episodic://t-1", {"role": "user" if i % 2 else "assistant",
                                                "content": f"Turn {i} discusses the service layout in detail. " * 3})
    full = assemble(runtime, explicit_memory=["episodic://t-1"])
    turn = full["context"]["history"][-1]["tokens"]
    result = assemble(runtime, explicit_memory=["episodic://t-1"],
                      constraints={"max_tokens": full["meta"]["token_estimate"] - 12 * turn + 2 * turn + 5})
    history = [h["content"] for h in result["context"]["history"]]
    assert history[-1] == full["context"]["history"][-1]["content"]  # the newest, verbatim
    numbers = [int(re.search(r"Turn (\d+)", h).group(1)) for h in history]  # type: ignore[union-attr]
    assert numbers == sorted(numbers) and numbers[-2:] == [10, 11]  # shown oldest first, as always
    assert not any(h.startswith("Earlier turns") for h in history)  # the summary of the oldest went first


def test_a_duplicate_of_a_turn_inside_the_compressed_summary_is_not_said_to_be_left_out(runtime: Runtime) -> None:
    """A thread read twice: the copies of its older turns are duplicates whose kept copy the
    summary of compress_turns now stands for; they read "left out by the budget", untrue."""
    for i in range(12):
        runtime.memory.write("episodic://t-1", {"role": "user" if i % 2 else "assistant",
                                                "content": f"Turn {i} discusses the service layout in detail. " * 3})
    twice = ["episodic://t-1", "episodic://t-1?limit=12"]
    full = assemble(runtime, explicit_memory=twice)
    result = assemble(runtime, explicit_memory=twice, constraints={"max_tokens": full["meta"]["token_estimate"] - 100})
    [summary] = [h for h in result["context"]["history"] if h["metadata"].get("compressed_turns")]
    folded = set(summary["metadata"]["compressed_turns"])
    about_folded = [d for d in result["trace"]["decisions"] if d["kind"] == "duplicate" and d["by"] in folded]
    assert about_folded and all(d["reason"] == "the same content is already included" for d in about_folded)


def test_the_newest_turns_stay_verbatim_when_a_boost_moves_one_ahead(runtime: Runtime, root: Path) -> None:
    """A boost on the newest turn put it first in the packing order: "the older turns" were taken by
    position, so it was summarised (the summary began with it) and turns 7-10 stayed verbatim."""
    write(root, "context-rule-engines/main.json", {"id": "main", "rules": [
        {"id": "refunds", "when": [], "then": {"boost": [{"target": "kg_entity:refund", "weight": 3.0}]}}]})
    for i in range(12):
        extra = " The refund flow matters here." if i == 11 else ""
        runtime.memory.write("episodic://t-1", {"role": "user" if i % 2 else "assistant",
                                                "content": f"Turn {i} discusses the service layout in detail. " * 3
                                                           + extra})
    full = assemble(runtime, explicit_memory=["episodic://t-1"])
    result = assemble(runtime, explicit_memory=["episodic://t-1"],
                      constraints={"max_tokens": full["meta"]["token_estimate"] - 100})
    history = [h["content"] for h in result["context"]["history"]]
    [summary] = [h for h in history if h.startswith("Earlier turns (8, summarised):")]
    assert "Turn 11" not in summary and "Turn 0" in summary
    verbatim = [h for h in history if h is not summary]
    assert sorted(int(h.split("Turn ")[1].split(" ")[0]) for h in verbatim) == [8, 9, 10, 11]


def test_the_budget_note_keeps_within_the_warnings_cap(runtime: Runtime, root: Path) -> None:
    """The note that context was left out was added past budget.warnings_max_tokens, which had just
    left a real warning out."""
    write(root, "context-assembly.json", {"budget": {"warnings_max_tokens": 5}})
    (root / ".codebolt/memory/long.md").write_text(sentences("long", 40))
    result = assemble(runtime, explicit_memory=["markdown://long", "markdown://missing"],
                      constraints={"max_tokens": 120})
    assert result["trace"]["sections"]["warnings"]["tokens"] <= 5


def test_a_tool_the_budget_leaves_out_is_said_so_in_the_trace(runtime: Runtime) -> None:
    """trace.tools said "kept" of a tool the ladder had then dropped from the context."""
    tools = [{"name": "run_tests", "description": "Run the test suite for the login and auth modules.",
              "parameters": {"type": "object", "properties": {"path": {"type": "string",
                                                                        "description": "test path " * 30}}}},
             {"name": "read_file", "description": "Read a file of the repository to inspect the login code.",
              "parameters": {"type": "object", "properties": {"path": {"type": "string",
                                                                        "description": "file path " * 30}}}}]
    text = "fix the login timeout in the auth tests"
    full = assemble(runtime, text, tools=tools)
    result = assemble(runtime, text, tools=tools, constraints={"max_tokens": full["meta"]["token_estimate"] - 40})
    present = {i["metadata"].get("tool") for i in items(result) if i["metadata"].get("kind") == "tool"}
    for entry in result["trace"]["tools"]:
        assert entry["kept"] == (entry["name"] in present), entry
    assert any(not e["kept"] and "left out by the budget" in e["reason"] for e in result["trace"]["tools"])


def test_a_tool_a_cap_leaves_out_is_said_so_in_the_trace(root: Path) -> None:
    """trace.tools said "kept" of tools a rule's cap had removed (only the budget was looked at)."""
    write(root, "context-rule-engines/main.json", {"id": "main", "rules": [
        {"id": "cap-knowledge", "when": [], "then": {"caps": [{"target": "knowledge", "max_items": 1}]}}]})
    tools = [{"name": "run_tests", "description": "Run the test suite for the login and auth modules."},
             {"name": "read_file", "description": "Read a file of the repository to inspect the login code."}]
    rt = Runtime(root)
    try:
        result = assemble(rt, "fix the login timeout in the auth tests", tools=tools)
    finally:
        rt.close()
    present = {i["metadata"].get("tool") for i in items(result) if i["metadata"].get("kind") == "tool"}
    assert len(present) == 1
    for entry in result["trace"]["tools"]:
        assert entry["kept"] == (entry["name"] in present), entry
    [left] = [e for e in result["trace"]["tools"] if not e["kept"]]
    assert "then left out by cap (max_items of cap of main/cap-knowledge on knowledge)" in left["reason"]


def test_a_ladder_setting_naming_an_unknown_strategy_is_reported_and_ignored(tmp_path: Path) -> None:
    from context_assembly.workspace.settings import load_settings

    path = tmp_path / "context-assembly.json"
    path.write_text('{"budget": {"ladder": ["truncate", "shrink"]}, "tools": {"top_k": 2}}')
    settings, problems = load_settings(path)
    assert [p.path for p in problems] == ["/budget/ladder/1"]
    assert settings.budget.ladder == ["relevance_floor", "compress_turns", "summarize", "truncate"]
    assert settings.tools.top_k == 2
    path.write_text('{"budget": {"ladder": ["summarize", "truncate"], "keep_recent_turns": 2}}')
    settings, problems = load_settings(path)
    assert problems == [] and settings.budget.ladder == ["summarize", "truncate"]
    assert settings.budget.keep_recent_turns == 2 and settings.budget.summary_tokens == 120
    # one bad key under budget drops that key only: the ladder turned back to the default (summaries
    # again) when warnings_max_tokens was wrong
    path.write_text('{"budget": {"ladder": ["truncate"], "keep_recent_turns": 2, "warnings_max_tokens": 0}}')
    settings, problems = load_settings(path)
    assert [p.path for p in problems] == ["/budget/warnings_max_tokens"]
    assert settings.budget.ladder == ["truncate"] and settings.budget.keep_recent_turns == 2
    from context_assembly.methods.session import settings_problems

    good, refused = settings_problems({"budget": {"ladder": ["truncate"], "warnings_max_tokens": 0},
                                       "stores": {"dns": "x"}})
    assert good == {"budget": {"ladder": ["truncate"]}}  # stores whole: it is strict
    assert {p.path for p in refused} == {"/budget/warnings_max_tokens", "/stores"}


def test_the_same_words_said_twice_are_two_turns_and_two_events(runtime: Runtime) -> None:
    """A user answering "yes" twice, two identical deploy events: each was dropped as a duplicate of
    the first, so history ended on the assistant's question. The same turn read twice is still one."""
    for role, content in (("user", "yes"), ("assistant", "Run the tests?"), ("user", "yes")):
        runtime.memory.write("episodic://t-2", {"role": role, "content": content})
    for _ in range(2):
        runtime.memory.write("log://deploys", {"event_type": "deploy", "payload": {"env": "prod"}})
    result = assemble(runtime, explicit_memory=["episodic://t-2", "episodic://t-2?limit=3", "log://deploys"])
    history = [h["content"] for h in result["context"]["history"]]
    assert [h for h in history if h.startswith(("user:", "assistant:"))] == \
        ["user: yes", "assistant: Run the tests?", "user: yes"]
    everything = [i["content"] for section in result["context"].values() for i in section]
    assert sum(c.startswith("deploy") for c in everything) == 2
    duplicates = [d for d in result["trace"]["decisions"] if d["kind"] == "duplicate"]
    assert len(duplicates) == 3  # the second read of the thread: its three turns, each a copy of one kept


def test_a_thread_read_by_two_references_is_one_thread_oldest_first(runtime: Runtime) -> None:
    """`episodic://t-1?limit=3` and `episodic://t-1` made two threads: shown newest first, and
    compressed as two (7 turns verbatim where 4 were to be kept)."""
    for n in range(12):
        runtime.memory.write("episodic://t-1", {"role": "user" if n % 2 else "assistant",
                                                "content": f"Turn {n} discusses the service layout in detail. " * 3})
    references = ["episodic://t-1?limit=3", "episodic://t-1"]

    def said(result: dict[str, Any]) -> list[str]:
        return ["summary" if h["content"].startswith("Earlier turns") else re.findall(r"Turn (\d+) ", h["content"])[0]
                for h in result["context"]["history"]]

    full = assemble(runtime, explicit_memory=references)
    assert said(full) == [str(n) for n in range(12)]
    assert {h["source"] for h in full["context"]["history"]} == {"episodic://t-1"}
    budget = {"max_tokens": full["meta"]["token_estimate"] - 100}
    tight = assemble(runtime, explicit_memory=references, constraints=budget)
    [step] = steps(tight, "compress_turns")
    assert said(tight)[0] == "summary" and said(tight)[-4:] == ["8", "9", "10", "11"] and len(said(tight)) == 5
    assert "the newest 4 kept verbatim" in step["reason"]


def test_a_history_limit_keeps_the_newest_events_shown_oldest_first(root: Path) -> None:
    write(root, "PersistentMemory/recent-events.json", definition(
        "recent-events", [{"type": "log_search", "instance": "audit", "limit": 10}], section="history", max_items=3))
    runtime = Runtime(root)
    try:
        for n in range(8):
            runtime.memory.write("log://audit", {"event_type": "deploy", "payload": {"n": n}})
        result = assemble(runtime, explicit_memory=["recent-events"])
    finally:
        runtime.close()
    assert [h["content"] for h in result["context"]["history"]] == [f"deploy: n={n}" for n in (5, 6, 7)]


def test_a_thread_read_at_two_priorities_is_shown_in_the_order_said(root: Path) -> None:
    for memory_id, limit, priority in (("recent", 3, "high"), ("all", 50, "low")):
        write(root, f"PersistentMemory/{memory_id}.json", definition(
            memory_id, [{"type": "episodic_recent", "limit": limit}], section="history", priority=priority))
    runtime = Runtime(root)
    try:
        for n in range(8):
            runtime.memory.write("episodic://t-1", {"role": "user", "content": f"Turn {n} text."})
        result = assemble(runtime, explicit_memory=["recent", "all"])
    finally:
        runtime.close()
    assert [re.findall(r"Turn (\d+)", h["content"])[0] for h in result["context"]["history"]] == [
        str(n) for n in range(8)]


def test_what_a_cut_leaves_over_never_makes_a_hole_in_a_conversation(root: Path) -> None:
    """An older short turn took the room a cut left while a newer turn was dropped: Turn 2 and Turn 4
    shown without Turn 3."""
    write(root, "context-assembly.json", {"budget": {"ladder": ["compress_turns", "truncate"], "keep_recent_turns": 4}})
    runtime = Runtime(root)
    long = "Turn {} sentence says a thing about the layout of the service and many other long words here. "
    try:
        for n, repeat in enumerate((5, 5, 0, 12, 12, 1)):
            content = long.format(n) * repeat or f"Turn {n} ok"
            runtime.memory.write("episodic://t-1", {"role": "user", "content": content})
        result = assemble(runtime, explicit_memory=["episodic://t-1"], constraints={"max_tokens": 150})
    finally:
        runtime.close()
    shown = [int(re.findall(r"Turn (\d+)", h["content"])[0]) for h in result["context"]["history"]
             if not h["content"].startswith("Earlier turns")]
    assert shown == list(range(shown[0], 6)), shown  # the newest turns, none missing between them
    holes = [d for d in result["trace"]["decisions"] if "keeps no hole" in d["reason"]]
    assert holes and all(d["kind"] == "budget" for d in holes)
