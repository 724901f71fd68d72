"""`context-assembly assemble`: the readable view, JSON, and errors."""

from __future__ import annotations

import json
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
