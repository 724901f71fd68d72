"""Test files as the workspace loader read them, turned into cases.

A broken file never stops the others: its syntax and schema problems are reported with file,
JSON pointer, line and column (the loader's tolerant parser gives the positions), and its cases do
not run. A case whose request cannot be built (a missing request file, an invalid request) is an
error of that case alone, located at the case.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from attrs import define, field

from ..assembly.replay import read_json_inside, read_snapshot
from ..errors import ContextAssemblyError, InvalidParamsError
from ..model.problems import Problem
from ..schemas import validation_errors
from ..workspace.loader import SourceFile, Workspace

ASSEMBLY_EXPECTATIONS = ("sections_present", "sections_absent", "items_present", "items_absent",
                         "max_token_estimate")


@define
class TestCase:
    __test__ = False  # not a pytest class

    file: str  # the test file, relative to the workspace root
    name: str
    pointer: str  # the case's JSON pointer in its file ("/cases/3")
    expect: dict[str, Any]
    request: dict[str, Any] | None = None  # None when it could not be built (see `problem`)
    request_pointer: str = ""  # where the request came from, for locating its problems
    assemble: bool = False
    skip: bool = False
    problem: Problem | None = None

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


@define
class TestFile:
    __test__ = False

    source: SourceFile
    cases: list[TestCase] = field(factory=list)
    problems: list[Problem] = field(factory=list)  # syntax and schema: its cases do not run

    @property
    def relpath(self) -> str:
        return self.source.relpath


def merge(base: Any, over: Any) -> Any:
    """`over` merged into `base`, objects key by key (a case refines the file's request)."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(base.get(key), value) if key in base else value
        return out
    return over


def load_test_files(workspace: Workspace, pattern: str | None = None) -> list[TestFile]:
    """Every test file of the workspace, with the cases whose id matches `pattern` (a substring
    or a glob of `file::case`, like pytest's -k)."""
    out = []
    for source in workspace.files_of("rule-test"):
        test_file = read_test_file(source, workspace)
        if pattern:
            test_file.cases = [c for c in test_file.cases if matches(c.id, pattern)]
        out.append(test_file)
    return out


def matches(case_id: str, pattern: str) -> bool:
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(case_id, pattern) or fnmatch.fnmatchcase(case_id.split("::", 1)[1], pattern)
    return pattern.lower() in case_id.lower()


def read_test_file(source: SourceFile, workspace: Workspace) -> TestFile:
    test_file = TestFile(source)
    test_file.problems = [source.locate(p) for p in source.problems]
    if source.value is None or source.document.syntax_errors:
        return test_file
    errors = validation_errors("rule-test", source.value)
    test_file.problems += [source.locate(Problem(e["message"], "schema", path=e["path"])) for e in errors]
    if errors:
        return test_file
    value: dict[str, Any] = source.value
    flagged = {p.path.rsplit("/", 1)[0]: p for p in cases_problems(value)}  # a case's pointer -> its problem
    for index, raw in enumerate(value["cases"]):
        pointer = f"/cases/{index}"
        problem = flagged.get(pointer)
        if problem is not None and problem.code == "duplicate-id":  # the first case of the name runs
            test_file.problems.append(source.locate(problem))
            continue
        case = _case(source, workspace, value.get("request"), raw, pointer)
        if problem is not None:  # the case cannot run as written: an error of its own
            case.problem = source.locate(problem)
        test_file.cases.append(case)
    return test_file


def cases_problems(value: dict[str, Any]) -> list[Problem]:
    """What is wrong with a schema-valid test file's cases as written (`check` reports it too): a
    name used again (that case does not run), and `assemble: false` beside expectations only the
    full assembly can check (the case is an error, not a pass that checked nothing)."""
    problems = []
    seen: dict[str, str] = {}
    for index, raw in enumerate(value["cases"]):
        pointer, name = f"/cases/{index}", raw["name"]
        if name in seen:
            problems.append(Problem(f"duplicate test case name '{name}' (first at {seen[name]})", "duplicate-id",
                                    path=f"{pointer}/name"))
            continue
        seen[name] = pointer
        needs = [key for key in ASSEMBLY_EXPECTATIONS if key in raw["expect"]]
        if raw.get("assemble") is False and needs:
            problems.append(Problem(f"`assemble: false`, but {', '.join(f'`{k}`' for k in needs)} can only be "
                                    "checked by the full assembly: remove `assemble: false` or those expectations",
                                    "needs-assembly", path=f"{pointer}/assemble"))
    return problems


def _case(source: SourceFile, workspace: Workspace, base: Any, raw: dict[str, Any], pointer: str) -> TestCase:
    expect = raw["expect"]
    needs_assembly = any(key in expect for key in ASSEMBLY_EXPECTATIONS)
    case = TestCase(source.relpath, raw["name"], pointer, expect,
                    assemble=needs_assembly or raw.get("assemble", False), skip=raw.get("skip", False))
    try:
        case.request, case.request_pointer = _request(workspace, base, raw, pointer)
    except ContextAssemblyError as exc:
        where = (exc.data.get("errors") or [{}])[0].get("path") or pointer
        case.problem = source.locate(Problem(exc.message, "test-request", path=where))
    return case


def _request(workspace: Workspace, base: Any, raw: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
    if "request_file" in raw:
        where = f"{pointer}/request_file"
        data = read_json_inside(workspace.root, raw["request_file"], where, "request file")
        return merge(data, raw.get("request", {})), where
    if "snapshot" in raw:
        where = f"{pointer}/snapshot"
        document = read_snapshot(workspace.root, raw["snapshot"], where)
        request = document.get("request") if isinstance(document, dict) else None
        if not isinstance(request, dict):
            raise _refuse("the snapshot holds no request", where)
        return merge(request, raw.get("request", {})), where
    if "request" in raw:
        return merge(base or {}, raw["request"]), f"{pointer}/request"
    if base is None:
        raise _refuse("the case has no request: give `request`, `request_file` or `snapshot` (or a `request` "
                      "for the whole file)", pointer)
    return dict(base), "/request"


def _refuse(message: str, where: str) -> ContextAssemblyError:
    return InvalidParamsError(message, [{"path": where, "message": message}])
