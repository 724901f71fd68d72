"""The seven stages end to end on a real (temporary) workspace with the embedded stores."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.model import unstructure
from context_assembly.runtime import Runtime
from context_assembly.schemas import validation_errors

from ..workspace.builder import write

SCOPES = {"project": {"project_id": "p"}, "thread": {"thread_id": "t-1"}, "user": {"user_id": "u-1"}}


def definition(memory_id: str, steps: list[dict[str, Any]], section: str = "knowledge", priority: str = "medium",
               **extra: Any) -> dict[str, Any]:
    return {"id": memory_id, "label": memory_id, "status": "active", "retrieval": {"pipeline": steps},
            "contribution": {"section": section, "priority": priority, **extra.pop("contribution", {})}, **extra}


def engine(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "main", "rules": rules}


def always(memories: list[str], **then: Any) -> dict[str, Any]:
    return {"id": f"always-{'-'.join(memories) or 'actions'}", "when": [], "then": {"add_memories": memories, **then}}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    write(tmp_path, "PersistentMemory/prefs.json",
          definition("prefs", [{"type": "kv_get", "namespace": "users", "keys": ["${scope.user.user_id}"]}],
                     "constraints", "high"))
    write(tmp_path, "PersistentMemory/notes.json",
          definition("notes", [{"type": "markdown_read", "notes": ["a", "b", "c"]}],
                     contribution={"max_items": 2}))
    write(tmp_path, "PersistentMemory/turns.json",
          definition("turns", [{"type": "episodic_recent", "limit": 5}], "history", inputs_scope=["thread"]))
    write(tmp_path, "PersistentMemory/needs-task.json",
          definition("needs-task", [{"type": "kv_get", "keys": ["x"]}], inputs_scope=["task"]))
    write(tmp_path, "context-rule-engines/main.json", engine([always(["prefs", "notes", "turns"])]))
    for name, text in (("a", "Alpha note. It is first."), ("b", "Beta note."), ("c", "Gamma note.")):
        (tmp_path / ".codebolt/memory").mkdir(parents=True, exist_ok=True)
        (tmp_path / f".codebolt/memory/{name}.md").write_text(text)
    return tmp_path


@pytest.fixture
def runtime(workspace: Path) -> Iterator[Runtime]:
    rt = Runtime(workspace)
    rt.memory.write("kv://users/u-1", {"tone": "terse"})
    for turn in ({"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}):
        rt.memory.write("episodic://t-1", turn)
    yield rt
    rt.close()


def assemble(rt: Runtime, text: str = "do the thing", **extra: Any) -> dict[str, Any]:
    request = {"scope_variables": SCOPES, "input": {"text": text}, "thread_id": "t-1", **extra}
    result = unstructure(rt.assemble(request))
    assert validation_errors("assembled-context", result) == []
    return result


def sources(result: dict[str, Any], section: str) -> list[str]:
    return [item["source"] for item in result["context"][section]]


def calls(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["reference"]: c for c in result["trace"]["memory_calls"]}


def test_every_stage_runs_and_is_traced(runtime: Runtime) -> None:
    result = assemble(runtime)
    assert list(result["trace"]["stages"]) == ["validate", "resolve", "execute", "merge", "contribute", "budget"]
    assert list(result["context"]) == ["state", "warnings", "constraints", "knowledge", "history", "suggestions",
                                       "working_memory"]
    assert result["context"]["state"][0]["content"].startswith("Task: do the thing")
    assert json.loads(result["context"]["constraints"][0]["content"]) == {"tone": "terse"}
    assert sources(result, "history") == ["episodic://t-1", "episodic://t-1"]
    assert result["trace"]["rules_applied"][0]["rule_id"] == "always-prefs-notes-turns"
    assert calls(result)["prefs"]["origin"] == ["rule:main/always-prefs-notes-turns"]
    assert "scope.user.user_id" in result["trace"]["variables_used"]
    meta = result["meta"]
    assert meta["total_items"] == sum(len(v) for v in result["context"].values())
    assert meta["token_estimate"] == sum(s["tokens"] for s in result["trace"]["sections"].values())


def test_contribution_max_items_drops_and_records(runtime: Runtime) -> None:
    result = assemble(runtime)
    assert sources(result, "knowledge") == ["markdown://a", "markdown://b"]
    dropped = [d for d in result["trace"]["decisions"] if d["kind"] == "max_items"]
    assert [d["source"] for d in dropped] == ["markdown://c"]
    assert result["trace"]["sections"]["knowledge"]["dropped"] == 1


def test_explicit_memories_and_mentions(runtime: Runtime) -> None:
    runtime.memory.write("kv://flags", {"beta": True})
    result = assemble(runtime, "look at @kv://flags and @needs-task please", explicit_memory=["markdown://c"])
    origin = {ref: call["origin"] for ref, call in calls(result).items()}
    assert origin["kv://flags"] == ["mention"] and origin["markdown://c"] == ["explicit"]
    assert calls(result)["needs-task"]["status"] == "skipped"
    assert calls(result)["needs-task"]["missing_variables"] == ["scope.task"]
    assert any("needs-task" in w["content"] and "skipped" in w["content"] for w in result["context"]["warnings"])


def test_a_missing_reference_becomes_a_warning_and_the_rest_assembles(runtime: Runtime) -> None:
    result = assemble(runtime, explicit_memory=["no-such-memory", "kv://deleted/key", "bogus://x"])
    statuses = {ref: call["status"] for ref, call in calls(result).items()}
    assert statuses["no-such-memory"] == statuses["kv://deleted/key"] == statuses["bogus://x"] == "missing"
    warnings = " ".join(w["content"] for w in result["context"]["warnings"])
    assert "no-such-memory" in warnings and "kv://deleted/key" in warnings and "bogus://x" in warnings
    assert result["context"]["constraints"]  # prefs still assembled


def test_a_failing_pipeline_becomes_a_warning(workspace: Path) -> None:
    write(workspace, "PersistentMemory/evil.json",
          definition("evil", [{"type": "file_read", "path": "../../etc/passwd"}]))
    rt = Runtime(workspace)
    try:
        result = assemble(rt, explicit_memory=["evil"])
        assert calls(result)["evil"]["status"] == "failed"
        assert any("evil" in w["content"] for w in result["context"]["warnings"])
        assert result["context"]["knowledge"]  # notes still assembled
    finally:
        rt.close()


def test_a_slow_pipeline_times_out_while_the_rest_assembles(workspace: Path) -> None:
    write(workspace, "context-assembly.json", {"pipeline_timeout_ms": 200})
    rt = Runtime(workspace)
    original = rt.memory.episodic.recent
    release = threading.Event()

    def slow(thread_id: str, limit: int = 10) -> list[dict[str, Any]]:
        # Blocks until the assembly has returned: it can only return by giving up on this step.
        release.wait(timeout=30)
        return original(thread_id, limit)

    rt.memory.episodic.recent = slow  # type: ignore[method-assign]
    try:
        result = assemble(rt)
        assert not release.is_set()
        assert calls(result)["turns"]["status"] == "timeout"
        assert any("turns" in w["content"] and "timed out" in w["content"] for w in result["context"]["warnings"])
        assert result["context"]["knowledge"]
    finally:
        release.set()
        rt.close()


def test_results_are_cached_and_a_write_invalidates(runtime: Runtime) -> None:
    first = assemble(runtime)
    assert calls(first)["prefs"]["status"] == "ok"
    second = assemble(runtime)
    assert calls(second)["prefs"]["status"] == "cached"
    runtime.memory.write("kv://users/u-1", {"tone": "chatty"})
    third = assemble(runtime)
    assert calls(third)["prefs"]["status"] == "ok"
    assert json.loads(third["context"]["constraints"][0]["content"]) == {"tone": "chatty"}


def test_a_variable_the_cache_key_cannot_hold_runs_uncached(runtime: Runtime) -> None:
    huge = {"additional_variables": {"seed": 2**70}}  # past 64 bits: no JSON key for it
    for _ in range(2):
        result = assemble(runtime, **huge)
        assert calls(result)["prefs"]["status"] == "ok"
        assert json.loads(result["context"]["constraints"][0]["content"]) == {"tone": "terse"}
    assert calls(assemble(runtime))["prefs"]["status"] == "ok"  # then cached as usual
    assert calls(assemble(runtime))["prefs"]["status"] == "cached"


def test_a_write_from_another_store_instance_invalidates_too(runtime: Runtime, workspace: Path) -> None:
    assemble(runtime)
    other = Runtime(workspace)  # another process would do the same through the shared database
    try:
        other.memory.write("kv://users/u-1", {"tone": "formal"})
    finally:
        other.close()
    result = assemble(runtime)
    assert json.loads(result["context"]["constraints"][0]["content"]) == {"tone": "formal"}


def test_dedupe_across_memories_keeps_the_higher_priority_copy(runtime: Runtime, workspace: Path) -> None:
    result = assemble(runtime, explicit_memory=["markdown://a"])
    # markdown://a arrives twice (notes pipeline, medium; direct reference, medium): one copy stays
    assert sources(result, "knowledge").count("markdown://a") == 1
    assert any(d["kind"] == "duplicate" for d in result["trace"]["decisions"])


def test_budget_never_exceeded_and_truncation_is_told(runtime: Runtime, workspace: Path) -> None:
    (workspace / ".codebolt/memory/long.md").write_text("A long note. " * 60)
    full = assemble(runtime, explicit_memory=["markdown://long"])
    budget = full["meta"]["token_estimate"] - 5
    result = assemble(runtime, explicit_memory=["markdown://long"], constraints={"max_tokens": budget})
    assert result["meta"]["token_estimate"] <= budget and result["meta"]["truncated"] is True
    assert any(w["metadata"].get("kind") == "budget" for w in result["context"]["warnings"])
    assert any(d["kind"] == "budget" for d in result["trace"]["decisions"])
    tiny = assemble(runtime, constraints={"max_tokens": 3})
    assert tiny["meta"]["token_estimate"] <= 3


def test_rule_caps_priorities_and_exclusions(workspace: Path) -> None:
    write(workspace, "context-rule-engines/main.json", engine([
        {"id": "first", "priority": 10, "when": [], "then": {
            "exclude_memories": ["kv://**"], "caps": [{"target": "history", "max_items": 1}],
            "set_priority": {"history": "critical"}}},
        always(["prefs", "notes", "turns", "kv://users/u-1"]),
    ]))
    rt = Runtime(workspace)
    try:
        rt.memory.write("kv://users/u-1", {"tone": "terse"})
        rt.memory.write("episodic://t-1", {"role": "user", "content": "one"})
        rt.memory.write("episodic://t-1", {"role": "user", "content": "two"})
        result = assemble(rt)
        assert "kv://users/u-1" not in calls(result)  # the earlier rule excluded it
        assert calls(result)["prefs"]["items"] == 1 and result["context"]["constraints"] == []  # its item too
        excluded = [d for d in result["trace"]["decisions"] if d["kind"] == "excluded"]
        assert [(d["source"], d["by"]) for d in excluded] == [("kv://default/users/u-1", "main/first")]
        assert len(result["context"]["history"]) == 1
        assert result["trace"]["section_order"][:2] == ["state", "history"]
    finally:
        rt.close()


def test_a_mentioned_memory_is_kept_from_a_rule_that_excludes_it(workspace: Path) -> None:
    """A mention is explicit: its items come in, the trace says the exclusion lost to it and the
    rule that also added it stays among its origins (it used to read "excluded")."""
    write(workspace, "context-rule-engines/main.json", engine([
        {"id": "no-kv", "priority": 10, "when": [], "then": {"exclude_memories": ["kv://**"]}},
        always(["kv://users/u-1"])]))
    rt = Runtime(workspace)
    try:
        rt.memory.write("kv://users/u-1", {"tone": "terse"})
        result = assemble(rt, "see @kv://users/u-1")
        assert calls(result)["kv://users/u-1"]["origin"] == ["mention", "rule:main/always-kv://users/u-1"]
        assert calls(result)["kv://users/u-1"]["items"] == 1
        conflicts = [(d["reason"], d["source"], d["by"]) for d in result["trace"]["decisions"]
                     if d["kind"] == "conflict"]
        assert conflicts == [("kept_explicit", "kv://users/u-1", "mention")]
    finally:
        rt.close()


def test_a_copy_stands_in_when_a_cap_removes_the_kept_one(workspace: Path) -> None:
    """Merge keeps the best copy of a note; when a cap then removes that copy, the next copy comes
    in (the content was gone from every memory, and the trace said "already included")."""
    write(workspace, "PersistentMemory/alpha.json",
          definition("alpha", [{"type": "markdown_read", "notes": ["a"]}], "constraints", "high"))
    write(workspace, "context-rule-engines/main.json", engine([
        {"id": "one-constraint", "when": [], "then": {"caps": [{"target": "constraints", "max_items": 1}]}},
        always(["prefs", "alpha", "notes"])]))
    rt = Runtime(workspace)
    try:
        rt.memory.write("kv://users/u-1", {"tone": "terse"})
        result = assemble(rt)
        assert [i["memory_id"] for i in result["context"]["constraints"]] == ["prefs"]
        assert [i["content"] for i in result["context"]["knowledge"]][:1] == ["Alpha note. It is first."]
        about_a = [(d["kind"], d["memory_id"]) for d in result["trace"]["decisions"]
                   if d.get("source") == "markdown://a"]
        assert about_a == [("cap", "alpha")]  # no "duplicate" left: the notes copy is in
    finally:
        rt.close()


def test_a_copy_whose_kept_copy_the_budget_left_out_says_so(workspace: Path) -> None:
    write(workspace, "PersistentMemory/alpha.json",  # the best copy, in the section packed last
          definition("alpha", [{"type": "markdown_read", "notes": ["a"]}], "suggestions", "critical"))
    write(workspace, "context-rule-engines/main.json", engine([always(["alpha", "notes"])]))
    rt = Runtime(workspace)
    try:
        full = assemble(rt)
        tokens = full["meta"]["token_estimate"]
        result = assemble(rt, constraints={"max_tokens": tokens - 2})
        assert result["context"]["suggestions"] == []
        [duplicate] = [d for d in result["trace"]["decisions"] if d["kind"] == "duplicate"]
        assert duplicate["memory_id"] == "notes" and "then left out by the budget" in duplicate["reason"]
        [kept] = [d for d in full["trace"]["decisions"] if d["kind"] == "duplicate"]
        assert kept["reason"] == "the same content is already included"
    finally:
        rt.close()


def test_a_rule_may_include_one_reference_and_exclude_the_rest_of_a_store(workspace: Path) -> None:
    write(workspace, "context-rule-engines/main.json", engine([
        always(["kv://users/u-1"], exclude_memories=["kv://*"])]))
    rt = Runtime(workspace)
    try:
        rt.memory.write("kv://users/u-1", {"tone": "terse"})
        assert calls(assemble(rt))["kv://users/u-1"]["status"] == "ok"
    finally:
        rt.close()


def test_per_source_rules_cap_one_source(workspace: Path) -> None:
    write(workspace, "context-rule-engines/main.json", engine([
        always(["notes", "turns"]),
        {"id": "short-notes", "when": [{"field": "memory.source", "operator": "eq", "value": "notes"}],
         "then": {"caps": [{"target": "notes", "max_items": 1}]}},
    ]))
    rt = Runtime(workspace)
    try:
        result = assemble(rt)
        assert len(result["context"]["knowledge"]) == 1
        assert any("per-source cap" in (d.get("by") or "") for d in result["trace"]["decisions"])
    finally:
        rt.close()


def test_per_source_rules_are_traced_as_applied_with_what_they_changed(workspace: Path) -> None:
    """A per-source rule that held was missing from rules_applied, and the priority it gave an
    item was written without a word in the trace."""
    write(workspace, "context-rule-engines/main.json", engine([
        always(["notes", "turns"]),
        {"id": "promote-notes", "when": [{"field": "memory.source", "operator": "eq", "value": "notes"}],
         "then": {"set_priority": {"knowledge": "critical"}}},
    ]))
    rt = Runtime(workspace)
    try:
        result = assemble(rt)
        [applied] = [r for r in result["trace"]["rules_applied"] if r["rule_id"] == "promote-notes"]
        assert (applied["engine_id"], applied["per_source"], applied["source"]) == ("main", True, "notes")
        assert applied["conditions"][0]["actual"] == "notes"
        assert {i["priority"] for i in result["context"]["knowledge"]} == {"critical"}
        changed = [(d["kind"], d["memory_id"], d["by"], d["reason"]) for d in result["trace"]["decisions"]
                   if d["kind"] == "priority"]
        assert changed == [("priority", "notes", "main/promote-notes",
                            "priority medium -> critical by a per-source rule")] * 3  # the third: then max_items
        assert result["trace"]["sections"]["knowledge"]["dropped"] == 1  # max_items: a priority drops nothing
    finally:
        rt.close()


def test_conflicts_say_what_they_overrode_and_caps_name_their_rule(workspace: Path) -> None:
    write(workspace, "context-rule-engines/main.json", engine([
        {"id": "no-notes", "priority": 10, "when": [], "then": {"exclude_memories": ["notes"],
                                                               "caps": [{"target": "history", "max_items": 1}]}},
        always(["notes", "turns"]),
    ]))
    rt = Runtime(workspace)
    try:
        rt.memory.write("episodic://t-1", {"role": "user", "content": "one"})
        rt.memory.write("episodic://t-1", {"role": "user", "content": "two"})
        result = assemble(rt)
        [conflict] = [d for d in result["trace"]["decisions"] if d["kind"] == "conflict"]
        assert (conflict["by"], conflict["overridden"]) == ("main/no-notes", ["main/always-notes-turns"])
        capped = [d["by"] for d in result["trace"]["decisions"] if d["kind"] == "cap"]
        assert capped and set(capped) == {"cap of main/no-notes on history"}
    finally:
        rt.close()


def test_active_file_goes_to_state_and_a_missing_one_warns(runtime: Runtime, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src/app.py").write_text("print('hi')\n")
    result = assemble(runtime, additional_variables={"active_file": "src/app.py"})
    assert result["context"]["state"][1]["source"] == "file://src/app.py"
    missing = assemble(runtime, additional_variables={"active_file": "src/none.py"})
    assert any("src/none.py" in w["content"] for w in missing["context"]["warnings"])
    escape = assemble(runtime, additional_variables={"active_file": "../../etc/passwd"})
    assert len(escape["context"]["state"]) == 1
    assert any("cannot be read" in w["content"] for w in escape["context"]["warnings"])


def test_events_in_order_with_the_assembly_id(runtime: Runtime) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    result = runtime.assemble({"scope_variables": SCOPES, "input": {"text": "x"}},
                              observer=lambda name, payload: events.append((name, payload)))
    names = [name for name, _ in events]
    assert names[:2] == ["started", "rulesEvaluated"] and names[-1] == "complete"
    assert names.count("pipelineComplete") == 3
    assert {payload["assembly_id"] for _, payload in events} == {result.meta.assembly_id}


def test_invalid_request_is_an_error_with_every_path(runtime: Runtime) -> None:
    events: list[str] = []
    with pytest.raises(InvalidParamsError) as caught:
        runtime.assemble({"additional_variables": [], "constraints": {"max_tokens": -1}},
                         observer=lambda name, _payload: events.append(name))
    paths = {e["path"] for e in caught.value.errors}
    assert {"/scope_variables", "/additional_variables", "/constraints/max_tokens"} <= paths
    assert events == ["error"]


def test_snapshots_when_enabled(workspace: Path) -> None:
    write(workspace, "context-assembly.json", {"snapshots": True})
    rt = Runtime(workspace)
    try:
        result = rt.assemble({"scope_variables": SCOPES})
        snapshot = workspace / ".codebolt/memory/context" / f"{result.meta.assembly_id}.json"
        assert json.loads(snapshot.read_text())["result"]["meta"]["assembly_id"] == result.meta.assembly_id
        assert result.meta.snapshot == f".codebolt/memory/context/{result.meta.assembly_id}.json"
    finally:
        rt.close()


def test_a_second_assembly_of_one_id_never_replaces_its_snapshot(workspace: Path) -> None:
    """Any client choosing the id of an assembly replaced its snapshot, the one replays and rule
    tests read."""
    write(workspace, "context-assembly.json", {"snapshots": True})
    rt = Runtime(workspace)
    try:
        first = rt.assemble({"scope_variables": SCOPES, "input": {"text": "the first"}}, assembly_id="nightly-1")
        second = rt.assemble({"scope_variables": SCOPES, "input": {"text": "the second"}}, assembly_id="nightly-1")
    finally:
        rt.close()
    kept = json.loads((workspace / ".codebolt/memory/context/nightly-1.json").read_text())
    assert kept["request"]["input"]["text"] == "the first" and first.meta.snapshot is not None
    assert second.meta.snapshot is None
    assert any(d.kind == "snapshot" and "kept before" in d.reason for d in second.trace.decisions)
    assert not [p for p in (workspace / ".codebolt/memory/context").iterdir() if p.name.startswith(".")]


def test_traversal_through_templates_is_refused_with_real_stores(workspace: Path, tmp_path: Path) -> None:
    canary = tmp_path / "canary.md"
    canary.write_text("SECRET")
    write(workspace, "PersistentMemory/by-name.json", definition("by-name", [
        {"type": "markdown_read", "note": "${addVar.note}"}, {"type": "file_read", "path": "${addVar.path}"}]))
    rt = Runtime(workspace)
    try:
        for note, path in (("../../canary", "ok.txt"), ("a", "../canary.md"), ("%2e%2e/%2e%2e/canary", "x"),
                           ("a", str(canary))):
            result = assemble(rt, explicit_memory=["by-name"], additional_variables={"note": note, "path": path})
            assert calls(result)["by-name"]["status"] == "failed", (note, path)
            assert "SECRET" not in json.dumps(result)
    finally:
        rt.close()
    assert canary.read_text() == "SECRET"


def test_exact_tokenizer_from_settings(workspace: Path) -> None:
    write(workspace, "context-assembly.json", {"tokenizer": "cl100k", "max_tokens": 40})
    rt = Runtime(workspace)
    try:
        result = assemble(rt)
        from context_assembly.assembly.tokens import token_counter

        count = token_counter("cl100k")
        items = [i for section in result["context"].values() for i in section]
        assert all(i["tokens"] == count(i["content"]) for i in items)
        assert result["meta"]["tokenizer"] == "cl100k" and result["meta"]["token_estimate"] <= 40
    finally:
        rt.close()


def test_editing_a_named_note_by_hand_invalidates_the_cache(runtime: Runtime, workspace: Path) -> None:
    assert calls(assemble(runtime))["notes"]["status"] == "ok"
    assert calls(assemble(runtime))["notes"]["status"] == "cached"
    with open(workspace / ".codebolt/memory/b.md", "a") as note:  # in place, as an editor might
        note.write(" Edited by hand.")
    result = assemble(runtime)
    assert calls(result)["notes"]["status"] == "ok"
    assert any("Edited by hand" in i["content"] for i in result["context"]["knowledge"])


def test_an_include_decided_before_an_exclude_keeps_the_items(workspace: Path) -> None:
    """SPEC §4.3: the first matching rule decides, at every stage (the contribution stage too)."""
    write(workspace, "context-rule-engines/main.json", engine([
        {"id": "include", "priority": 10, "when": [], "then": {"add_memories": ["kv://users/u-1", "prefs"]}},
        {"id": "exclude", "priority": 1, "when": [], "then": {"exclude_memories": ["kv://**"]}},
    ]))
    rt = Runtime(workspace)
    try:
        rt.memory.write("kv://users/u-1", {"tone": "terse"})
        result = assemble(rt)
        assert calls(result)["kv://users/u-1"]["status"] == "ok"
        assert sources(result, "knowledge") == ["kv://users/u-1"], "the included reference's own item was dropped"
        excluded = [d for d in result["trace"]["decisions"] if d["kind"] == "excluded"]
        # the pattern still applies to what other pipelines return (prefs reads the same key)
        assert [(d["memory_id"], d["by"]) for d in excluded] == [("prefs", "main/exclude")]
        conflicts = [d for d in result["trace"]["decisions"] if d["kind"] == "conflict"]
        assert [(d["source"], d["reason"], d["by"]) for d in conflicts] == \
            [("kv://users/u-1", "included", "main/include")]
    finally:
        rt.close()


def test_per_source_rules_are_settled_as_the_request_rules_are(workspace: Path) -> None:
    """Two per-source rules cap one source: the first in evaluation order decides (SPEC §4.3, §4.4)."""
    source = [{"field": "memory.source", "operator": "eq", "value": "notes"}]
    write(workspace, "context-rule-engines/main.json", engine([
        always(["notes"]),
        {"id": "loose", "priority": 5, "when": source, "then": {"caps": [{"target": "notes", "max_items": 2}]}},
        {"id": "tight", "priority": 1, "when": source, "then": {"caps": [{"target": "notes", "max_items": 1}]}},
    ]))
    rt = Runtime(workspace)
    try:
        result = assemble(rt)
        assert len(result["context"]["knowledge"]) == 2  # the earlier rule's cap; before, both applied
    finally:
        rt.close()
