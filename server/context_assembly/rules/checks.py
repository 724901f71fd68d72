"""Meaning checks on rules: what a schema cannot say (SPEC §9).

Unknown operators and variables (with did-you-mean), alias spellings, values of the wrong type for
their operator, patterns RE2 cannot run, unknown memory ids, duplicate rule ids and conditions that
can never all hold. Problems carry JSON pointers into the file as written (dialects included).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from attrs import define, field

from ..model.problems import Problem, Severity
from ..model.rules import UNREADABLE
from ..registry.operators import ConditionValueError, ValueKind, all_spellings, lookup_operator
from ..registry.values import MISSING, json_equal
from ..registry.variables import (
    ADDVAR_PREFIX,
    FIELD_ALIASES,
    MEMORY_SOURCE,
    SCOPE_PREFIX,
    canonical_field,
    documented_keys,
    field_problem,
    is_documented,
)
from .satisfiable import contradiction

STORE_SCHEMES = ("kv", "json", "markdown", "vector", "graph", "log", "episodic", "working", "blob", "file")
WELL_KNOWN_ADDVARS = ("phase", "query", "active_file", "turn_count")


@define
class LintContext:
    """What the rest of the workspace declares."""

    memory_ids: set[str] = field(factory=set)
    declared_variables: set[str] = field(factory=set)  # addVar.<name> keys declared by memories
    dialect: str = "canonical"  # "canonical" | "seed-004" | "seed-003"

    @property
    def operator_key(self) -> str:
        return "op" if self.dialect == "seed-004" else "operator"


@define
class RuleSite:
    """Where a rule's parts are in the file as written."""

    rule: dict[str, Any]
    pointer: str
    condition_pointer: Callable[[int], str]
    actions_pointer: str
    actions_exact: bool  # False when the dialect's actions do not mirror `then` key by key


def _problem(message: str, code: str, pointer: str, severity: Severity = Severity.ERROR,
             **data: Any) -> Problem:
    return Problem(message=message, code=code, severity=severity, path=pointer, data=data)


def _hints(word: str, choices: list[str]) -> list[str]:
    return difflib.get_close_matches(word, choices, n=3, cutoff=0.6)


def _mean(hints: list[str]) -> str:
    return f" (did you mean {', '.join(repr(h) for h in hints)}?)" if hints else ""


def _operator_hints(spelling: str, ctx: LintContext) -> list[str]:
    """Close spellings; canonical files get canonical names, dialect files keep their own spelling."""
    close = _hints(spelling, all_spellings())
    if ctx.dialect != "canonical":
        return close
    names = [op.name for op in (lookup_operator(c) for c in close) if op is not None]
    return list(dict.fromkeys(names))


def check_field(value: Any, pointer: str, ctx: LintContext) -> Iterator[Problem]:
    if not isinstance(value, str) or not value:
        yield _problem("'field' must be a non-empty string", "invalid-condition", pointer)
        return
    known = documented_keys() + sorted(ctx.declared_variables)
    problem = field_problem(value)
    if problem:
        hints = _hints(value, known)
        yield _problem(problem + _mean(hints), "unknown-variable", pointer, candidates=hints)
        return
    key = canonical_field(value)
    if value in FIELD_ALIASES and ctx.dialect == "canonical":
        yield _problem(f"'{value}' is the seed-004 spelling of '{key}'", "field-alias", pointer,
                       Severity.HINT, replacement=key)
    # an alias's target (project.name -> scope.project.project_name) is a documented name too
    if key.startswith(SCOPE_PREFIX) and not is_documented(key) and key not in FIELD_ALIASES.values():
        hints = _hints(key, documented_keys())
        if hints:
            yield _problem(f"unknown scope field '{key}'{_mean(hints)}", "unknown-variable", pointer,
                           Severity.WARNING, candidates=hints)
    elif key.startswith(ADDVAR_PREFIX) and key not in ctx.declared_variables \
            and key[len(ADDVAR_PREFIX):] not in WELL_KNOWN_ADDVARS:
        hints = _hints(key, sorted(ctx.declared_variables))
        yield _problem(f"no memory definition declares '{key}'{_mean(hints)}", "unknown-variable",
                       pointer, Severity.HINT if not hints else Severity.WARNING, candidates=hints)


def check_leaf(cond: dict[str, Any], pointer: str, ctx: LintContext) -> Iterator[Problem]:
    op_key = ctx.operator_key
    for required in ("field", op_key):
        if required not in cond:
            yield _problem(f"a condition needs '{required}'", "invalid-condition", pointer)
    if "field" in cond:
        yield from check_field(cond["field"], f"{pointer}/field", ctx)
    if op_key not in cond:
        return
    spelling = cond[op_key]
    operator = lookup_operator(spelling)
    if operator is None:
        hints = _operator_hints(spelling, ctx) if isinstance(spelling, str) else []
        yield _problem(f"unknown operator {spelling!r}{_mean(hints)}", "unknown-operator",
                       f"{pointer}/{op_key}", candidates=hints)
        return
    if spelling != operator.name and ctx.dialect == "canonical":
        yield _problem(f"'{spelling}' is an alias of '{operator.name}'", "operator-alias",
                       f"{pointer}/{op_key}", Severity.HINT, replacement=operator.name)
    value = cond.get("value", MISSING)
    if operator.value_kind is ValueKind.NONE:
        if value is not MISSING:
            yield _problem(f"'{operator.name}' ignores 'value'", "value-ignored", f"{pointer}/value",
                           Severity.HINT)
        return
    if value is MISSING:
        yield _problem(f"'{operator.name}' needs a value: {operator.value_kind.label}", "value-type",
                       pointer)
        return
    try:
        operator.predicate(value, cond.get("ignore_case") if isinstance(cond.get("ignore_case"), bool)
                           else None)
    except ConditionValueError as exc:
        code = "unsafe-regex" if operator.value_kind is ValueKind.PATTERN and isinstance(value, str) \
            else "value-type"
        yield _problem(f"{operator.name}: {exc}", code, f"{pointer}/value")


def check_condition(cond: Any, pointer: str, ctx: LintContext, depth: int = 0) -> Iterator[Problem]:
    if not isinstance(cond, dict):
        yield _problem("a condition must be an object", "invalid-condition", pointer)
        return
    if UNREADABLE in cond:  # a dialect's unreadable condition: the dialect reported it
        return
    if depth > MAX_DEPTH:
        yield _problem(f"conditions are nested too deeply (more than {MAX_DEPTH} levels)", "invalid-condition",
                       pointer)
        return
    for group in ("any", "all"):
        if group in cond:
            items = cond[group]
            if not isinstance(items, list):
                yield _problem(f"'{group}' must be an array of conditions", "invalid-condition",
                               f"{pointer}/{group}")
                return
            for i, item in enumerate(items):
                yield from check_condition(item, f"{pointer}/{group}/{i}", ctx, depth + 1)
            return
    if "not" in cond:
        yield from check_condition(cond["not"], f"{pointer}/not", ctx, depth + 1)
        return
    yield from check_leaf(cond, pointer, ctx)


def check_reference(ref: Any, pointer: str, ctx: LintContext, pattern_ok: bool) -> Iterator[Problem]:
    if not isinstance(ref, str) or not ref:
        yield _problem("a memory reference must be a non-empty string", "unknown-memory", pointer)
        return
    if "://" in ref:
        scheme = ref.split("://", 1)[0]
        if scheme not in STORE_SCHEMES:
            hints = _hints(scheme, list(STORE_SCHEMES))
            yield _problem(f"unknown store scheme '{scheme}://'{_mean(hints)}", "unknown-scheme", pointer,
                           candidates=[f"{h}://{ref.split('://', 1)[1]}" for h in hints])
        return
    if pattern_ok and any(ch in ref for ch in "*?["):
        return
    if ref not in ctx.memory_ids:
        hints = _hints(ref, sorted(ctx.memory_ids))
        yield _problem(f"unknown memory '{ref}'{_mean(hints)}", "unknown-memory", pointer,
                       Severity.ERROR if pattern_ok is False else Severity.WARNING, candidates=hints)


# Where a dialect wrote the reference lists `then` is read from. seed-004 copies them, but a lone
# `include: x` reads as `[x]`, so with one reference the list (or scalar) itself is named; seed-003
# also drops entries it cannot read, so its indices may not be the file's: only the list is certain.
# (The editor narrows a list of one string to that string, editor/diagnostics.py.)
_WRITTEN_LISTS = {"seed-004": {"add_memories": "include", "exclude_memories": "exclude"},
                  "seed-003": {"add_memories": "always_include", "exclude_memories": "exclude"}}


def _reference_pointer(site: RuleSite, key: str, index: int, count: int, dialect: str) -> str:
    if site.actions_exact:
        return f"{site.actions_pointer}/{key}/{index}"
    written = _WRITTEN_LISTS.get(dialect, {}).get(key)
    if written is None:
        return site.actions_pointer
    where = f"{site.actions_pointer}/{written}"
    return f"{where}/{index}" if dialect == "seed-004" and count > 1 else where


def check_actions(then: Any, site: RuleSite, ctx: LintContext) -> Iterator[Problem]:
    if not isinstance(then, dict):
        return
    for key, pattern_ok in (("add_memories", False), ("exclude_memories", True)):
        refs = then.get(key)
        if not isinstance(refs, list):
            continue
        for i, ref in enumerate(refs):
            yield from check_reference(ref, _reference_pointer(site, key, i, len(refs), ctx.dialect), ctx,
                                       pattern_ok)


def check_rule(site: RuleSite, ctx: LintContext) -> Iterator[Problem]:
    when = site.rule.get("when", [])
    if not isinstance(when, list):
        yield _problem("'when' must be an array of conditions", "invalid-condition", f"{site.pointer}/when")
        return
    for i, cond in enumerate(when):
        yield from check_condition(cond, site.condition_pointer(i), ctx)
    clash = contradiction([c for c in when if isinstance(c, dict)])
    if clash is not None:
        first, second, why = clash
        problem = _problem(f"these conditions can never all hold: {why}", "unsatisfiable",
                           site.condition_pointer(when.index(second)), Severity.WARNING)
        problem.related.append(Problem("the condition it contradicts", "unsatisfiable",
                                       Severity.INFO, path=site.condition_pointer(when.index(first))))
        yield problem
    yield from check_actions(site.rule.get("then"), site, ctx)
    then = site.rule.get("then")
    ignored = [k for k in PER_SOURCE_IGNORED if isinstance(then, dict) and then.get(k)]
    if ignored and any(_reads_source(c) for c in when):
        yield _problem(f"a rule on {MEMORY_SOURCE} is applied per reference during the assembly, and only its caps "
                       f"and set_priority: its {', '.join(ignored)} never apply", "per-source-action",
                       site.actions_pointer, Severity.WARNING)


PER_SOURCE_IGNORED = ("add_memories", "exclude_memories", "boost")
MAX_DEPTH = 32  # condition groups nested deeper are reported (and not walked)


def _reads_source(cond: Any, depth: int = 0) -> bool:
    """Whether a condition (or a group under it, MAX_DEPTH levels at most: deeper is reported as
    such) reads memory.source (a per-source rule: engine.py)."""
    if not isinstance(cond, dict) or depth > MAX_DEPTH:
        return False
    if isinstance(cond.get("field"), str):
        return canonical_field(cond["field"]) == MEMORY_SOURCE
    children = cond.get("all", cond.get("any", []))
    children = [cond["not"]] if "not" in cond else children
    return isinstance(children, list) and any(_reads_source(c, depth + 1) for c in children)


def check_duplicate_ids(sites: list[RuleSite]) -> Iterator[Problem]:
    return iter(_duplicate_ids([(site.pointer, site.rule) for site in sites], str))


def _duplicate_ids(rules: list[tuple[Any, dict[str, Any]]], pointer: Callable[[Any], str]) -> list[Problem]:
    """A rule id seen before; `rules` are (where, rule) and `pointer(where)` is the rule's pointer."""
    first: dict[str, Any] = {}
    problems = []
    for where, rule in rules:
        rule_id = rule.get("id")
        if not isinstance(rule_id, str):
            continue
        if rule_id not in first:
            first[rule_id] = where
            continue
        problem = _problem(f"duplicate rule id '{rule_id}'", "duplicate-id", f"{pointer(where)}/id")
        problem.related.append(Problem("first defined here", "duplicate-id", Severity.INFO,
                                       path=f"{pointer(first[rule_id])}/id"))
        problems.append(problem)
    return problems


def engine_sites(document: dict[str, Any]) -> list[RuleSite]:
    """The rules of a canonical rule-engine document."""
    rules = document.get("rules")
    if not isinstance(rules, list):
        return []
    return [RuleSite(rule, f"/rules/{i}", _when_pointer(i), f"/rules/{i}/then", True)
            for i, rule in enumerate(rules) if isinstance(rule, dict)]


def _when_pointer(rule_index: int) -> Callable[[int], str]:
    return lambda j: f"/rules/{rule_index}/when/{j}"


# `IdentityCache.reuse` (workspace/memo.py): each rule's problems, kept or from compute(misses)
Reuse = Callable[[Sequence[Any], Callable[[list[Any]], list[list[Problem]]]], list[list[Problem]]]


def check_engine_document(document: Any, ctx: LintContext, reuse: Reuse | None = None) -> list[Problem]:
    """Every meaning problem of a canonical rule-engine document. With `reuse`, a rule's problems
    are computed once while it stays the same object (and `ctx` stays equal)."""
    if not isinstance(document, dict):
        return [_problem("a rule engine must be a JSON object", "schema", "")]
    rules = document.get("rules")
    indexed = [(i, rule) for i, rule in enumerate(rules) if isinstance(rule, dict)] \
        if isinstance(rules, list) else []
    per_rule = (reuse or _no_reuse)([rule for _, rule in indexed], lambda misses: _rules_problems(misses, ctx))
    problems = [_placed(problem, f"/rules/{i}")
                for (i, _), found in zip(indexed, per_rule, strict=True) for problem in found]
    problems += _duplicate_ids(indexed, "/rules/{}".format)
    return problems


def _no_reuse(items: Sequence[Any], compute: Callable[[list[Any]], list[list[Problem]]]) -> list[list[Problem]]:
    return compute(list(items))


_RELATIVE_WHEN = "/when/{}".format


def _rules_problems(rules: list[dict[str, Any]], ctx: LintContext) -> list[list[Problem]]:
    """Each rule's problems with pointers relative to the rule, which stay true wherever it moves."""
    return [list(check_rule(RuleSite(rule, "", _RELATIVE_WHEN, "/then", True), ctx)) for rule in rules]


def _placed(problem: Problem, prefix: str) -> Problem:
    """A fresh copy under `prefix` (callers fill in lines and columns, which differ per version)."""
    return Problem(problem.message, problem.code, problem.severity, prefix + problem.path,
                   data={k: list(v) if isinstance(v, list) else v for k, v in problem.data.items()},
                   related=[_placed(other, prefix) for other in problem.related])


__all__ = ["LintContext", "RuleSite", "check_duplicate_ids", "check_engine_document", "check_rule",
           "engine_sites", "json_equal"]
