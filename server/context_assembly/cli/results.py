"""Printing rule-test results: text for people, JUnit XML for CI dashboards, GitHub Actions
workflow commands (annotations at the failing case). Text and GitHub locations are relative to the
current directory, as `check` prints them (a terminal or CI log links them); case ids and JUnit
names stay relative to the workspace root."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ..model.problems import Problem
from ..testing import CaseResult, Failure, TestRun
from .evaluate import _condition_lines
from .report import text_line
from .terminal import Painter, one_line, shown

_MARKS = {"passed": ("PASS", "ok"), "failed": ("FAIL", "error"), "error": ("ERROR", "error"),
          "skipped": ("SKIP", "dim")}
# characters XML 1.0 cannot hold, even escaped (control characters, lone surrogates, U+FFFE/U+FFFF)
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def failure_lines(failure: Failure, indent: str = "    ") -> list[str]:
    lines = [f"{indent}{one_line(failure.message)}",
             f"{indent}  expected: {_show(failure.expected)}",
             f"{indent}  actual:   {_show(failure.actual)}"]
    for explanation in failure.explanations:
        rule = explanation.rule
        state = "fired" if rule.matched else "did not fire"
        what = []
        if explanation.adds:
            what.append("adds " + one_line(", ".join(explanation.adds)))
        if explanation.excludes:
            what.append("excludes " + one_line(", ".join(explanation.excludes)))
        lines.append(f"{indent}  rule {one_line(explanation.engine_id)}/{one_line(rule.rule_id)} {state}"
                     + (f" ({'; '.join(what)})" if what else "")
                     + (f"  ERROR: {one_line(rule.error)}" if rule.error else ""))
        for condition in rule.conditions:
            lines += [indent + line for line in _condition_lines(condition, 1)]
    return lines


def _file(file: str, root: Path | None) -> str:
    """A workspace-relative path as printed: relative to the current directory when `root` is given."""
    return shown(root / file) if root is not None else file


def _where(result: CaseResult, failure: Failure | None = None, root: Path | None = None) -> str:
    file = _file(result.file, root)
    if failure is not None and failure.line:
        return f"{file}:{failure.line}:{failure.column or 1}"
    if result.error is not None and result.error.line:
        return f"{file}:{result.error.line}:{result.error.column or 1}"
    return file


def as_text(run: TestRun, root: Path | None = None, paint: Painter | None = None) -> str:
    """`root`: the workspace, for locations relative to the current directory (else to the root)."""
    paint = paint or Painter(False)
    lines = [text_line(p, root if root is not None else ".", paint) for p in run.problems]
    for result in run.results:
        mark, style = _MARKS[result.status]
        lines.append(f"{paint(mark, style)} {one_line(result.id)} [{result.mode}]")
        if result.error is not None:
            lines.append(f"    {paint(_where(result, root=root), 'path')}: {one_line(result.error.message)}")
        for failure in result.failures:
            lines.append(f"  {paint(_where(result, failure, root), 'path')}:")
            lines += failure_lines(failure)
    summary = run.summary()
    lines.append(f"{summary['passed']} passed, {summary['failed']} failed, {summary['error']} error(s), "
                 f"{summary['skipped']} skipped, {summary['file_errors']} broken file problem(s) "
                 f"in {summary['duration_ms'] / 1000:.2f} s")
    return "\n".join(lines)


def coverage_text(report: dict[str, Any], minimum: float | None) -> str:
    lines = ["", f"Coverage: {report['percent']}% ({report['covered']} of {report['outcomes']} rule and condition "
                 f"outcomes, {report['cases']} case(s), {report['rules']} rule(s))"]
    if minimum is not None:
        verdict = "below" if report["percent"] < minimum else "meets"
        lines.append(f"  {verdict} the minimum of {minimum}%")
    for key, title in (("rules_never_fired", "Rules never fired"), ("rules_never_failed", "Rules never failed"),
                       ("conditions_never_true", "Conditions never true"),
                       ("conditions_never_false", "Conditions never false"),
                       ("memories_never_activated", "Memories never activated")):
        lines.append(f"{title} ({len(report[key])})" + (":" if report[key] else ""))
        for entry in report[key]:
            lines.append(f"  {entry['rule']} {entry['path']}: {entry['condition']}" if isinstance(entry, dict)
                         else f"  {entry}")
    return "\n".join(lines)


# -- JUnit XML -----------------------------------------------------------------------------------


def _xml(text: str) -> str:
    """`text` as XML 1.0 can hold it: a character it cannot (a control character in a case name) as `\\uXXXX`."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def as_junit(run: TestRun) -> str:
    summary = run.summary()
    suites = ElementTree.Element("testsuites", name="context-assembly test", tests=str(summary["cases"]),
                                 failures=str(summary["failed"]), errors=str(summary["error"] + len(run.problems)),
                                 skipped=str(summary["skipped"]), time=f"{run.duration_ms / 1000:.3f}")
    by_file: dict[str, list[CaseResult]] = {}
    for result in run.results:
        by_file.setdefault(result.file, []).append(result)
    for problem in run.problems:
        by_file.setdefault(problem.file or "", [])
    for file, results in by_file.items():
        problems = [p for p in run.problems if (p.file or "") == file]
        suite = ElementTree.SubElement(suites, "testsuite", name=file, tests=str(len(results) + len(problems)),
                                       failures=str(sum(r.status == "failed" for r in results)),
                                       errors=str(sum(r.status == "error" for r in results) + len(problems)),
                                       skipped=str(sum(r.status == "skipped" for r in results)))
        for problem in problems:
            case = ElementTree.SubElement(suite, "testcase", classname=file, name=f"{file} (file)")
            ElementTree.SubElement(case, "error", message=problem.message, type=problem.code).text = text_line(problem)
        for result in results:
            _junit_case(suite, result)
    for element in suites.iter():
        element.attrib = {key: _xml(value) for key, value in element.attrib.items()}
        element.text = _xml(element.text) if element.text else element.text
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode")


def _junit_case(suite: ElementTree.Element, result: CaseResult) -> None:
    case = ElementTree.SubElement(suite, "testcase", classname=result.file, name=result.name,
                                  time=f"{result.duration_ms / 1000:.3f}")
    if result.status == "skipped":
        ElementTree.SubElement(case, "skipped")
    elif result.status == "error" and result.error is not None:
        ElementTree.SubElement(case, "error", message=result.error.message,
                               type=result.error.code).text = f"{_where(result)}: {result.error.message}"
    elif result.status == "failed":
        body = []
        for failure in result.failures:
            body.append(f"{_where(result, failure)}:")
            body += failure_lines(failure)
        ElementTree.SubElement(case, "failure", message="; ".join(f.message for f in result.failures),
                               type="expectation").text = "\n".join(body)


# -- GitHub Actions ------------------------------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation(level: str, file: str, line: int | None, column: int | None, title: str, message: str) -> str:
    props = [f"file={_escape_property(file)}"]
    if line:
        props += [f"line={line}", f"col={column or 1}"]
    props.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def _problem_annotation(problem: Problem, root: Path) -> str:
    level = "error" if problem.is_error else "warning"
    return _annotation(level, _file(problem.file or ".", root), problem.line, problem.column,
                       f"test file: {problem.code}", problem.message)


def as_github(run: TestRun, root: Path, minimum: float | None = None) -> str:
    """Workflow commands whose files are relative to the current directory (the repository's root in
    CI), then the text report between `::stop-commands::`: nothing a case name or a message holds
    can be taken for a command (`::notice ...::All tests passed` on a line of its own)."""
    lines = [_problem_annotation(p, root) for p in run.problems]
    for result in run.results:
        file = _file(result.file, root)
        if result.status == "error" and result.error is not None:
            lines.append(_annotation("error", file, result.error.line, result.error.column,
                                     f"{result.name}: cannot run", result.error.message))
        for failure in result.failures:
            lines.append(_annotation("error", file, failure.line, failure.column, f"{result.name}: failed",
                                     "\n".join(failure_lines(failure, ""))))
    token = secrets.token_hex(16)
    lines += [f"::stop-commands::{token}", as_text(run, root)]
    if run.coverage is not None:
        report = run.coverage.report()
        lines.append(f"::{token}::")  # the annotation below is a command again
        if minimum is not None and report["percent"] < minimum:
            lines.append(_annotation("error", _file(".codebolt/tests", root), None, None, "coverage",
                                     f"rule test coverage {report['percent']}% is below {minimum}%"))
        lines += [f"::stop-commands::{token}", coverage_text(report, minimum)]
    lines.append(f"::{token}::")
    return "\n".join(lines)
