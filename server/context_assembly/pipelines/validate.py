"""Validating a persistent-memory definition: the schema, then what a schema cannot say.

Meaning checks: unknown step types (with did-you-mean), `${variables}` no run could ever fill (an
unknown alias, an alias used before its step, a malformed request key, `${item…}` outside per-item
parameters), malformed conditions in filter / conditional / early_exit (the rule checks, with item
fields allowed), counts above the limit their store holds them to (a warning: the settings may
change), and the seed-002 shorthand as a hint. Paths point into the document as written.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from attrs import define

from ..documents.pointers import escape_token, resolve_pointer
from ..limits import Limits, current
from ..model.problems import Problem, Severity
from ..registry.steps import lookup_step, step_names
from ..registry.values import as_list, whole_number
from ..registry.variables import ADDVAR_PREFIX, SCOPE_PREFIX, canonical_field, field_problem
from ..rules.checks import WELL_KNOWN_ADDVARS, LintContext, check_condition
from ..schemas import validation_errors
from .items import ITEM_FIELDS, METADATA_PREFIX
from .shorthand import is_shorthand
from .templates import ITEM, PLACEHOLDER, QUERY, is_request_key

NESTED = ("then_steps", "else_steps")
CONDITIONS = {"filter": "where", "conditional": "condition", "early_exit": "when"}
PIPELINE_KEYS = ("items.count", QUERY)  # what control conditions read besides variables
RESERVED_ALIASES = frozenset({QUERY, ITEM, "items", "scope", "addVar", "input", "task", "agent", "project",
                              "session", "memory"})
_ALIAS_PATH = re.compile(r"^(?:count|\d+(?:\.[A-Za-z0-9_.\-]+)?)$")


@define
class _Walk:
    """What the walk over the steps knows and has found."""

    all_aliases: set[str]
    declared: set[str]  # addVar.<name> keys the definition declares
    scopes: set[str]  # inputs_scope
    lint: LintContext
    defined: list[str]
    problems: list[Problem]

    def add(self, message: str, code: str, path: str, severity: Severity = Severity.ERROR) -> None:
        self.problems.append(Problem(message, code, severity, path=path))


def validate_definition(doc: Any, context: LintContext | None = None, limits: Limits | None = None) -> dict[str, Any]:
    """`{valid, errors: [{path, message, code}], warnings: [{path, message, code, severity}]}`.

    `context` names what the rest of the workspace declares (memory ids, additional variables);
    `limits` the limits runs will have (default: those of the call being served).
    """
    schema = validation_errors("persistent-memory", doc)
    problems = [*meaning_problems(doc, context), *limit_problems(doc, limits)] if isinstance(doc, dict) else []
    loud = {p.path for p in problems if p.is_error}  # they say more than the schema at the same place
    errors = [{"path": e["path"], "message": e["message"], "code": "schema"}
              for e in schema if not _covered(e["path"], loud)]
    errors += [{"path": p.path, "message": p.message, "code": p.code} for p in problems if p.is_error]
    warnings = [{"path": p.path, "message": p.message, "code": p.code, "severity": str(p.severity)}
                for p in problems if not p.is_error]
    return {"valid": not errors, "errors": errors, "warnings": warnings}


def _covered(path: str, meaning_paths: set[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in meaning_paths)


def meaning_problems(doc: dict[str, Any], context: LintContext | None = None) -> list[Problem]:
    problems: list[Problem] = []
    if is_shorthand(doc):
        problems.append(Problem("this definition uses the user shorthand (name, enabled, pipeline, step); "
                                "it is read as the canonical label, status, retrieval.pipeline and type",
                                "shorthand", Severity.WARNING, path=""))
    base, steps = _pipeline(doc)
    if not isinstance(steps, list):
        return problems
    declared = {f"{ADDVAR_PREFIX}{v['name']}" for v in as_list(doc.get("additional_variables"))
                if isinstance(v, dict) and isinstance(v.get("name"), str)}
    lint = LintContext(memory_ids=set(context.memory_ids) if context else set(),
                       declared_variables=declared | (context.declared_variables if context else set()))
    scopes = {s for s in as_list(doc.get("inputs_scope")) if isinstance(s, str)}
    walk = _Walk(set(_aliases(steps)), declared, scopes, lint, [], problems)
    _check_steps(steps, base, walk, has_query=False)
    return problems


def limit_problems(doc: dict[str, Any], limits: Limits | None = None) -> list[Problem]:
    """Counts written above the limit their store enforces (`limits.log_limit` for an episodic
    `limit`, ...): the store refuses them, so every run of the step fails."""
    limits = limits or current()
    base, steps = _pipeline(doc)
    found = []
    for pointer, step in _steps(steps, base):
        spec = lookup_step(step.get("type", step.get("step")))
        for param in spec.params if spec is not None else ():
            value = whole_number(step.get(param.name))
            maximum = getattr(limits, param.limit) if param.limit else None
            if value is not None and maximum is not None and value > maximum:
                found.append(Problem(
                    f"{param.name} {value} is above limits.{param.limit} ({maximum}): the store refuses it, so "
                    "every run of this step fails (lower it, or raise the limit in the settings)", "limits",
                    Severity.WARNING, path=f"{pointer}/{escape_token(param.name)}"))
    return found


def _steps(steps: Any, base: str, depth: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every step object with its pointer, nested branches included."""
    for index, step in enumerate(steps if isinstance(steps, list) and depth <= 32 else []):
        if isinstance(step, dict):
            yield f"{base}/{index}", step
            for key in NESTED:
                yield from _steps(step.get(key), f"{base}/{index}/{key}", depth + 1)


def _pipeline(doc: dict[str, Any]) -> tuple[str, Any]:
    retrieval = doc.get("retrieval")
    if isinstance(retrieval, dict) and "pipeline" in retrieval:
        return "/retrieval/pipeline", retrieval["pipeline"]
    return "/pipeline", doc.get("pipeline")


def _aliases(steps: list[Any], depth: int = 0) -> Iterator[str]:
    for step in steps:
        if not isinstance(step, dict) or depth > 32:
            continue
        if isinstance(step.get("alias"), str):
            yield step["alias"]
        for key in NESTED:
            if isinstance(step.get(key), list):
                yield from _aliases(step[key], depth + 1)


def _check_steps(steps: list[Any], base: str, walk: _Walk, has_query: bool, depth: int = 0) -> bool:
    """Checks steps in run order; returns whether a query has been derived by the end."""
    for index, step in enumerate(steps):
        if isinstance(step, dict) and depth <= 32:
            has_query = _check_step(step, f"{base}/{index}", walk, has_query, depth)
    return has_query


def _check_step(step: dict[str, Any], pointer: str, walk: _Walk, has_query: bool, depth: int) -> bool:
    type_key = "type" if "type" in step else "step"
    kind = step.get(type_key)
    if not isinstance(kind, str):
        return has_query  # the schema says what is wrong
    spec = lookup_step(kind)
    if spec is None:
        hints = difflib.get_close_matches(kind, step_names(), n=3, cutoff=0.6)
        walk.add(f"unknown step type {kind!r}" + (f" (did you mean {', '.join(hints)}?)" if hints else ""),
                 "unknown-step", f"{pointer}/{type_key}")
        return has_query
    lazy = spec.lazy_params
    for name, value in step.items():
        if name in (type_key, "alias") or (name in lazy and name in NESTED):
            continue
        allow_item = name in lazy and name not in NESTED  # lazy, not nested steps: filled per item
        for path, text in _strings(value, f"{pointer}/{escape_token(name)}"):
            for variable in (m.group(1).strip() for m in PLACEHOLDER.finditer(text)):
                _check_variable(variable, path, walk, allow_item)
    if kind in CONDITIONS and CONDITIONS[kind] in step:
        _check_conditions(step, kind, pointer, walk)
    has_query = _check_query(step, kind, pointer, walk, has_query)
    if kind == "conditional":
        after = [_check_steps(step[key], f"{pointer}/{key}", walk, has_query, depth + 1)
                 for key in NESTED if isinstance(step.get(key), list)]
        has_query = has_query or any(after)
    _check_alias(step, pointer, walk)
    return has_query


def _check_query(step: dict[str, Any], kind: str, pointer: str, walk: _Walk, has_query: bool) -> bool:
    if kind == "derive_query":
        keys = step.get("from", ["input.text"])
        for i, key in enumerate(keys if isinstance(keys, list) else [keys]):
            if isinstance(key, str) and key != QUERY and (problem := field_problem(key)):
                path = f"{pointer}/from/{i}" if isinstance(keys, list) else f"{pointer}/from"
                walk.add(problem, "unknown-variable", path)
        return True
    if kind == "rewrite_query":
        return True
    if kind == "vector_search" and not has_query and "query" not in step:
        walk.add("vector_search has no query: add a derive_query step before it or a 'query' parameter",
                 "no-query", pointer, Severity.WARNING)
    return has_query


def _check_alias(step: dict[str, Any], pointer: str, walk: _Walk) -> None:
    alias = step.get("alias")
    if not isinstance(alias, str):
        return
    if alias in walk.defined:
        walk.add(f"the alias '{alias}' is already used by an earlier step; later templates read this one",
                 "duplicate-alias", f"{pointer}/alias", Severity.WARNING)
    if alias in RESERVED_ALIASES:
        walk.add(f"the alias '{alias}' is a reserved variable name: ${{{alias}…}} will not read this step",
                 "reserved-alias", f"{pointer}/alias", Severity.WARNING)
    walk.defined.append(alias)


def _check_variable(name: str, path: str, walk: _Walk, allow_item: bool) -> None:
    if not name:
        walk.add("an empty ${} template", "unknown-variable", path)
        return
    if name == QUERY:
        return
    if is_request_key(name):
        _check_request_key(name, path, walk)
        return
    head, _, rest = name.partition(".")
    if head == ITEM:
        if not allow_item:
            walk.add(f"${{{name}}} reads the current item: only graph_view_expand params and annotate "
                     "fields are filled per item", "unknown-variable", path)
        return
    if head in walk.defined:
        if rest and not _ALIAS_PATH.match(rest):
            walk.add(f"${{{name}}}: after an alias use .count, .<n> or .<n>.<field>", "unknown-variable", path)
        return
    if head in walk.all_aliases:
        walk.add(f"${{{name}}} reads the alias '{head}' before the step that defines it has run",
                 "alias-before-definition", path)
        return
    hints = difflib.get_close_matches(head, [*walk.defined, QUERY], n=3, cutoff=0.6)
    walk.add(f"unknown variable ${{{name}}}: not a request variable (scope.<scope>.<field>, addVar.<name>, "
             "input.text), query, or an earlier step's alias"
             + (f" (did you mean {', '.join(hints)}?)" if hints else ""), "unknown-variable", path)


def _check_request_key(name: str, path: str, walk: _Walk) -> None:
    problem = field_problem(name)
    if problem:
        walk.add(problem, "unknown-variable", path)
        return
    key = canonical_field(name)
    if key.startswith(ADDVAR_PREFIX) and key not in walk.declared \
            and key[len(ADDVAR_PREFIX):] not in WELL_KNOWN_ADDVARS:
        walk.add(f"'{key}' is not declared in additional_variables", "undeclared-variable", path,
                 Severity.WARNING)
    elif key.startswith(SCOPE_PREFIX):
        scope = key.split(".")[1]
        if scope not in walk.scopes:
            walk.add(f"'{key}' reads the {scope} scope, which inputs_scope does not require: a request "
                     "without it fails this pipeline", "scope-not-required", path, Severity.WARNING)


def _check_conditions(step: dict[str, Any], kind: str, pointer: str, walk: _Walk) -> None:
    name = CONDITIONS[kind]
    raw = step[name]
    listed = isinstance(raw, list)
    conditions = raw if listed else [raw]
    extra = set(PIPELINE_KEYS) if kind != "filter" else set()
    item_fields = kind != "conditional"  # conditional reads variables and items.count only
    for i, cond in enumerate(conditions):
        where = f"{pointer}/{name}/{i}" if listed else f"{pointer}/{name}"
        for problem in check_condition(cond, where, walk.lint):
            if not _tolerated(problem, step, pointer, item_fields, extra):
                walk.problems.append(problem)


def _tolerated(problem: Problem, step: dict[str, Any], pointer: str, item_fields: bool, extra: set[str]) -> bool:
    """Item fields are not variables, and a `${...}` value is only known at run time."""
    value = resolve_pointer(step, problem.path[len(pointer):])
    if problem.path.endswith("/field") and isinstance(value, str):
        return value in extra or (item_fields and _is_item_field(value))
    if problem.path.endswith("/value"):
        return isinstance(value, str) and "${" in value
    return False


def _is_item_field(name: str) -> bool:
    return name in ITEM_FIELDS or name == "metadata" or name.startswith(METADATA_PREFIX)


def _strings(value: Any, pointer: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if depth > 32:
        return
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{pointer}/{i}", depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{pointer}/{escape_token(str(k))}", depth + 1)


__all__ = ["limit_problems", "meaning_problems", "validate_definition"]
