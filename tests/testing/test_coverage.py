"""`context-assembly test --coverage`: rules never fired or failed, conditions never true or
false, memories never activated; --min-coverage fails the run below a threshold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_assembly.cli.main import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["test", *args])
    return code, capsys.readouterr().out


def test_coverage_of_the_example(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memories = example_copy / ".codebolt" / "PersistentMemory"
    unused = json.loads((memories / "user-preferences.json").read_text())
    (memories / "unused-notes.json").write_text(json.dumps({**unused, "id": "unused-notes"}))
    code, out = _run(capsys, str(example_copy), "--coverage", "--format", "json")
    assert code == 0
    report = json.loads(out)["coverage"]
    assert report["cases"] == 7
    assert report["rules"] == 11  # planning 5, review 2, context-rules 4
    # no case makes more than 9 files change, and no question is asked
    assert "review/large-change" in report["rules_never_fired"]
    assert "context-rules/short-history-for-quick-questions" in report["rules_never_fired"]
    # the empty `when` of history-every-turn always fires
    assert "planning/history-every-turn" in report["rules_never_failed"]
    never_true = {(c["rule"], c["path"]): c["condition"] for c in report["conditions_never_true"]}
    assert never_true[("review/large-change", "when/0")] == "addVar.files_changed gte 10"
    assert never_true[("planning/refactor-or-redesign", "when/0/any/1")] == \
        "input.text regex '\\\\bre-?design\\\\b'"
    never_false = {(c["rule"], c["path"]) for c in report["conditions_never_false"]}
    assert ("review/large-change", "when/1") in never_false or ("review/large-change", "when/1") in never_true
    assert report["memories_never_activated"] == ["unused-notes"]
    assert 0 < report["percent"] < 100
    assert report["covered"] <= report["outcomes"]


def test_min_coverage_threshold(example_copy: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(example_copy)
    code, out = _run(capsys, str(example_copy), "--coverage")
    assert code == 0
    percent = float(out.split("Coverage: ")[1].split("%")[0])
    assert "Rules never fired (" in out and "Conditions never true (" in out and "Memories never activated (" in out
    code, out = _run(capsys, str(example_copy), "--min-coverage", str(percent + 0.1))
    assert code == 1 and f"below the minimum of {percent + 0.1}%" in out
    code, out = _run(capsys, str(example_copy), "--min-coverage", str(percent))
    assert code == 0 and "meets the minimum" in out
    code, out = _run(capsys, str(example_copy), "--min-coverage", "100", "--format", "github")
    assert code == 1 and "::error file=.codebolt/tests,title=coverage::rule test coverage" in out
    code, out = _run(capsys, str(example_copy), "--min-coverage", "100", "--format", "json")
    assert code == 1 and json.loads(out)["coverage"]["min_percent"] == 100


def test_a_case_that_covers_more_raises_coverage(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, str(example_copy), "--coverage", "--format", "json")
    before = json.loads(out)["coverage"]
    tests = example_copy / ".codebolt" / "tests" / "large.json"
    tests.write_text(json.dumps({"cases": [{
        "name": "a large change",
        "request": {"scope_variables": {"project": {"project_path": "/srv/shop"}},
                    "additional_variables": {"files_changed": 12}},
        "expect": {"rules_fired": ["review/large-change"]}}]}))
    code, out = _run(capsys, str(example_copy), "--coverage", "--format", "json")
    after = json.loads(out)["coverage"]
    assert code == 0
    assert "review/large-change" not in after["rules_never_fired"]
    assert after["percent"] > before["percent"]


def test_a_disabled_engine_counts_once_a_case_runs_it(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A disabled engine's rules run only for a request that names the engine: until a case does,
    they are no outcomes a test could cover (they lowered the percentage for good)."""
    code, out = _run(capsys, str(example_copy), "--coverage", "--format", "json")
    before = json.loads(out)["coverage"]
    engines = example_copy / ".codebolt" / "context-rule-engines"
    engine = json.loads((engines / "review.json").read_text())
    (engines / "off.json").write_text(json.dumps({**engine, "id": "off", "enabled": False}))
    code, out = _run(capsys, str(example_copy), "--coverage", "--format", "json")
    report = json.loads(out)["coverage"]
    assert code == 0 and report["rules"] == before["rules"] and report["percent"] == before["percent"]
    assert not any(r.startswith("off/") for r in report["rules_never_fired"])
    (example_copy / ".codebolt" / "tests" / "off.json").write_text(json.dumps({"cases": [{
        "name": "the disabled engine by name",
        "request": {"rule_engine_ids": ["off"], "scope_variables": {"project": {"project_path": "/srv/shop"}},
                    "additional_variables": {"files_changed": 12}},
        "expect": {"rules_fired": ["off/large-change"]}}]}))
    code, out = _run(capsys, str(example_copy), "--coverage", "--format", "json")
    report = json.loads(out)["coverage"]
    assert code == 0, out
    assert report["rules"] == before["rules"] + len(engine["rules"])
    assert "off/large-change" not in report["rules_never_fired"]
