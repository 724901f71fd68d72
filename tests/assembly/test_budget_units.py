"""The budget's promises in the tokenizer's own units: summaries sized in the counter in use (not
one cached from another), markers that tell of the item, one cut per cap within
`min_truncated_tokens`, the whole `warnings` section within its cap, and the compressed turns'
heading within `summary_tokens`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from context_assembly.runtime import Runtime

from ..workspace.builder import write
from .test_ladder import assemble, definition, items, sentences

MARKER = re.compile(r"\[… truncated: (\d+) of (\d+) tokens left out\]$")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write(tmp_path, "context-rule-engines/main.json", {"id": "main", "rules": []})
    return tmp_path


def _notes(root: Path, **texts: str) -> None:
    (root / ".codebolt/memory").mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (root / f".codebolt/memory/{name}.md").write_text(text)


def test_a_summary_made_for_one_tokenizer_is_not_served_to_another(root: Path) -> None:
    """The summaries' cache key had no tokenizer: after an assembly counting `estimate`, one
    counting `cl100k` got summaries of up to 576 tokens for a summary_tokens of 120."""
    write(root, "PersistentMemory/docs.json", definition("docs", [{"type": "markdown_read", "notes": ["a", "b"]}]))
    _notes(root, a=sentences("alpha", 60) + " 😀🎉✨" * 80, b=sentences("beta", 60) + " 東京は晴れ。" * 60)
    write(root, "context-assembly.json", {"budget": {"summary_tokens": 60, "summarize_above_tokens": 80}})
    request: dict[str, Any] = {"explicit_memory": ["docs"], "constraints": {"max_tokens": 400}}
    runtime = Runtime(root)
    try:
        assemble(runtime, **request)
        write(root, "context-assembly.json", {"tokenizer": "cl100k",
                                              "budget": {"summary_tokens": 60, "summarize_above_tokens": 80}})
        warm = assemble(runtime, **request)
    finally:
        runtime.close()
    fresh_runtime = Runtime(root)
    try:
        fresh = assemble(fresh_runtime, **request)
    finally:
        fresh_runtime.close()
    shown = [(i["id"], i["tokens"], i["content"]) for i in items(warm)]
    assert shown == [(i["id"], i["tokens"], i["content"]) for i in items(fresh)]
    assert all(i["tokens"] <= 60 for i in items(warm) if i["metadata"].get("summarised"))


def test_a_models_long_answer_is_cut_with_a_marker_telling_of_the_item(root: Path) -> None:
    write(root, "PersistentMemory/docs.json", definition("docs", [{"type": "markdown_read", "notes": ["a"]}]))
    _notes(root, a=sentences("alpha", 40))
    write(root, "context-assembly.json", {"budget": {"summary_tokens": 50, "summarize_above_tokens": 60,
                                                     "ladder": ["summarize"]}})
    runtime = Runtime(root)
    try:
        full = assemble(runtime, explicit_memory=["docs"])
        [original] = [i for i in items(full) if i["memory_id"] == "docs"]
        result = unstructure_assemble(runtime, full["meta"]["token_estimate"] - 100,
                                      llm=lambda request: {"text": "The summary says a lot. " * 400})
    finally:
        runtime.close()
    [summary] = [i for i in items(result) if i["memory_id"] == "docs"]
    found = MARKER.search(summary["content"])
    assert summary["tokens"] <= 50 and found is not None
    assert int(found.group(2)) == original["tokens"]  # of the item, not of the model's 2,400 words


def unstructure_assemble(runtime: Runtime, max_tokens: int, **options: Any) -> dict[str, Any]:
    from context_assembly.model import unstructure

    return unstructure(runtime.assemble({"scope_variables": {"project": {"project_id": "p"}},
                                         "input": {"text": "explain the service layout"},
                                         "explicit_memory": ["docs"], "constraints": {"max_tokens": max_tokens}},
                                        **options))


def test_a_cap_keeps_to_min_truncated_tokens(root: Path) -> None:
    """A cap's cut kept as few as 8 tokens (a hard-coded minimum): budget.min_truncated_tokens holds."""
    write(root, "PersistentMemory/docs.json", definition("docs", [{"type": "markdown_read", "notes": ["a"]}],
                                                           max_tokens=25))
    _notes(root, a=sentences("alpha", 12))
    results = []
    for minimum in (8, 30):
        write(root, "context-assembly.json", {"budget": {"min_truncated_tokens": minimum}})
        runtime = Runtime(root)
        try:
            results.append(assemble(runtime, explicit_memory=["docs"]))
        finally:
            runtime.close()
    kinds = [[d["kind"] for d in r["trace"]["decisions"] if d.get("memory_id") == "docs"] for r in results]
    assert kinds == [["shortened"], ["max_tokens"]]  # cut to at most 25 tokens; 25 is under 30: dropped


def test_the_warnings_cap_holds_for_the_whole_section(root: Path) -> None:
    """Items a memory puts in `warnings` went past budget.warnings_max_tokens (3,148 tokens of 50)."""
    write(root, "PersistentMemory/alerts.json", definition("alerts", [{"type": "markdown_read", "notes": ["a"]}],
                                                             section="warnings"))
    _notes(root, a=sentences("alert", 60))
    write(root, "context-assembly.json", {"budget": {"warnings_max_tokens": 50}})
    runtime = Runtime(root)
    try:
        result = assemble(runtime, explicit_memory=["alerts", "no-such-memory"])
    finally:
        runtime.close()
    assert 0 < sum(i["tokens"] for i in result["context"]["warnings"]) <= 50
    capped = [d for d in result["trace"]["decisions"] if d.get("by") == "warnings_max_tokens"]
    assert any(d.get("memory_id") == "alerts" for d in capped)


def test_the_budget_note_keeps_to_the_warnings_cap_beside_a_memorys_warnings(root: Path) -> None:
    """The note that the budget cut things was checked against the server's warnings only: with a
    memory's 189-token warning under a cap of 200 the section came to 209."""
    write(root, "PersistentMemory/w.json", definition("w", [{"type": "markdown_read", "note": "warn"}],
                                                         section="warnings", priority="high"))
    _notes(root, warn="Careful. " + "Deploys are frozen this week and nothing merges to main. " * 13 + "End.",
           big=sentences("big", 10))
    write(root, "context-assembly.json", {"budget": {"warnings_max_tokens": 200}})
    runtime = Runtime(root)
    try:
        full = assemble(runtime, explicit_memory=["w", "markdown://big"])
        tight = assemble(runtime, explicit_memory=["w", "markdown://big"],
                         constraints={"max_tokens": full["meta"]["token_estimate"] - 50})
    finally:
        runtime.close()
    assert tight["meta"]["truncated"] is True
    assert [i["memory_id"] for i in tight["context"]["warnings"]] == ["w"]
    assert sum(i["tokens"] for i in tight["context"]["warnings"]) <= 200


def test_the_compressed_turns_heading_is_within_summary_tokens(root: Path) -> None:
    """The summary was sized to summary_tokens, then "Earlier turns (N, summarised): " put before it."""
    write(root, "context-assembly.json", {"budget": {"summary_tokens": 20}})
    runtime = Runtime(root)
    try:
        for i in range(12):
            runtime.memory.write("episodic://t-1", {"role": "user" if i % 2 else "assistant",
                                                    "content": f"Turn {i} said so. " * 6})
        full = assemble(runtime, explicit_memory=["episodic://t-1"])
        result = assemble(runtime, explicit_memory=["episodic://t-1"],
                          constraints={"max_tokens": full["meta"]["token_estimate"] - 60})
    finally:
        runtime.close()
    [summary] = [h for h in result["context"]["history"] if h["metadata"].get("compressed_turns")]
    assert summary["content"].startswith("Earlier turns (8, summarised): ")
    assert summary["tokens"] <= 20  # budget.summary_tokens, the heading included
