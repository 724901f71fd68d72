"""Rule tests in the editor: code lenses ("Run test", "Evaluate this rule") whose commands the
server executes, failing cases as diagnostics at the case, completion and hover in test files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from ..editor_support import change_doc, diagnostics_for, open_doc, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

FAILING = json.dumps({"request": {"scope_variables": {}, "additional_variables": {"phase": "review"}},
                      "cases": [
                          {"name": "ok", "expect": {"rules_not_fired": ["arch-in-planning"]}},
                          {"name": "wrong", "expect": {"rules_fired": ["planning/arch-in-planning"]}},
                          {"name": "budget", "expect": {"max_token_estimate": 1}},
                      ]}, indent=2)


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    found = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri)))
    return list(found or [])


async def test_code_lenses_on_tests_and_rules(client: LanguageClient, root: Path) -> None:
    tests = root / ".codebolt" / "tests" / "planning.json"
    uri = open_doc(client, tests)
    found = await lenses(client, uri)
    titles = [lens.command.title for lens in found if lens.command]
    assert titles == ["Run all tests"] + ["Run test"] * 5
    first_case = found[1]
    assert first_case.command is not None and first_case.command.command == "contextAssembly.runTest"
    assert list(first_case.command.arguments or []) == [".codebolt/tests/planning.json",
                                            "planning pulls the architecture docs and conventions"]
    assert first_case.range.start == position_of(tests.read_text(), '{\n      "name": "planning pulls')
    engine = root / ".codebolt" / "context-rule-engines" / "review.json"
    found = await lenses(client, open_doc(client, engine))
    assert [(lens.command.title, list(lens.command.arguments or [])) for lens in found if lens.command] == [
        ("Evaluate this rule", ["review", "reviewer-conventions"]), ("Evaluate this rule", ["review", "large-change"])]
    dialect = root / ".codebolt" / "ContextRuleEngine" / "01_base-rules.json"
    found = await lenses(client, open_doc(client, dialect))
    assert [list(lens.command.arguments or []) for lens in found if lens.command][0] == \
        ["context-rules", "always-style-guide"]


async def test_failing_cases_are_diagnostics_at_the_case(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "tests" / "editing.json"
    uri = open_doc(client, path, FAILING)
    found = await diagnostics_for(client, uri, 1)
    [failed] = [d for d in found if d.code == "test-failed"]
    assert failed.severity == types.DiagnosticSeverity.Error
    assert "test 'wrong' failed: rule 'planning/arch-in-planning' did not fire" in failed.message
    assert failed.range.start == position_of(FAILING, '"planning/arch-in-planning"')
    # the budget case needs the assembly: not run while typing
    assert not any("budget" in d.message for d in found)
    fixed = FAILING.replace('"rules_fired": [', '"rules_not_fired": [')
    change_doc(client, uri, fixed, 2)
    assert [d for d in await diagnostics_for(client, uri, 2) if d.code == "test-failed"] == []


async def test_run_test_command(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "tests" / "running.json"
    path.write_text(FAILING)
    uri = open_doc(client, path)
    await diagnostics_for(client, uri, 1)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="contextAssembly.runTest", arguments=[".codebolt/tests/running.json"]))
    assert result["summary"]["cases"] == 3 and result["summary"]["failed"] == 2
    assert client.messages[-1].message == "Rule tests: 1 passed, 2 failed, 0 error(s), 0 skipped"
    assert client.messages[-1].type == types.MessageType.Warning
    # now the assembly case's failure is on the file too, at its expectation
    for _ in range(100):
        found = await diagnostics_for(client, uri)
        if any("budget" in d.message for d in found):
            break
        await asyncio.sleep(0.05)
    budget = next(d for d in found if "test 'budget' failed" in d.message)
    assert budget.range.start == position_of(FAILING, "1\n")
    one = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="contextAssembly.runTest", arguments=[".codebolt/tests/running.json", "ok"]))
    assert [r["name"] for r in one["results"]] == ["ok"] and one["summary"]["ok"] is True


async def test_evaluate_rule_command(client: LanguageClient) -> None:
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="contextAssembly.evaluateRule", arguments=["planning", "arch-in-planning"]))
    assert result["rule"] == "planning/arch-in-planning" and result["fired"] >= 2
    by_name = {c["name"]: c for c in result["cases"]}
    assert by_name["outside planning only history and past tasks"]["matched"] is False
    assert by_name["outside planning only history and past tasks"]["conditions"][0]["actual"] == "implementation"
    assert client.messages[-1].message.startswith("planning/arch-in-planning fires in ")


async def test_command_errors_keep_the_server_serving(client: LanguageClient, root: Path) -> None:
    with pytest.raises(JsonRpcException) as unknown:  # answered with the domain error's code
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="contextAssembly.evaluateRule", arguments=["planning", "no-such-rule"]))
    assert unknown.value.code == -32001 and "no-such-rule" in unknown.value.message
    with pytest.raises(JsonRpcException) as odd:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="contextAssembly.runTest", arguments=[42]))
    assert odd.value.code == -32602 and "takes 2 string arguments" in odd.value.message
    uri = (root / ".codebolt" / "tests" / "planning.json").as_uri()
    assert len(await lenses(client, uri)) == 6


async def test_completion_and_hover_in_test_files(client: LanguageClient, root: Path) -> None:
    text = ('{"cases": [{"name": "c", "request": {"scope_variables": {}}, "expect": {"rules_fired": [""], '
            '"memories_included": [""], "sections_present": [""], "items_present": [{"memory": ""}], ""}}]}')
    uri = open_doc(client, root / ".codebolt" / "tests" / "typing.json", text)

    async def labels(needle: str, delta: int) -> set[str]:
        result = await client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri), position=position_of(text, needle, delta)))
        assert isinstance(result, types.CompletionList)
        return {i.label for i in result.items}

    assert {"planning/arch-in-planning", "review/large-change", "context-rules/auth-work"} <= \
        await labels('"rules_fired": ["', len('"rules_fired": ["'))
    assert {"architecture-docs", "recent-history"} <= await labels('"memories_included": ["', 22)
    assert {"state", "knowledge"} <= await labels('"sections_present": ["', 21)
    assert "architecture-docs" in await labels('{"memory": "', 12)
    keys = await labels('], ""', 4)
    assert {"memories_excluded", "rules_not_fired", "max_token_estimate", "warnings"} <= keys
    assert "rules_fired" not in keys  # already there

    hover_text = (root / ".codebolt" / "tests" / "planning.json").read_text()
    planning = (root / ".codebolt" / "tests" / "planning.json").as_uri()

    async def hover(needle: str, delta: int) -> str:
        found = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(planning), position=position_of(hover_text, needle, delta)))
        assert found is not None and isinstance(found.contents, types.MarkupContent)
        return found.contents.value

    assert "adds `architecture-docs`" in await hover('"planning/arch-in-planning"', 3)
    assert "Architecture" in await hover('"architecture-docs",\n          "project', 3)
    assert "Rules that must match" in await hover('"rules_fired"', 3)
