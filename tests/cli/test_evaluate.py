"""`context-assembly evaluate`: readable and JSON output, and clear errors for bad requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_assembly.cli.main import main

from ..conftest import EXAMPLE

REQUEST = EXAMPLE / "request.json"


def test_readable_output_on_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--workspace", str(EXAMPLE), "--request", str(REQUEST)]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("Matched memories (")
    for memory in ("architecture-docs", "project-conventions", "recent-history", "markdown://style-guide",
                   "file://docs/security-decisions.md"):
        assert memory in first
    assert "[x] arch-in-planning (priority 10)" in out
    assert '[x] addVar.phase eq "planning"   (actual: "planning")' in out
    assert "engine context-rules" in out


def test_json_output_is_the_evaluation_result(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--workspace", str(EXAMPLE), "--request", str(REQUEST), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) >= {"matched_memories", "excluded_memories", "engine_results", "variables_used",
                           "missing_variables"}
    assert [e["engine_id"] for e in result["engine_results"]] == ["planning", "review", "context-rules"]
    assert "file://generated/**" in result["excluded_memories"]


def test_invalid_request_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"additional_variables": [], "constraints": {"max_tokens": 0}}))
    assert main(["evaluate", "--workspace", str(EXAMPLE), "--request", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "invalid assembly request" in err
    assert "scope_variables" in err and "/constraints/max_tokens" in err and "/additional_variables" in err


def test_unreadable_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["evaluate", "--workspace", str(EXAMPLE), "--request", str(bad)]) == 2
    assert "cannot read the request" in capsys.readouterr().err
    assert main(["evaluate", "--workspace", str(EXAMPLE), "--request", str(tmp_path / "missing.json")]) == 2
