"""Printing problems: `path:line:col: severity: message [code]`, JSON, SARIF 2.1.0 or GitHub
workflow commands. Text and GitHub paths are relative to the current directory (a terminal or CI
log links them); SARIF locations are relative to the workspace root (`uriBaseId` WORKSPACE)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import __version__
from ..model.converter import unstructure
from ..model.problems import Problem, Severity
from .terminal import Painter, counted, one_line, shown

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
BASE_ID = "WORKSPACE"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note",
                Severity.HINT: "note"}
_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice",
                 Severity.HINT: "notice"}
_STYLE = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note", Severity.HINT: "note"}


def _docs_url() -> str:
    from ..editor.diagnostics import DOCS_URL  # the diagnostic-codes doc shipped with the package

    return DOCS_URL


def _where(problem: Problem, root: Path) -> str:
    return shown(root / problem.file) if problem.file else shown(root)


def text_line(problem: Problem, root: Path | str = ".", paint: Painter | None = None) -> str:
    root = Path(root)
    paint = paint or Painter(False)
    where = f"{_where(problem, root)}:{problem.line or 1}:{problem.column or 1}"
    severity = paint(problem.severity.value, _STYLE[problem.severity])
    return f"{paint(where, 'path')}: {severity}: {one_line(problem.message)} {paint(f'[{problem.code}]', 'code')}"


def summary(problems: list[Problem]) -> str:
    counts = {s: sum(1 for p in problems if p.severity is s) for s in Severity}
    return ", ".join((counted(counts[Severity.ERROR], "error"), counted(counts[Severity.WARNING], "warning"),
                      counted(counts[Severity.INFO] + counts[Severity.HINT], "note")))


def as_text(problems: list[Problem], root: Path | str = ".", paint: Painter | None = None) -> str:
    root = Path(root)
    lines = [text_line(p, root, paint) for p in problems]
    lines.append(summary(problems))
    return "\n".join(lines)


def as_json(problems: list[Problem]) -> Any:
    return {"problems": unstructure(problems),
            "errors": sum(1 for p in problems if p.is_error)}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def as_github(problems: list[Problem], root: Path | str = ".") -> str:
    """GitHub Actions workflow commands: each problem annotates its file and line in a pull request."""
    root = Path(root)
    lines = []
    for problem in problems:
        props = {"file": _where(problem, root), "line": str(problem.line or 1), "col": str(problem.column or 1)}
        if problem.end_line:
            props.update(endLine=str(problem.end_line), endColumn=str(problem.end_column or 1))
        props["title"] = problem.code
        rendered = ",".join(f"{key}={_escape_property(value)}" for key, value in props.items())
        lines.append(f"::{_GITHUB_LEVEL[problem.severity]} {rendered}::{_escape_data(problem.message)}")
    return "\n".join(lines + [summary(problems)])


def _location(problem: Problem) -> dict[str, Any]:
    region = {"startLine": problem.line or 1, "startColumn": problem.column or 1}
    if problem.end_line:
        region.update(endLine=problem.end_line, endColumn=problem.end_column or 1)
    artifact = {"uri": problem.file or ".", "uriBaseId": BASE_ID}
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def as_sarif(problems: list[Problem], root: Path | str = ".") -> Any:
    docs = _docs_url()
    codes = sorted({p.code for p in problems})
    results = []
    for problem in problems:
        result: dict[str, Any] = {
            "ruleId": problem.code, "ruleIndex": codes.index(problem.code),
            "level": _SARIF_LEVEL[problem.severity], "message": {"text": problem.message},
            "locations": [_location(problem)],
        }
        if problem.path:
            result["properties"] = {"jsonPointer": problem.path}
        if problem.related:
            result["relatedLocations"] = [
                {"id": i, "message": {"text": r.message}, **_location(r)} for i, r in enumerate(problem.related)
            ]
        results.append(result)
    driver = {"name": "context-assembly", "version": __version__, "informationUri": docs,
              "rules": [{"id": code, "shortDescription": {"text": code.replace("-", " ")},
                         "helpUri": f"{docs}#{code}"} for code in codes]}
    base = Path(root).resolve().as_uri().rstrip("/") + "/"
    run = {"tool": {"driver": driver}, "columnKind": "utf16CodeUnits",
           "originalUriBaseIds": {BASE_ID: {"uri": base}}, "results": results}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
