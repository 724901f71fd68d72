"""`context-assembly check`: every kind of problem, located, in three formats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from context_assembly.cli.main import main

from ..workspace.builder import memory, write

LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>\w+): (?P<msg>.*) \[(?P<code>[\w-]+)\]$")


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    write(tmp_path, "PersistentMemory/architecture-docs.json", memory("architecture-docs"))
    write(tmp_path, "context-rule-engines/main.json", {
        "id": "main",
        "rules": [
            {"id": "typo-op", "when": [{"field": "addVar.phase", "operator": "equal", "value": "x"}],
             "then": {"add_memories": ["architecture-docs"]}},
            {"id": "bad-number", "when": [{"field": "addVar.n", "operator": "gt", "value": "many"}],
             "then": {"add_memories": ["architecture-doc"]}},
            {"id": "unsafe", "when": [{"field": "input.text", "operator": "regex", "value": "(a)\\1"}],
             "then": {}},
            {"id": "typo-scope", "when": [{"field": "scope.agnt.agent_name", "operator": "exists"}], "then": {}},
            {"id": "never", "when": [{"field": "addVar.phase", "operator": "eq", "value": "a"},
                                     {"field": "addVar.phase", "operator": "eq", "value": "b"}], "then": {}},
            {"id": "typo-op", "when": [], "then": {}},
            {"id": "alias", "when": [{"field": "addVar.phase", "operator": "equals", "value": "a"}], "then": {}},
        ],
    })
    write(tmp_path, "context-rule-engines/broken.json", '{\n  "id": "broken"\n  "rules": []\n}\n')
    write(tmp_path, "ContextRuleEngine/01_rules.json",
          [{"name": "r1", "condition": {"field": "task.text", "op": "containz", "value": "x"},
            "action": {"include": "kv://prefs"}}])
    return tmp_path


def run_text(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, str]]]:
    status = main(["check", str(root), "--no-color"])
    out = capsys.readouterr().out.splitlines()
    parsed = [m.groupdict() for m in map(LINE.match, out[:-1])]
    assert all(parsed), out  # every line but the summary has the documented shape
    return status, parsed  # type: ignore[return-value]


def by_code(problems: list[dict[str, str]], code: str) -> list[dict[str, str]]:
    return [p for p in problems if p["code"] == code]


def test_check_reports_every_problem_with_place_and_code(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, problems = run_text(broken, capsys)
    assert status == 1
    for problem in problems:  # relative to the current directory, so a terminal links them
        assert (Path.cwd() / problem["file"]).resolve().is_relative_to(broken.resolve())
    problems = [{**p, "file": Path(p["file"]).resolve().relative_to(broken.resolve()).as_posix()} for p in problems]
    unknown_op = by_code(problems, "unknown-operator")
    assert {p["file"] for p in unknown_op} == {".codebolt/context-rule-engines/main.json",
                                               ".codebolt/ContextRuleEngine/01_rules.json"}
    assert any("did you mean 'eq'" in p["msg"] for p in unknown_op)
    assert any("'contains'" in p["msg"] for p in unknown_op)
    assert by_code(problems, "value-type")[0]["msg"].startswith("gt: expects a number")
    assert by_code(problems, "unsafe-regex")
    typo = by_code(problems, "unknown-variable")
    assert any("unknown scope 'agnt'" in p["msg"] and p["sev"] == "error" for p in typo)
    unknown_memory = by_code(problems, "unknown-memory")
    assert len(unknown_memory) == 1 and "did you mean 'architecture-docs'" in unknown_memory[0]["msg"]
    assert by_code(problems, "unsatisfiable")[0]["sev"] == "warning"
    assert by_code(problems, "duplicate-id")[0]["msg"] == "duplicate rule id 'typo-op'"
    assert by_code(problems, "operator-alias")[0]["sev"] == "hint"
    syntax = by_code(problems, "syntax")
    assert syntax and syntax[0]["file"].endswith("broken.json") and syntax[0]["line"] == "3"


def test_positions_point_at_the_offending_value(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, problems = run_text(broken, capsys)
    problems = [{**p, "file": Path(p["file"]).resolve().relative_to(broken.resolve()).as_posix()} for p in problems]
    text = (broken / ".codebolt/context-rule-engines/main.json").read_text().splitlines()
    problem = next(p for p in by_code(problems, "unknown-operator") if p["file"].endswith("main.json"))
    line = text[int(problem["line"]) - 1]
    assert line[int(problem["col"]) - 1:].startswith('"equal"')


def test_clean_workspace_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "PersistentMemory/m.json", memory("m"))
    write(tmp_path, "context-rule-engines/e.json",
          {"id": "e", "rules": [{"id": "r", "when": [], "then": {"add_memories": ["m"]}}]})
    assert main(["check", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "0 errors, 0 warnings, 0 notes"


def test_json_format(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(broken), "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["errors"] >= 6
    problem = next(p for p in document["problems"] if p["code"] == "unknown-operator" and "main" in p["file"])
    assert problem["path"] == "/rules/0/when/0/operator" and problem["data"]["candidates"] == ["eq", "neq"]
    dialect = next(p for p in document["problems"] if p["code"] == "unknown-operator" and "01_" in p["file"])
    assert dialect["path"] == "/0/condition/op" and dialect["data"]["candidates"][0] == "contains"


def test_sarif_format(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(broken), "--format", "sarif"]) == 1
    sarif = json.loads(capsys.readouterr().out)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    duplicate = next(r for r in run["results"] if r["ruleId"] == "duplicate-id")
    assert duplicate["relatedLocations"][0]["message"]["text"] == "first defined here"


def test_missing_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_the_shipped_example_is_clean(capsys: pytest.CaptureFixture[str]) -> None:
    from ..conftest import EXAMPLE

    status = main(["check", str(EXAMPLE)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[-1].startswith("0 errors, 0 warnings")


def test_every_reported_code_is_documented(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from context_assembly.editor.diagnostics import DOCS_URL, code_description

    documented = set(re.findall(r"^## (\S+)$", (Path(DOCS_URL.removeprefix("file://"))).read_text(), re.M))
    assert main(["check", str(broken), "--format", "json"]) == 1
    codes = {p["code"] for p in json.loads(capsys.readouterr().out)["problems"]}
    assert codes <= documented, codes - documented
    assert code_description("syntax")["href"].endswith("diagnostic-codes.md#syntax")


def test_a_rule_on_memory_source_warns_of_the_actions_it_never_applies(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Per-source rules apply only caps and set_priority (per reference, during the assembly): an
    exclude there was dropped without a word."""
    write(tmp_path, "ContextRuleEngine/r.json", [
        {"name": "drop-b", "condition": {"field": "memory.source", "op": "equals", "value": "kv://notes/b"},
         "action": {"exclude": "kv://notes/b"}},
        {"name": "cap-a", "condition": {"field": "memory.source", "op": "equals", "value": "kv://notes/a"},
         "action": {"cap": {"source": "kv://notes/a", "tokens": 50}}}])
    assert main(["check", str(tmp_path), "--format", "json"]) == 0
    found = [p for p in json.loads(capsys.readouterr().out)["problems"] if p["code"] == "per-source-action"]
    assert len(found) == 1 and "exclude_memories never apply" in found[0]["message"]
    assert found[0]["severity"] == "warning"



def test_conditions_nested_past_the_limit_are_reported_not_a_crash(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The per-source lint walked every level (two frames each): 450 nested `not`s raised RecursionError."""
    condition: dict = {"field": "memory.source", "operator": "eq", "value": "kv://a"}
    for _ in range(450):
        condition = {"not": condition}
    write(tmp_path, "context-rule-engines/e.json",
          {"id": "e", "rules": [{"id": "r", "when": [condition], "then": {"add_memories": ["kv://a"]}}]})
    code = main(["check", str(tmp_path), "--format", "json"])
    found = json.loads(capsys.readouterr().out)["problems"]
    assert code in (0, 1) and any("nested too deeply" in p["message"] for p in found)
