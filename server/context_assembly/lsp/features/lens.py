"""textDocument/codeLens ("Run test" on rule-test cases, "Evaluate this rule" on rules) and the
commands behind them, executed by the server (`workspace/executeCommand`): a test run answers
with the results, shows a summary and puts failing cases on the test file as diagnostics."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from ...editor.capabilities import EVALUATE_RULE, RUN_TEST
from ...errors import InvalidParamsError
from ..server import ContextAssemblyServer
from . import diagnostics
from .state import Snapshot, document_of, editor_state, encoding, off_loop, snapshot, structure


def compute(ls: ContextAssemblyServer, snap: Snapshot, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    from ...editor.tests import code_lenses  # late: the engine is imported after `initialize`

    document = document_of(ls, snap)
    if document is None:
        return None
    return [structure(ls, lens, types.CodeLens) for lens in code_lenses(document, encoding(ls))]


def run_test(ls: ContextAssemblyServer, file: str, case: str | None, snap: Snapshot) -> dict[str, Any]:
    """Run one test file (or one case of it) against the workspace as the editor sees it; `snap`: the
    test file as the editor had it when the command came (pygls' documents are read on the loop)."""
    ls.require_editor()  # before the imports below: the editor's implementations, by one thread
    from ...editor.documents import load_document  # late: the engine is imported after `initialize`
    from ...testing import load_test_files, run_tests
    from ...testing.run import as_json

    session = ls.require_session()
    state = editor_state(ls)
    workspace = state.workspace()
    files = [f for f in load_test_files(workspace) if f.relpath == file]
    for test_file in files:
        test_file.cases = [c for c in test_file.cases if case is None or c.name == case]
    run = run_tests(workspace, lambda request: session.assemble(request, snapshot=False), files=files,
                    lookup_of=session.lookup)
    uri = snap.uri
    document = document_of(ls, snap) or load_document(uri, session.places)
    if document is not None:  # the failing cases of this text stay on the file until it changes
        state.test_runs[document.relpath] = (document.text, run.results)
    return as_json(run)


def _open_uri(ls: ContextAssemblyServer, relpath: str) -> str | None:
    """The URI the editor has the test file open under (its own spelling: `c:` or `c%3A`, a link)."""
    return next((d.uri for d in editor_state(ls).store.all() if d.relpath == relpath), None)


def _summary(result: dict[str, Any]) -> str:
    s = result["summary"]
    return (f"Rule tests: {s['passed']} passed, {s['failed']} failed, {s['error']} error(s), "
            f"{s['skipped']} skipped" + (f", {s['file_errors']} broken file problem(s)" if s["file_errors"] else ""))


def _arguments(args: tuple[Any, ...], count: int, what: str) -> list[Any]:
    values = list(args) + [None] * (count - len(args))
    if not isinstance(values[0], str) or any(v is not None and not isinstance(v, str) for v in values[:count]):
        message = f"{what} takes {count} string arguments"
        raise InvalidParamsError(message, [{"path": "/arguments", "message": message}])
    return values[:count]


def register(server: ContextAssemblyServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def on_code_lens(ls: ContextAssemblyServer, params: types.CodeLensParams) -> list[types.CodeLens] | None:
        return await off_loop(ls, compute, params)

    @server.command(RUN_TEST)
    async def on_run_test(ls: ContextAssemblyServer, *args: Any) -> dict[str, Any]:
        file, case = _arguments(args, 2, RUN_TEST)
        snap = snapshot(ls, _open_uri(ls, file) or ls.require_session().places.uri(file))
        result = await asyncio.get_running_loop().run_in_executor(ls.workers, run_test, ls, file, case, snap)
        failed = not result["summary"]["ok"]
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning if failed else types.MessageType.Info, message=_summary(result)))
        diagnostics.schedule(ls, ls.require_session().places.uri(file), immediate=True)
        diagnostics.refresh_others(ls, None)
        return result

    @server.command(EVALUATE_RULE)
    async def on_evaluate_rule(ls: ContextAssemblyServer, *args: Any) -> dict[str, Any]:
        from ...testing.run import evaluate_rule  # late: the engine is imported after `initialize`

        engine_id, rule_id = _arguments(args, 2, EVALUATE_RULE)
        state = editor_state(ls)
        result = await asyncio.get_running_loop().run_in_executor(ls.workers, lambda: evaluate_rule(
            state.workspace(), engine_id, rule_id, ls.require_session().lookup))
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=(
            f"{result['rule']} fires in {result['fired']} of {len(result['cases'])} test case(s)"
            if result["cases"] else f"{result['rule']}: no test case under .codebolt/tests/ to evaluate it with")))
        return result
