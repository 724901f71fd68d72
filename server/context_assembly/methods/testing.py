"""`contextRuleEngine/test`: run the workspace's rule tests (`.codebolt/tests/`)."""

from __future__ import annotations

from typing import Any

from ..errors import NotFoundError
from ..testing import load_test_files, run_tests
from ..testing.run import as_json
from .call import CallContext, MethodSpec
from .params import shape
from .session import Session


def test(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """`{pattern?, file?, case?, coverage?}` -> `{summary, results, problems, coverage?}`. `file` (relative
    to the workspace root) and `case` (a case name) narrow the run to one file or one case."""
    workspace = session.editor_view() if session.editor_view is not None else session.workspace()
    files = load_test_files(workspace, params.get("pattern"))
    if params.get("file") is not None:
        files = [f for f in files if f.relpath == params["file"]]
        if not files:  # a name mistyped is an error, not a green run of nothing
            known = ", ".join(f.relpath for f in load_test_files(workspace)) or "none"
            raise NotFoundError(f"no test file '{params['file']}' (the test files: {known})")
    if params.get("case") is not None:
        for test_file in files:
            test_file.cases = [c for c in test_file.cases if c.name == params["case"]]
        if not any(test_file.cases or test_file.problems for test_file in files):  # a broken file says why
            where = f"'{params['file']}'" if params.get("file") is not None else "the test files"
            matching = f" matching '{params['pattern']}'" if params.get("pattern") else ""
            raise NotFoundError(f"no test case '{params['case']}'{matching} in {where}")
    run = run_tests(workspace, lambda request: session.assemble(request, snapshot=False),
                    coverage=bool(params.get("coverage")), files=files,
                    lookup_of=session.lookup)
    return as_json(run)


METHODS = (
    MethodSpec("contextRuleEngine/test", test,
               shape(pattern="string?", file="string?", case="string?", coverage="boolean?"),
               summary="Run the rule tests under .codebolt/tests/ (optionally one file, one case, or by pattern)."),
)
