"""`context-assembly assemble`: the readable view, JSON, and errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.schemas import validation_errors


@pytest.fixture
def seeded(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["memory", "import", str(example_copy / "seed.json"), "--workspace", str(example_copy)]) == 0
    capsys.readouterr()
    return example_copy


def test_readable_view_of_the_example(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["assemble", "--workspace", str(seeded), "--request", str(seeded / "request.json")]
    assert main(args) == 0
    out = capsys.readouterr().out
    for section in ("state", "constraints", "knowledge", "history", "suggestions", "working_memory"):
        assert f"== {section} (" in out  # every section has content in the seeded example
    assert "Section          tokens  items  dropped" in out
    assert "Rules that fired:" in out and "planning/arch-in-planning" in out
    assert "Memories:" in out and "architecture-docs [ok]" in out


def test_json_output_validates(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["assemble", "--workspace", str(seeded), "--request", str(seeded / "request.json"), "--json",
            "--max-tokens", "300"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert validation_errors("assembled-context", result) == []
    assert result["meta"]["token_estimate"] <= 300 and result["meta"]["truncated"] is True


def test_text_only_request(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["assemble", "--workspace", str(seeded), "--text", "@kv://users/u-ada what do I prefer?"]) == 0
    out = capsys.readouterr().out
    assert "kv://users/u-ada [ok]" in out and "(from mention)" in out


def test_bad_request_and_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "r.json"
    bad.write_text('{"scope_variables": {"nope": {}}}')
    assert main(["assemble", "--workspace", str(tmp_path), "--request", str(bad)]) == 2
    assert "/scope_variables" in capsys.readouterr().err
    assert main(["assemble", "--workspace", str(tmp_path / "missing"), "--text", "x"]) == 2
    capsys.readouterr()
    bad.write_text('{"scope_variables": {}, "constraints": "big"}')  # with --max-tokens it was a traceback
    assert main(["assemble", "--workspace", str(tmp_path), "--request", str(bad), "--max-tokens", "100"]) == 2
    assert "/constraints: expected an object" in capsys.readouterr().err
    assert main(["assemble", "--workspace", str(tmp_path), "--text", "x", "--max-tokens=99999999999999999999"]) == 2
    assert "/constraints/max_tokens: must be at most 9007199254740991" in capsys.readouterr().err


def test_the_report_names_dropped_items_and_what_the_bars_measure(seeded: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    args = ["assemble", "--workspace", str(seeded), "--request", str(seeded / "request.json"), "--max-tokens", "300",
            "--no-color"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "of a 300-token budget" in out.splitlines()[0]
    assert "share of the 300-token budget" in out
    dropped = out.split("Dropped:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    over = re.compile(r": budget: \d+ tokens do not fit in the \d+ left of the budget of 300 ")
    budget = [line for line in dropped if over.search(line)]
    assert budget and all(re.match(r"  [a-z][\w-]*(://\S+)? \(\w+, \d+ tokens?\): ", line) for line in budget)
    assert not any(re.match(r"  [0-9a-f]{16}\b", line) for line in dropped)  # named by memory, not a hash
    first = dropped.index(budget[0])
    assert any(line.startswith("      “") for line in dropped[first + 1: first + 3])  # a preview of the item
    assert not re.search(r"\bNone\b|(?<!\d)1 (items|tokens|lines)\b", out)


def test_the_report_on_a_terminal_is_coloured(seeded: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    for command in (["assemble", "--request", str(seeded / "request.json")],
                    ["evaluate", "--request", str(seeded / "request.json")]):
        assert main([*command, "--workspace", str(seeded)]) == 0
        assert "\x1b[1m" in capsys.readouterr().out
        assert main([*command, "--workspace", str(seeded), "--no-color"]) == 0
        assert "\x1b[" not in capsys.readouterr().out


def test_the_workspace_is_found_from_inside_it(seeded: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(seeded / ".codebolt" / "memory")
    assert main(["assemble", "--text", "review the auth flow", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace"]["memory_calls"]
    assert main(["evaluate", str(seeded), "--request", str(seeded / "request.json")]) == 0
    assert capsys.readouterr().out.startswith("Matched memories (")
