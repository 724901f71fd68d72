"""Running rule tests: each case's request through the rules (or the whole assembly), its
expectations checked, and each failure explained by the rules involved, condition by condition."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from attrs import define, field

from ..assembly.request import parse_request
from ..errors import ContextAssemblyError, InvalidParamsError, NotFoundError
from ..model.context import AssembledContext
from ..model.problems import Problem
from ..model.request import AssemblyRequest
from ..rules.engine import CompiledRule, rule_result
from ..rules.lookup import Lookup, build_lookup
from ..workspace.loader import Workspace
from .cases import TestCase, TestFile, load_test_files
from .coverage import Coverage
from .expect import Explanation, Failure, check, rule_matches
from .names import unknown_names
from .observe import from_assembly, from_rules

Assemble = Callable[[dict[str, Any]], AssembledContext]
# A request's variable lookup and the derived values in it (`Runtime.lookup`: the one every method
# evaluates against, the thread's turn count included), so a rules-only case sees what `evaluate`
# and `assemble` see; `plain_lookup` where no runtime is at hand (no derived values).
LookupOf = Callable[[AssemblyRequest], tuple[Lookup, dict[str, Any]]]
_log = logging.getLogger(__name__)
MAX_EXPLAINED = 8  # rules explained per failure: enough to see why, short enough to read


@define
class CaseResult:
    file: str
    name: str
    pointer: str
    status: str  # "passed" | "failed" | "error" | "skipped"
    mode: str  # "rules" | "assemble"
    duration_ms: float = 0.0
    failures: list[Failure] = field(factory=list)
    error: Problem | None = None  # status "error": why the case could not run, located in its file
    included: list[str] = field(factory=list)
    fired: list[str] = field(factory=list)
    token_estimate: int | None = None

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


@define
class TestRun:
    __test__ = False

    results: list[CaseResult] = field(factory=list)
    problems: list[Problem] = field(factory=list)  # broken test files (their cases did not run)
    coverage: Coverage | None = None
    duration_ms: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return not self.problems and all(r.status in ("passed", "skipped") for r in self.results)

    def summary(self) -> dict[str, Any]:
        return {"cases": len(self.results), **{s: self.count(s) for s in ("passed", "failed", "error", "skipped")},
                "file_errors": len(self.problems), "ok": self.ok, "duration_ms": round(self.duration_ms, 3)}


def plain_lookup(request: AssemblyRequest) -> tuple[Lookup, dict[str, Any]]:
    return build_lookup(request), {}


def run_tests(workspace: Workspace, assemble: Assemble | None = None, *, pattern: str | None = None,
              coverage: bool = False, files: list[TestFile] | None = None,
              lookup_of: LookupOf = plain_lookup) -> TestRun:
    """Run every case of the workspace's tests (those whose id matches `pattern`). `assemble`
    runs a full assembly; without it, cases that ask for one are errors. `lookup_of`: the lookup
    the rules see (`LookupOf`)."""
    started = time.perf_counter()
    run = TestRun(coverage=Coverage.of(workspace) if coverage else None)
    for test_file in files if files is not None else load_test_files(workspace, pattern):
        run.problems += test_file.problems
        if any(p.is_error for p in test_file.problems if p.code in ("syntax", "schema", "encoding", "io")):
            continue
        for case in test_file.cases:
            run.results.append(run_case(case, workspace, assemble, run.coverage, lookup_of))
    run.duration_ms = (time.perf_counter() - started) * 1000
    return run


def run_case(case: TestCase, workspace: Workspace, assemble: Assemble | None,
             coverage: Coverage | None = None, lookup_of: LookupOf = plain_lookup) -> CaseResult:
    started = time.perf_counter()
    result = CaseResult(case.file, case.name, case.pointer, "passed", "assemble" if case.assemble else "rules")
    if case.skip:
        result.status = "skipped"
        return result
    try:
        result.failures = _run(case, workspace, assemble, coverage, result, lookup_of)
        result.status = "failed" if result.failures else "passed"
    except ContextAssemblyError as exc:
        result.status = "error"
        result.error = case.problem or _problem(case, exc, workspace)
    except Exception as exc:  # noqa: BLE001 - a bug met by one case is that case's error, not the run's end
        _log.exception("rule test %s failed unexpectedly", case.name)
        result.status = "error"
        result.error = case.problem or _problem(case, ContextAssemblyError(f"{type(exc).__name__}: {exc}"), workspace)
    result.duration_ms = round((time.perf_counter() - started) * 1000, 3)
    return result


def _run(case: TestCase, workspace: Workspace, assemble: Assemble | None, coverage: Coverage | None,
         result: CaseResult, lookup_of: LookupOf) -> list[Failure]:
    if case.problem is not None or case.request is None:
        raise ContextAssemblyError(case.problem.message if case.problem else "the case has no request")
    request = parse_request(case.request)
    lookup, derived = lookup_of(request)
    if case.assemble:
        if assemble is None:
            raise ContextAssemblyError("this case needs the full assembly, which is not available here")
        seen = from_assembly(assemble(case.request))
    else:
        seen = from_rules(request, workspace.rule_set.evaluate(request, lookup, False, derived), workspace)
    if coverage is not None:
        coverage.record(workspace.rule_set.evaluate(request, lookup, True, derived), seen.included)
    result.included, result.fired = seen.included, [f"{e}/{r}" for e, r in seen.fired]
    result.token_estimate = seen.token_estimate
    failures = unknown_names(case.expect, workspace, case.pointer) + check(case.expect, seen, case.pointer)
    source = workspace.files.get(case.file)
    for failure in failures:
        failure.explanations = explain(failure, request, lookup, workspace)
        if source is not None:
            located = source.locate(Problem(failure.message, "test-failed", path=failure.pointer))
            failure.line, failure.column = located.line, located.column
    return failures


def _problem(case: TestCase, exc: ContextAssemblyError, workspace: Workspace) -> Problem:
    """An invalid request (or a failed assembly) as a problem located at the case in its file."""
    message = exc.message
    pointer = case.request_pointer or case.pointer
    if isinstance(exc, InvalidParamsError) and exc.errors:
        first = exc.errors[0]
        message = "; ".join(f"{e.get('path') or '/'}: {e.get('message')}" for e in exc.errors)
        if pointer.endswith("/request") or pointer == "/request":
            pointer += str(first.get("path") or "")
    source = workspace.files.get(case.file)
    problem = Problem(f"{exc.message}: {message}" if message != exc.message else message, "test-request",
                      path=pointer)
    return source.locate(problem) if source is not None else problem


# -- explanations ---------------------------------------------------------------------------------


def _rules(workspace: Workspace, request: AssemblyRequest) -> list[tuple[str, CompiledRule]]:
    engines, _ = workspace.rule_set.select(request.rule_engine_ids)
    return [(engine.id, rule) for engine in engines for rule in engine.rules]


def involved(failure: Failure, request: AssemblyRequest, workspace: Workspace) -> list[tuple[str, CompiledRule]]:
    """The rules a failure is about: those named, else those that add or exclude its memories."""
    rules = _rules(workspace, request)
    if failure.rules:
        return [(e, r) for e, r in rules if any(rule_matches(name, (e, r.rule_id)) for name in failure.rules)]
    picked = []
    for engine_id, rule in rules:
        then = rule.rule.then
        if any(m in then.add_memories or m in then.exclude_memories for m in failure.memories):
            picked.append((engine_id, rule))
    return picked


def explain(failure: Failure, request: AssemblyRequest, lookup: dict[str, Any],
            workspace: Workspace) -> list[Explanation]:
    out = []
    for engine_id, rule in involved(failure, request, workspace)[:MAX_EXPLAINED]:
        matched, conditions = rule.conditions.explain(lookup)
        out.append(Explanation(engine_id, rule_result(rule, matched, conditions), list(rule.rule.then.add_memories),
                               list(rule.rule.then.exclude_memories)))
    return out


def as_json(run: TestRun) -> dict[str, Any]:
    """The run as plain JSON (what `test --format json` prints and contextRuleEngine/test returns)."""
    from ..model.converter import unstructure

    out: dict[str, Any] = {"summary": run.summary(), "results": unstructure(run.results),
                           "problems": unstructure(run.problems)}
    if run.coverage is not None:
        out["coverage"] = run.coverage.report()
    return out


def evaluate_rule(workspace: Workspace, engine_id: str, rule_id: str,
                  lookup_of: LookupOf = plain_lookup) -> dict[str, Any]:
    """One rule against the request of every test case (rules-only): where it fires, where it
    does not, and why, condition by condition. `{rule, cases: [{file, name, matched, conditions}]}`."""
    from ..model.converter import unstructure

    engine = next((e for e in workspace.rule_set.engines if e.id == engine_id), None)
    rule = next((r for r in engine.rules if r.rule_id == rule_id), None) if engine is not None else None
    if rule is None:
        raise NotFoundError(f"no rule '{rule_id}' in engine '{engine_id}'")
    cases = []
    for test_file in load_test_files(workspace):
        for case in test_file.cases:
            if case.request is None:
                continue
            try:
                request = parse_request(case.request)
            except InvalidParamsError:
                continue
            matched, conditions = rule.conditions.explain(lookup_of(request)[0])
            cases.append({"file": case.file, "name": case.name, "matched": matched,
                          "conditions": unstructure(conditions)})
    return {"rule": f"{engine_id}/{rule_id}", "per_source": rule.per_source, "error": rule.error,
            "fired": sum(1 for c in cases if c["matched"]), "cases": cases}
