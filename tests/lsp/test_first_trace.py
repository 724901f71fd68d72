"""The first traced `evaluateRules` of a server started again reads the trace programs the last
one kept in the compile cache: the same answers as a server without the cache, every trace
`explain` mode and both trace formats, and nothing rebuilt (no cache entry written again)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from context_assembly.rules.cache import ENV

from .test_first_evaluation import EXAMPLE, REQUEST, Recorded

BASE = {key: value for key, value in REQUEST.items() if key != "explain"}  # "all" unless an option says
TRACES = [{"explain": "matched"}, {"explain": "all"}, {"explain": "matched", "trace_format": "compact"},
          {"trace_format": "compact"}, {"explain": "none", "trace_format": "compact"}, {"explain": "none"}]


def _answers(workspace: Path, record: Path, order: list[dict[str, Any]]) -> list[Any]:
    """A new server's answers to the request with each of `order`'s options, in order."""
    server = Recorded(workspace, record)
    try:
        return [server.call(f"t{i}", "contextAssembly/evaluateRules", {**BASE, **options})["result"]
                for i, options in enumerate(order)]
    finally:
        server.close()


def _inodes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("first", range(len(TRACES) - 1))
def test_a_started_again_server_traces_from_the_kept_programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              first: int) -> None:
    workspace, cache = tmp_path / "ws", tmp_path / "cache"
    shutil.copytree(EXAMPLE, workspace / ".codebolt" / "context-rule-engines")
    order = [TRACES[first], *TRACES[:first], *TRACES[first + 1:]]  # each trace mode first once
    monkeypatch.setenv(ENV, "0")
    plain = _answers(workspace, tmp_path / "plain.txt", order)
    monkeypatch.setenv(ENV, str(cache))
    assert _answers(workspace, tmp_path / "cold.txt", order) == plain  # builds and keeps the programs
    kept = _inodes(cache)
    assert len(kept) > len(list((workspace / ".codebolt" / "context-rule-engines").glob("*.json")))
    assert _answers(workspace, tmp_path / "warm.txt", order) == plain  # restores them
    assert _inodes(cache) == kept  # nothing was built again: every entry only read
    full = [result for result, options in zip(plain, order, strict=True) if "trace_format" not in options]
    assert any(rule["conditions"] for result in full for engine in result["engine_results"]
               for rule in engine["rules"])  # the traces carry conditions
