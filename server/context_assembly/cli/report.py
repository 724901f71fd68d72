"""Printing problems: `path:line:col: severity: message [code]`, JSON, or SARIF 2.1.0."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..model.converter import unstructure
from ..model.problems import Problem, Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note",
                Severity.HINT: "note"}


def text_line(problem: Problem) -> str:
    where = f"{problem.file or '<workspace>'}:{problem.line or 1}:{problem.column or 1}"
    return f"{where}: {problem.severity.value}: {problem.message} [{problem.code}]"


def as_text(problems: list[Problem]) -> str:
    lines = [text_line(p) for p in problems]
    counts = {s: sum(1 for p in problems if p.severity is s) for s in Severity}
    lines.append(f"{counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} warning(s), "
                 f"{counts[Severity.INFO] + counts[Severity.HINT]} note(s)")
    return "\n".join(lines)


def as_json(problems: list[Problem]) -> Any:
    return {"problems": unstructure(problems),
            "errors": sum(1 for p in problems if p.is_error)}


def _location(problem: Problem) -> dict[str, Any]:
    region = {"startLine": problem.line or 1, "startColumn": problem.column or 1}
    if problem.end_line:
        region.update(endLine=problem.end_line, endColumn=problem.end_column or 1)
    return {"physicalLocation": {"artifactLocation": {"uri": problem.file or "."}, "region": region}}


def as_sarif(problems: list[Problem]) -> Any:
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
    driver = {"name": "context-assembly", "version": __version__,
              "rules": [{"id": code, "shortDescription": {"text": code.replace("-", " ")}} for code in codes]}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}
