"""Diagnostics of one document in LSP shape: syntax, then schema, then meaning (the workspace
linter's stages), each with a stable `code`, a `codeDescription` link, quick-fix `data`, related
places for duplicates, and a range on the offending key or value — never the whole file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..documents.pointers import resolve_pointer
from ..model.problems import Problem, Severity
from ..testing.run import CaseResult, LookupOf, plain_lookup
from ..workspace.lint import duplicates_across_files, file_problems, schema_problems
from ..workspace.loader import SourceFile, Workspace
from .documents import EditorDocument, Range
from .tests import case_problems, case_results

SOURCE = "context-assembly"
# The codes are documented in a file shipped with the package, so the link works offline.
DOCS_URL = Path(__file__).with_name("diagnostic-codes.md").resolve().as_uri()
SEVERITY = {Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3, Severity.HINT: 4}
REFERENCE_CODES = frozenset({"unknown-memory", "unknown-scheme"})


def code_description(code: str) -> dict[str, str]:
    return {"href": f"{DOCS_URL}#{code}"}


def _offsets(source: SourceFile, problem: Problem) -> tuple[int, int]:
    """Character offsets of a located problem, narrowed so a document-wide problem marks one line."""
    lines = source.document.lines
    if problem.line is None:
        source.locate(problem)
    start = lines.position_to_offset((problem.line or 1) - 1, (problem.column or 1) - 1, "utf-32")
    end = lines.position_to_offset((problem.end_line or problem.line or 1) - 1,
                                   (problem.end_column or problem.column or 1) - 1, "utf-32")
    if problem.path == "" and problem.code != "syntax":
        end = min(end, lines.line_end(lines.line_of(start)))  # the first line, not the whole file
    return start, max(start, end)


def source_range(source: SourceFile, problem: Problem, encoding: str) -> Range:
    start, end = _offsets(source, problem)
    lines = source.document.lines
    (line, character), (end_line, end_character) = lines.range_to_positions(start, end, encoding)
    return {"start": {"line": line, "character": character}, "end": {"line": end_line, "character": end_character}}


def _uri_of(source: SourceFile, document: EditorDocument) -> str:
    return document.uri if source is document.source else document.places.uri(source.relpath)


def _lone_reference(problem: Problem, document: EditorDocument) -> tuple[str, tuple[int, int]] | None:
    """A dialect's memory reference problem names the list it is in when the file's indices are not
    known (rules/checks.py): a list of one string is that reference (pointer, span)."""
    if problem.code not in REFERENCE_CODES or document.value is None:
        return None
    found = resolve_pointer(document.value, problem.path)
    if not (isinstance(found, list) and len(found) == 1 and isinstance(found[0], str)):
        return None
    span = document.parsed.span(f"{problem.path}/0")
    return None if span is None else (f"{problem.path}/0", span)


def to_diagnostic(problem: Problem, document: EditorDocument, workspace: Workspace,
                  encoding: str) -> dict[str, Any]:
    lone = _lone_reference(problem, document)
    out: dict[str, Any] = {
        "range": source_range(document.source, problem, encoding) if lone is None
        else document.range(*lone[1], encoding),
        "severity": SEVERITY[problem.severity],
        "code": problem.code,
        "codeDescription": code_description(problem.code),
        "source": SOURCE,
        "message": problem.message,
        "data": {**problem.data, "pointer": problem.path if lone is None else lone[0], "code": problem.code},
    }
    related = []
    for other in problem.related:
        source = workspace.files.get(other.file or "") if other.file and other.file != document.relpath \
            else document.source
        if source is None:
            continue
        related.append({"location": {"uri": _uri_of(source, document),
                                     "range": source_range(source, other, encoding)},
                        "message": other.message})
    if related:
        out["relatedInformation"] = related
    return out


CASE_CODES = frozenset({"needs-assembly", "duplicate-id"})  # problems of one test case, not of its file


def document_problems(document: EditorDocument, workspace: Workspace,
                      ran: Sequence[CaseResult] = (), lookup_of: LookupOf = plain_lookup) -> list[Problem]:
    """Every problem of the document, in stage order (syntax, schema, meaning), duplicates included;
    in a rule-test file also its failing cases (rules-only ones run here over `lookup_of`'s lookup,
    `ran`: the results of cases run by the "Run test" lens on this text)."""
    source = document.source
    for problem in source.problems:  # the loader's problems are reused: reset what locate fills
        problem.file = None
    if document.outside:  # another project's file: its syntax and schema, never this workspace's meaning
        return own_problems(source)
    problems = file_problems(source, workspace)
    if source.value is not None and not document.parsed.syntax_errors:
        problems += [p for p in duplicates_across_files(workspace) if p.file == document.relpath]
        # a case's own problem (needs-assembly, a repeated name) leaves the other cases to run
        if document.kind == "rule-test" and not any(p.is_error and p.code not in CASE_CODES for p in problems):
            results = {r.name: r for r in case_results(document, workspace, lookup_of)}
            results.update({r.name: r for r in ran if r.mode == "assemble"})
            problems += [source.locate(p) for p in case_problems(list(results.values()))]
    return problems


def own_problems(source: SourceFile) -> list[Problem]:
    """What a file says of itself, whatever workspace it is read in: syntax, then schema."""
    problems = list(source.problems)
    if source.value is not None and not source.document.syntax_errors:
        problems += schema_problems(source)
    return [source.locate(p) for p in problems]


def document_diagnostics(document: EditorDocument, workspace: Workspace, encoding: str = "utf-16",
                         ran: Sequence[CaseResult] = (), lookup_of: LookupOf = plain_lookup) -> list[dict[str, Any]]:
    """`workspace` should be the overlay that holds `document.source` (see `documents.overlay`);
    `lookup_of`: the runtime's lookup, which rule-test cases run over (`testing.run.LookupOf`)."""
    return [to_diagnostic(p, document, workspace, encoding)
            for p in document_problems(document, workspace, ran, lookup_of)]
