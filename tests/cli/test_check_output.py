"""`check` for CI: finding the workspace, formats (github, SARIF bases), fail level, colour, and each
finding told once, in words a user can act on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from context_assembly.cli.main import main

from ..workspace.builder import memory, write

CLEAN_ENGINE = {"id": "e", "rules": [{"id": "r", "when": [], "then": {"add_memories": ["m"]}}]}


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    write(tmp_path, "PersistentMemory/m.json", memory("m"))
    write(tmp_path, "context-rule-engines/e.json", CLEAN_ENGINE)
    return tmp_path


@pytest.fixture
def warned(clean: Path) -> Path:
    write(clean, "context-rule-engines/w.json", {"id": "other", "rules": []})  # id-mismatch: a warning
    return clean


def test_a_folder_without_codebolt_is_a_usage_error_naming_it(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["check", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no .codebolt/ folder in" in err and "empty" in err


def test_from_a_folder_outside_any_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 2
    assert f"no .codebolt/ folder in {tmp_path.resolve()}" in capsys.readouterr().err


def test_the_root_is_found_walking_up_from_the_current_directory(warned: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(warned / ".codebolt" / "context-rule-engines")
    assert main(["check", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("w.json:2:")  # relative to where the user stands
    assert out.splitlines()[-1] == "0 errors, 1 warning, 0 notes"
    monkeypatch.chdir(warned / ".codebolt")
    assert main(["check", "--workspace", str(warned)]) == 0
    assert capsys.readouterr().out.startswith("context-rule-engines/w.json:2:")


def test_fail_level_warning(warned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(warned)]) == 0
    assert main(["check", str(warned), "--fail-level", "warning"]) == 1
    capsys.readouterr()


def test_github_workflow_commands(warned: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    write(warned, "context-rule-engines/bad.json", '{"id": "bad", "rules": [\n  {"id": "r", "when": 5}\n]}\n')
    monkeypatch.chdir(warned)
    assert main(["check", "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    error = next(line for line in lines if line.startswith("::error "))
    assert error.startswith("::error file=.codebolt/context-rule-engines/bad.json,line=2,col=")
    assert ",title=schema::" in error
    assert any(line.startswith("::warning file=.codebolt/context-rule-engines/w.json,line=2,") for line in lines)


def test_sarif_bases_help_and_columns(warned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(warned), "--format", "sarif"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["columnKind"] == "utf16CodeUnits"
    assert run["originalUriBaseIds"]["WORKSPACE"]["uri"] == warned.resolve().as_uri() + "/"
    driver = run["tool"]["driver"]
    assert driver["informationUri"].endswith("diagnostic-codes.md")
    assert driver["rules"][0]["helpUri"].endswith("diagnostic-codes.md#id-mismatch")
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": ".codebolt/context-rule-engines/w.json", "uriBaseId": "WORKSPACE"}


def test_colour_on_a_terminal_only(warned: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    main(["check", str(warned)])
    assert "\x1b[1;33mwarning\x1b[0m" in capsys.readouterr().out
    main(["check", str(warned), "--no-color"])
    assert "\x1b[" not in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    main(["check", str(warned)])
    assert "\x1b[" not in capsys.readouterr().out
    monkeypatch.undo()
    main(["check", str(warned)])  # not a terminal
    assert "\x1b[" not in capsys.readouterr().out


def _problems(root: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    main(["check", str(root), "--format", "json"])
    problems: list[dict] = json.loads(capsys.readouterr().out)["problems"]
    return problems


def test_each_finding_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "context-rule-engines/arr.json", "[1]\n")
    (tmp_path / ".codebolt/context-rule-engines/u.json").write_bytes(b'{"id": "bad\xff", "rules": []}')
    problems = _problems(tmp_path, capsys)
    assert [(p["file"].rsplit("/", 1)[1], p["code"]) for p in problems] == [("arr.json", "schema"),
                                                                          ("u.json", "encoding")]


def test_a_yaml_rule_engine_is_reported_not_ignored(clean: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(clean, "context-rule-engines/y.yaml", "id: y\nrules: []\n")
    [problem] = _problems(clean, capsys)
    assert problem["code"] == "ignored-file" and problem["severity"] == "warning"
    assert problem["file"] == ".codebolt/context-rule-engines/y.yaml"


def test_an_unknown_seed003_condition_is_one_dialect_error(clean: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(clean, "ContextRuleEngine/a.yaml", "- name: x\n  when:\n    file_matches: '*.py'\n  then: {}\n")
    problems = _problems(clean, capsys)
    assert [p["code"] for p in problems] == ["dialect"]


def test_did_you_mean_for_steps_sections_priorities_and_processors(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "PersistentMemory/m.json", memory("m", retrieval={"pipeline": [{"type": "vector_serch"}]},
                                                      contribution={"section": "knowledg", "priority": "hi"}))
    write(tmp_path, "MemoryIngestion/i.json", {"id": "i", "trigger": {"type": "memory/event"},
                                               "processors": [{"type": "chunkr"}], "routes": []})
    messages = " | ".join(p["message"] for p in _problems(tmp_path, capsys))
    for hint in ("did you mean 'vector_search'", "did you mean 'knowledge'", "did you mean 'high'",
                 "did you mean 'chunker'"):
        assert hint in messages, messages
