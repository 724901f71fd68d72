"""Linting a whole workspace: syntax, then schema, then meaning, for every definition file.

Meaning problems win over schema problems at the same place (they say more: did-you-mean,
the operator's expected value), so a schema error under a path that already has a meaning
problem is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..documents.pointers import escape_token, resolve_pointer
from ..errors import InvalidParamsError
from ..model.problems import Problem, Severity
from ..rules.checks import LintContext, RuleSite, check_engine_document, check_rule
from ..rules.dialects.common import NormalisedRule
from ..schemas import validation_errors
from ..schemas.fragments import FILE_ID_PATTERN, FILE_ID_RULE, VIEW_ID_PATTERN
from ..schemas.validate import unknown_property, validation_errors_by_item
from .loader import ANY_SUFFIXES, KINDS, SourceFile, Workspace

# file kind -> published schema name (seed-003 YAML rule files have no schema of their own)
SCHEMA_OF = {
    "rule-engine": "rule-engine",
    "persistent-memory": "persistent-memory",
    "ingestion-pipeline": "ingestion-pipeline",
    "graph-view": "graph-view",
    "rule-test": "rule-test",
    "settings": "settings",
}


def lint_context(workspace: Workspace, dialect: str = "canonical") -> LintContext:
    return LintContext(memory_ids=set(workspace.memories), declared_variables=declared_variables(workspace),
                       dialect=dialect)


def _context_key(ctx: LintContext) -> tuple[frozenset[str], frozenset[str], str]:
    """What a rule's meaning problems depend on besides the rule."""
    return frozenset(ctx.memory_ids), frozenset(ctx.declared_variables), ctx.dialect


def declared_variables(workspace: Workspace) -> set[str]:
    declared = set()
    for memory in workspace.memories.values():
        for var in memory.declared_variables:
            if var.name is not None:
                declared.add("addVar." + var.name)
    return declared


def _schema_name(source: SourceFile) -> str | None:
    if source.kind == "context-rules":
        return "context-rules" if source.dialect == "seed-004" else None
    return SCHEMA_OF.get(source.kind)


def _dialect_sites(source: SourceFile) -> list[RuleSite]:
    sites = []
    for rule in source.rules:
        sites.append(_dialect_site(source, rule))
    return sites


def _dialect_site(source: SourceFile, rule: NormalisedRule) -> RuleSite:
    if source.dialect == "seed-004":
        original = resolve_pointer(source.value, rule.pointer)
        condition = original.get("condition", []) if isinstance(original, dict) else []
        as_written = {**rule.rule, "when": condition if isinstance(condition, list) else [condition]}
        return RuleSite(as_written, rule.pointer, rule.condition_pointer, f"{rule.pointer}/action", False)
    return RuleSite(rule.rule, rule.pointer, lambda _i: rule.conditions_pointer, f"{rule.pointer}/then", False)


def meaning_problems(source: SourceFile, workspace: Workspace) -> list[Problem]:
    if source.value is None:
        return []
    if source.kind == "rule-engine":
        ctx = lint_context(workspace)
        return check_engine_document(source.value, ctx, source.memo.meaning.keyed(_context_key(ctx)))
    if source.kind == "context-rules":
        ctx = lint_context(workspace, source.dialect or "seed-004")
        sites = _dialect_sites(source)
        return [p for site in sites for p in check_rule(site, ctx)]
    if source.kind == "persistent-memory" and isinstance(source.value, dict):
        from ..pipelines.validate import limit_problems

        return [*_memory_hints(source), *limit_problems(source.value, workspace.settings.limits)]
    if source.kind == "rule-test" and not schema_errors(source):
        from ..testing.cases import cases_problems  # (the test runner reads the cases the same way)

        return cases_problems(source.value)
    if source.kind == "graph-view" and isinstance(source.value, dict):
        return _view_problems(source, workspace)
    return []


def _view_problems(source: SourceFile, workspace: Workspace) -> list[Problem]:
    """What every read of the view refuses, as the graph stores check it when they load it."""
    from ..stores.kuzu.views import parse_view  # late: the graph layer loads only for a view file

    problems = []
    try:
        parse_view(source.path.stem, source.value)
    except InvalidParamsError as exc:
        problems += [Problem(f"every read of this view fails: {e['message']}", "invalid-view", path=e["path"])
                     for e in exc.errors]
    if workspace.settings.stores.backend == "postgres" and "cypher" in source.value:
        problems.append(Problem("this view is Cypher, which runs on the embedded graph only: with stores.backend "
                                "\"postgres\" reading it fails (write it in the portable form: match, expand)",
                                "cypher-view-on-postgres", Severity.WARNING, path="/cypher"))
    return problems


_CRUD = "the {} methods (list, get, update, delete)"
# kind -> (the pattern its file names must match, that rule in words, what finds its files by name)
_ADDRESSED = {
    "rule-engine": (FILE_ID_PATTERN, FILE_ID_RULE, _CRUD.format("contextRuleEngine/")),
    "persistent-memory": (FILE_ID_PATTERN, FILE_ID_RULE, _CRUD.format("persistentMemory/")),
    "ingestion-pipeline": (FILE_ID_PATTERN, FILE_ID_RULE, _CRUD.format("memoryIngestion/")),
    "graph-view": (VIEW_ID_PATTERN, "1-128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
                   "graph_view_read, graph_view_expand and graph:// reads"),
}


def id_problems(source: SourceFile) -> list[Problem]:
    """A file whose name is no id of its kind: it may load (a rule engine even fires), but what
    finds definitions by file name never sees it, and `check` was silent."""
    if source.kind not in _ADDRESSED:
        return []
    pattern, rule, readers = _ADDRESSED[source.kind]
    stem = source.path.stem
    if re.fullmatch(pattern, stem):
        return []
    return [Problem(f"the file name '{stem}' is not a valid id ({rule}): {readers} cannot find this file; "
                    "rename it", "invalid-id", path="")]


def _memory_hints(source: SourceFile) -> list[Problem]:
    from ..pipelines.shorthand import is_shorthand

    if is_shorthand(source.value):
        return [Problem("this definition uses the user shorthand (name, enabled, pipeline, step); "
                        "it is read as the canonical label, status, retrieval.pipeline and type",
                        "shorthand", Severity.HINT, path="")]
    return []


def schema_errors(source: SourceFile) -> list[dict[str, str]]:
    """The file's schema errors (none when it has no schema); rule by rule for rule engines."""
    name = _schema_name(source)
    if name is None:
        return []
    if name == "rule-engine":
        return validation_errors_by_item(name, source.value, "rules", source.memo.schema.reuse)
    return validation_errors(name, source.value)


def schema_problems(source: SourceFile) -> list[Problem]:
    """`schema_errors` as problems; an unknown property is marked on its key (the error's path
    stays the object's, as the methods answer it)."""
    problems = []
    for error in schema_errors(source):
        problem = Problem(error["message"], "schema", path=error["path"])
        name = unknown_property(error["message"])
        span = source.document.span(f"{error['path']}/{escape_token(name)}", "key") if name is not None else None
        if span is not None:
            lines = source.document.lines
            problem.line, problem.column = lines.line_col(span[0])
            problem.end_line, problem.end_column = lines.line_col(span[1])
        problems.append(problem)
    return problems


def _covered(path: str, meaning_paths: set[str]) -> bool:
    """Whether a meaning problem already tells of the schema error at `path`. One of the whole
    document (path "") covers only the schema's at "": a graph view's undeclared `$name` must not
    hide an unknown key under its `params`."""
    return any(path == p or (p and path.startswith(p + "/")) for p in meaning_paths)


def file_problems(source: SourceFile, workspace: Workspace) -> list[Problem]:
    """Every problem of one file, located; schema and meaning only when the syntax is sound."""
    problems = list(source.problems)
    if source.value is not None and not source.document.syntax_errors:
        meaning = meaning_problems(source, workspace)
        paths = {p.path for p in meaning if p.severity in (Severity.ERROR, Severity.WARNING)}
        problems += [p for p in schema_problems(source) if not _covered(p.path, paths)]
        problems += meaning
        problems += id_problems(source)
    for problem in problems:
        source.locate(problem)
        for related in problem.related:
            source.locate(related)
    if any(p.code == "encoding" for p in problems):  # one cause: not also what the U+FFFD it left says
        problems = [p for p in problems if p.code == "encoding" or "\ufffd" not in p.message]
    return _once(problems)


def duplicates_across_files(workspace: Workspace) -> list[Problem]:
    """Two engine files (or two memory files) claiming one id; a context-rule id seen twice."""
    problems: list[Problem] = []
    for kind in ("rule-engine", "persistent-memory"):
        first: dict[str, SourceFile] = {}
        for source in workspace.files_of(kind):
            value = source.value
            the_id = value.get("id") if isinstance(value, dict) else None
            if not isinstance(the_id, str):
                continue
            if the_id in first:
                problem = source.locate(Problem(f"duplicate {kind} id '{the_id}'", "duplicate-id", path="/id"))
                problem.related.append(first[the_id].locate(Problem("first defined here", "duplicate-id",
                                                                     Severity.INFO, path="/id")))
                problems.append(problem)
            else:
                first[the_id] = source
            if the_id != source.path.stem and "\ufffd" not in the_id:  # (an encoding error is told once)
                problems.append(source.locate(Problem(
                    f"the id '{the_id}' differs from the file name '{source.path.name}'",
                    "id-mismatch", Severity.WARNING, path="/id")))
    problems += _context_rule_duplicates(workspace)
    return problems


def _context_rule_duplicates(workspace: Workspace) -> list[Problem]:
    """Rule ids in the combined context-rules engine come from names: two rules may collide."""
    seen: dict[str, tuple[SourceFile, str]] = {}
    problems = []
    for source in workspace.files_of("context-rules"):
        for rule in source.rules:
            rule_id = rule.rule["id"]
            where = f"{rule.pointer}/name" if "name" in rule.rule else rule.pointer
            if rule_id not in seen:
                seen[rule_id] = (source, where)
                continue
            first, first_where = seen[rule_id]
            problem = source.locate(Problem(f"duplicate rule id '{rule_id}' in the context rules",
                                            "duplicate-id", Severity.WARNING, path=where))
            problem.related.append(first.locate(Problem("first defined here", "duplicate-id",
                                                        Severity.INFO, path=first_where)))
            problems.append(problem)
    return problems


def ignored_files(workspace: Workspace) -> list[Problem]:
    """Definition files the loader skips for their format: YAML in a folder that reads only JSON."""
    problems = []
    for attribute, suffixes in KINDS.values():
        directory: Path = getattr(workspace.layout, attribute)
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.is_file() and path.suffix in ANY_SUFFIXES and path.suffix not in suffixes:
                hint = " (seed-003 YAML rules go in ContextRuleEngine/)" if attribute == "rule_engines_dir" else ""
                problems.append(Problem(
                    f"this file is not read: {directory.name}/ holds JSON files only{hint}", "ignored-file",
                    Severity.WARNING, path="", file=path.relative_to(workspace.root).as_posix(), line=1, column=1))
    return problems


def _once(problems: list[Problem]) -> list[Problem]:
    """Each message once per place (two stages may word the same finding the same way)."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for p in problems:
        key = (p.file, p.line, p.column, p.code, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def lint_workspace(workspace: Workspace) -> list[Problem]:
    problems: list[Problem] = []
    for source in workspace.files.values():
        problems += file_problems(source, workspace)
    problems += duplicates_across_files(workspace)
    problems += [p for p in workspace.problems if p.file and p.file.endswith("context-assembly.json")]
    problems += ignored_files(workspace)
    return sorted(problems, key=lambda p: (p.file or "", p.line or 0, p.column or 0, p.code))
