"""`context-assembly test`: the shipped example's tests, failures explained, every output format,
and broken test files reported with path, line and column."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from context_assembly.cli.main import main

FAILING = {
    "request": {"scope_variables": {"task": {"task_type": "bugfix"}},
                "additional_variables": {"phase": "review"}, "input": {"text": "Fix the login timeout"}},
    "cases": [
        {"name": "expects planning rules in review",
         "expect": {"rules_fired": ["arch-in-planning"], "memories_included": ["architecture-docs"]}},
        {"name": "passes", "expect": {"rules_fired": ["planning/similar-past-tasks"]}},
    ],
}


def write(root: Path, name: str, content: object) -> Path:
    path = root / ".codebolt" / "tests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["test", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_example_ships_passing_tests(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(example_copy))
    assert code == 0, out
    assert "7 passed, 0 failed" in out
    assert "PASS .codebolt/tests/quickstart.yaml::the quickstart request fits its budget [assemble]" in out


def test_a_failure_shows_expected_actual_and_the_conditions(example_copy: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    write(example_copy, "review.json", FAILING)
    code, out, _ = run(capsys, "--workspace", str(example_copy), "-k", "review.json")
    assert code == 1
    assert "FAIL .codebolt/tests/review.json::expects planning rules in review [rules]" in out
    assert "PASS .codebolt/tests/review.json::passes" in out
    # at the expectation, with what was expected and what happened
    assert ".codebolt/tests/review.json:23:11:" in out
    assert "rule 'arch-in-planning' did not fire" in out
    assert 'expected: "arch-in-planning"' in out
    assert 'actual:   ["planning/similar-past-tasks", "planning/history-every-turn"' in out
    # and why, condition by condition
    assert "rule planning/arch-in-planning did not fire (adds architecture-docs, project-conventions)" in out
    assert '[ ] addVar.phase eq "planning"   (actual: "review")' in out
    assert "memory 'architecture-docs' was not included" in out
    assert "1 passed, 1 failed" in out


def test_json_junit_and_github_formats(example_copy: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(example_copy.parent)  # a repository holding the workspace in a folder
    write(example_copy, "review.json", FAILING)
    code, out, _ = run(capsys, str(example_copy), "-k", "review.json", "--format", "json")
    assert code == 1
    document = json.loads(out)
    assert document["summary"] == {"cases": 2, "passed": 1, "failed": 1, "error": 0, "skipped": 0,
                                   "file_errors": 0, "ok": False, "duration_ms": document["summary"]["duration_ms"]}
    failed = next(r for r in document["results"] if r["status"] == "failed")
    first = failed["failures"][0]
    assert first["expectation"] == "rules_fired" and first["pointer"] == "/cases/0/expect/rules_fired/0"
    assert first["explanations"][0]["rule"]["conditions"][0] == {
        "result": False, "field": "addVar.phase", "operator": "eq", "value": "planning", "actual": "review",
        "present": True}

    code, out, _ = run(capsys, str(example_copy), "-k", "review.json", "--format", "junit")
    assert code == 1
    suites = ElementTree.fromstring(out.split("\n", 1)[1])
    assert suites.get("tests") == "2" and suites.get("failures") == "1"
    failure = suites.find(".//testcase[@name='expects planning rules in review']/failure")
    assert failure is not None and "addVar.phase" in (failure.text or "")

    code, out, _ = run(capsys, str(example_copy), "-k", "review.json", "--format", "github")
    assert code == 1
    annotations = [line for line in out.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 2
    # files relative to the current directory (the repository's root in CI), as `check` gives them
    assert annotations[0].startswith("::error file=quickstart/.codebolt/tests/review.json,line=20,col=11,")
    assert "title=expects planning rules in review%3A failed::rule 'arch-in-planning' did not fire%0A" \
        in annotations[0]


def test_pattern_selects_cases(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(example_copy), "-k", "*reviewers*")
    assert code == 0 and "1 passed, 0 failed" in out
    code, out, err = run(capsys, str(example_copy), "-k", "nothing-matches-this")
    assert code == 0 and "0 passed" in out and "no test cases" in err


def test_broken_test_files_are_located(example_copy: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(example_copy)
    write(example_copy, "syntax.json", '{\n  "cases": [\n    {"name": "x",, "expect": {}}\n  ]\n}\n')
    write(example_copy, "schema.yaml", "cases:\n  - name: typo\n    expect:\n      rule_fired: [x]\n")
    write(example_copy, "bad.yaml", "cases:\n  - name: [unclosed\n")
    code, out, _ = run(capsys, str(example_copy))
    assert code == 1
    assert ".codebolt/tests/syntax.json:3:" in out and "[syntax]" in out
    assert ".codebolt/tests/schema.yaml:4:7: error:" in out and "rule_fired" in out and "[schema]" in out
    assert ".codebolt/tests/bad.yaml:" in out
    assert "7 passed, 0 failed" in out  # the good files still ran
    code, out, _ = run(capsys, str(example_copy), "--format", "github")
    assert "::error file=.codebolt/tests/schema.yaml,line=4,col=7,title=test file%3A schema::" in out


def test_case_errors_are_located_at_the_case(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(example_copy, "errors.json", {"cases": [
        {"name": "missing file", "request_file": "nope.json", "expect": {"rules_fired": ["x"]}},
        {"name": "escaping file", "request_file": "../outside.json", "expect": {"rules_fired": ["x"]}},
        {"name": "bad request", "request": {"scope_variables": {"nope": {}}}, "expect": {"rules_fired": ["x"]}},
        {"name": "no request", "expect": {"rules_fired": ["x"]}},
        {"name": "duplicate", "request": {"scope_variables": {}}, "expect": {"no_warnings": True}},
        {"name": "duplicate", "request": {"scope_variables": {}}, "expect": {"no_warnings": True}},
    ]})
    code, out, _ = run(capsys, str(example_copy), "-k", "errors.json")
    assert code == 1
    assert "ERROR .codebolt/tests/errors.json::missing file" in out and "no such request file: nope.json" in out
    assert "outside.json" in out and "refused" in out
    assert "/scope_variables" in out
    assert "the case has no request" in out
    assert "duplicate test case name 'duplicate'" in out
    assert "1 passed, 0 failed, 4 error(s)" in out


def test_assembly_expectations(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = json.loads((example_copy / "request.json").read_text())
    write(example_copy, "assembly.json", {"request": request, "cases": [
        {"name": "tight budget", "request": {"constraints": {"max_tokens": 150}},
         "expect": {"max_token_estimate": 150, "sections_absent": ["history"]}},
        {"name": "unknown memory", "assemble": True, "request": {"explicit_memory": ["no-such-memory"]},
         "expect": {"warnings": ["no-such-memory"]}},
        {"name": "wrong expectations", "request": {"constraints": {"max_tokens": 150}},
         "expect": {"max_token_estimate": 10, "sections_present": ["history"],
                    "items_present": [{"text": "no such text anywhere"}],
                    "items_absent": [{"section": "state"}]}},
        {"name": "no warnings expected", "request": {"explicit_memory": ["no-such-memory"]},
         "expect": {"no_warnings": True}},
        {"name": "skipped", "skip": True, "expect": {"max_token_estimate": 1}},
    ]})
    code, out, _ = run(capsys, str(example_copy), "-k", "assembly.json", "--format", "json")
    assert code == 1
    results = {r["name"]: r for r in json.loads(out)["results"]}
    assert results["tight budget"]["status"] == "passed" and results["tight budget"]["mode"] == "assemble"
    assert results["unknown memory"]["status"] == "passed"
    assert results["skipped"]["status"] == "skipped"
    failures = {f["expectation"]: f for f in results["wrong expectations"]["failures"]}
    assert set(failures) == {"max_token_estimate", "sections_present", "items_present", "items_absent"}
    [no_warnings] = results["no warnings expected"]["failures"]
    assert no_warnings["expectation"] == "no_warnings" and "no-such-memory" in no_warnings["actual"][0]
    assert failures["max_token_estimate"]["expected"] == 10 and failures["max_token_estimate"]["actual"] <= 150


def test_snapshot_cases(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = example_copy / ".codebolt" / "context-assembly.json"
    settings.write_text(settings.read_text().replace('"snapshots": false', '"snapshots": true'))
    assert main(["assemble", "--workspace", str(example_copy), "--request", str(example_copy / "request.json"),
                 "--json"]) == 0
    assembly_id = json.loads(capsys.readouterr().out)["meta"]["assembly_id"]
    write(example_copy, "snap.json", {"cases": [
        {"name": "by id", "snapshot": assembly_id, "expect": {"rules_fired": ["arch-in-planning"]}},
        {"name": "by path", "snapshot": f".codebolt/memory/context/{assembly_id}.json",
         "request": {"additional_variables": {"phase": "review"}},
         "expect": {"rules_not_fired": ["arch-in-planning"]}},
        {"name": "missing", "snapshot": "no-such-assembly", "expect": {"rules_fired": ["x"]}},
    ]})
    code, out, _ = run(capsys, str(example_copy), "-k", "snap.json")
    assert "PASS .codebolt/tests/snap.json::by id" in out and "PASS .codebolt/tests/snap.json::by path" in out
    assert "ERROR .codebolt/tests/snap.json::missing" in out and code == 1
    # running the tests kept no snapshot of their own
    assert len(list((example_copy / ".codebolt" / "memory" / "context").iterdir())) == 1


def test_no_such_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(tmp_path / "missing"))
    assert code == 2 and "no such directory" in err


def test_found_from_a_subfolder_like_every_command(example_copy: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    write(example_copy, "review.json", FAILING)
    monkeypatch.chdir(example_copy / "src")
    code, out, _ = run(capsys, "-k", "review.json", "--no-color")
    assert code == 1 and "1 passed, 1 failed" in out
    # the location relative to where it ran, so a terminal links it
    assert "  ../.codebolt/tests/review.json:23:11:" in out
    outside = example_copy.parent / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    code, _, err = run(capsys)
    assert code == 2 and "no .codebolt/ folder in" in err


def test_control_characters_in_names_still_make_junit_xml(example_copy: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    write(example_copy, "bell.json", {"request": FAILING["request"],
                                      "cases": [{"name": "bell \u0007 here", "expect": {"rules_fired": ["nope"]}}]})
    code, out, _ = run(capsys, str(example_copy), "-k", "bell.json", "--format", "junit")
    assert code == 1
    suites = ElementTree.fromstring(out.split("\n", 1)[1])
    assert suites.find(".//testcase").get("name") == "bell \\u0007 here"


def test_a_case_that_cannot_check_its_expectations_is_an_error(example_copy: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    write(example_copy, "rules-only.json", {"request": FAILING["request"], "cases": [
        {"name": "impossible", "assemble": False,
         "expect": {"sections_present": ["suggestions"], "max_token_estimate": 1}},
        {"name": "fine", "assemble": False, "expect": {"rules_fired": ["planning/similar-past-tasks"]}},
        {"name": "fine", "expect": {"rules_fired": ["nothing"]}}]})
    code, out, _ = run(capsys, str(example_copy), "-k", "rules-only.json")
    assert code == 1
    assert "ERROR .codebolt/tests/rules-only.json::impossible" in out
    assert "`assemble: false`, but `sections_present`, `max_token_estimate` can only be checked by the full " \
           "assembly" in out
    assert "PASS .codebolt/tests/rules-only.json::fine [rules]" in out
    assert "duplicate test case name 'fine' (first at /cases/1) [duplicate-id]" in out
    # `check` says the same of the file, as it lints every definition file
    assert main(["check", str(example_copy), "--format", "json"]) == 1
    found = {(p["code"], p["path"]) for p in json.loads(capsys.readouterr().out)["problems"]}
    assert {("needs-assembly", "/cases/0/assemble"), ("duplicate-id", "/cases/2/name")} <= found


def test_a_case_meeting_an_unexpected_error_is_an_error_of_that_case_only(example_copy: Path) -> None:
    """Only the server's own errors were caught: anything else ended the whole run."""
    from context_assembly.runtime import Runtime
    from context_assembly.testing.run import run_tests

    write(example_copy, "broken.json", {"request": FAILING["request"], "cases": [
        {"name": "assembles", "assemble": True, "expect": {"no_warnings": True}},
        {"name": "rules only", "expect": {"rules_fired": ["planning/similar-past-tasks"]}}]})
    runtime = Runtime(example_copy)

    def failing(request: dict[str, object]) -> object:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    try:
        run = run_tests(runtime.workspace(), failing, pattern="broken")
    finally:
        runtime.close()
    statuses = {case.name: (case.status, case.error.message if case.error else None) for case in run.results}
    assert statuses["rules only"] == ("passed", None)
    status, message = statuses["assembles"]
    assert status == "error" and message is not None and "UnicodeEncodeError" in message


def test_a_name_the_workspace_does_not_have_fails_its_expectation(example_copy: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`rules_not_fired` and `memories_excluded` of a misspelt name passed: they checked nothing."""
    write(example_copy, "typos.json", {"request": FAILING["request"], "cases": [
        {"name": "typos", "expect": {"rules_not_fired": ["arch-in-planing"], "memories_excluded": ["architecture-doc"],
                                     "items_absent": [{"memory": "architecture-doc"}],
                                     "memories_included": ["kv://users/u-ada-not-checked"]}},
        {"name": "fine", "expect": {"rules_not_fired": ["planning/arch-in-planning"],
                                    "memories_excluded": ["architecture-docs"]}}]})
    code, out, _ = run(capsys, str(example_copy), "-k", "typos", "--format", "json")
    assert code == 1
    [typos, fine] = json.loads(out)["results"]
    assert fine["status"] == "passed"
    messages = [f["message"] for f in typos["failures"]]
    assert "no rule 'arch-in-planing' in the workspace (did you mean 'arch-in-planning'?)" in messages[0]
    assert [f["pointer"].split("/expect/")[1] for f in typos["failures"]] == [
        "rules_not_fired/0", "memories_excluded/0", "items_absent/0/memory", "memories_included/0"]
    assert "did you mean 'architecture-docs'?" in messages[1]


def test_an_assembly_case_sees_copies_and_warnings_left_out(example_copy: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A memory whose text is shown under another (a duplicate) counted as excluded, and warnings
    the warnings cap or the budget left out counted as none."""
    assert main(["memory", "import", str(example_copy / "seed.json"), "--workspace", str(example_copy)]) == 0
    request = {"scope_variables": {"project": {"project_id": "p-shop", "project_path": "/srv/shop"},
                                   "thread": {"thread_id": "t-42"}, "task": {"task_type": "bugfix"}},
               "additional_variables": {"phase": "planning"}, "input": {"text": "Fix the login timeout"}}
    write(example_copy, "seen.json", {"request": request, "cases": [
        {"name": "copy", "assemble": True, "expect": {"memories_excluded": ["markdown://style-guide"]}},
        {"name": "warned", "assemble": True,
         "request": {"explicit_memory": ["markdown://does-not-exist"], "constraints": {"max_tokens": 40}},
         "expect": {"no_warnings": True}}]})
    capsys.readouterr()
    code, out, _ = run(capsys, str(example_copy), "-k", "seen", "--format", "json")
    assert code == 1
    copy, warned = json.loads(out)["results"]
    assert copy["status"] == "failed"
    assert copy["failures"][0]["message"] == "memory 'markdown://style-guide' was included"
    assert warned["status"] == "failed" and "does-not-exist" in warned["failures"][0]["actual"][0]
