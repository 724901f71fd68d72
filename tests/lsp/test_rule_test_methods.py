"""contextRuleEngine/test, contextAssembly/replay and contextAssembly/diff over the real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .conftest import SETTINGS
from .support import REQUEST, call, error_of, paths

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_rule_tests_run(client: LanguageClient) -> None:
    result = await call(client, "contextRuleEngine/test", {})
    assert result["summary"]["ok"] is True and result["summary"]["passed"] == 7
    one = await call(client, "contextRuleEngine/test", {"file": ".codebolt/tests/planning.json",
                                                        "case": "reviewers get the conventions and preferences"})
    assert [r["name"] for r in one["results"]] == ["reviewers get the conventions and preferences"]
    covered = await call(client, "contextRuleEngine/test", {"pattern": "planning.json", "coverage": True})
    assert covered["summary"]["cases"] == 5 and "review/large-change" in covered["coverage"]["rules_never_fired"]
    # a file or case that is not there is an error, not a green run of nothing
    error = await error_of(client, "contextRuleEngine/test", {"file": ".codebolt/tests/planing.json"})
    assert error.code == -32001 and "no test file '.codebolt/tests/planing.json'" in error.message
    assert ".codebolt/tests/planning.json" in error.message
    error = await error_of(client, "contextRuleEngine/test", {"file": ".codebolt/tests/planning.json",
                                                              "case": "no such case"})
    assert error.code == -32001 and error.message == \
        "no test case 'no such case' in '.codebolt/tests/planning.json'"


async def test_a_broken_file_named_with_a_case_reports_its_problems(client: LanguageClient, workspace: Path) -> None:
    """Not "no test case …": a file that does not parse has no cases, and says why."""
    path = workspace / ".codebolt" / "tests" / "broken.json"
    path.write_text('{"cases": [{"name": "x",, "expect": {}}]}')
    try:
        result = await call(client, "contextRuleEngine/test", {"file": ".codebolt/tests/broken.json", "case": "x"})
    finally:
        path.unlink()
    assert result["summary"]["ok"] is False and result["summary"]["file_errors"] >= 1
    assert {p["code"] for p in result["problems"]} == {"syntax"}


async def test_a_failing_case_over_rpc(client: LanguageClient, workspace: Path) -> None:
    path = workspace / ".codebolt" / "tests" / "failing.json"
    path.write_text(json.dumps({"cases": [{"name": "wrong", "request": {"scope_variables": {}},
                                           "expect": {"rules_fired": ["arch-in-planning"]}}]}))
    try:
        result = await call(client, "contextRuleEngine/test", {"pattern": "failing"})
    finally:
        path.unlink()
    [case] = result["results"]
    assert case["status"] == "failed" and result["summary"]["ok"] is False
    [failure] = case["failures"]
    assert failure["line"] == 1 and failure["explanations"][0]["rule"]["conditions"][0]["present"] is False


async def test_test_params_are_checked(client: LanguageClient) -> None:
    error = await error_of(client, "contextRuleEngine/test", {"coverage": "yes"})
    assert error.code == -32602 and paths(error) == ["/coverage"]


async def test_replay_and_diff(client: LanguageClient) -> None:
    client.set_configuration({**SETTINGS, "snapshots": True}, section="contextAssembly")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    for _ in range(100):
        first = await call(client, "contextAssembly/assemble", REQUEST)
        if first["meta"].get("snapshot"):
            break
        await asyncio.sleep(0.05)
    assembly_id = first["meta"]["assembly_id"]
    assert first["meta"]["snapshot"] == f".codebolt/memory/context/{assembly_id}.json"
    replayed = await call(client, "contextAssembly/replay", {"snapshot": assembly_id})
    assert replayed["drifted"] is False and replayed["before"]["meta"]["assembly_id"] == assembly_id
    assert "snapshot" not in replayed["after"]["meta"]  # a replay is not kept
    other = {**REQUEST, "additional_variables": {**REQUEST["additional_variables"], "phase": "review"}}
    compared = await call(client, "contextAssembly/diff", {"a": assembly_id, "b": other})
    assert compared["rules"]["no_longer_fired"] == ["planning/arch-in-planning"]
    same = await call(client, "contextAssembly/diff", {"a": first, "b": {"request": REQUEST, "result": first}})
    assert same["identical"] is True
    client.set_configuration(SETTINGS, section="contextAssembly")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))


async def test_replay_and_diff_errors(client: LanguageClient) -> None:
    error = await error_of(client, "contextAssembly/replay", {"snapshot": "no-such-assembly"})
    assert error.code == -32602 and "no such snapshot" in error.message
    error = await error_of(client, "contextAssembly/replay", {"snapshot": "../../outside.json"})
    assert error.code == -32602 and paths(error) == ["/snapshot"]
    error = await error_of(client, "contextAssembly/replay", {"snapshot": {"request": {}}})
    assert error.code == -32602 and "not an assembly snapshot" in error.message
    error = await error_of(client, "contextAssembly/diff", {"a": REQUEST, "b": {"scope_variables": {"x": {}}}})
    assert error.code == -32602 and paths(error) == ["/b/scope_variables"]
    error = await error_of(client, "contextAssembly/diff", {"a": REQUEST})
    assert error.code == -32602 and paths(error) == ["/b"]
    # the server keeps serving
    assert (await call(client, "contextRuleEngine/test", {"pattern": "quickstart"}))["summary"]["ok"] is True


async def test_trace_page(client: LanguageClient) -> None:
    page = await call(client, "contextAssembly/tracePage", {"request": REQUEST})
    assert page["html"].startswith("<!DOCTYPE html>") and 'id="section-knowledge"' in page["html"]
    assert page["assembly_id"] and f"<code>{page['assembly_id']}</code>" in page["html"]
    assembled = await call(client, "contextAssembly/assemble", REQUEST)
    again = await call(client, "contextAssembly/tracePage", {"result": assembled})
    assert again["assembly_id"] == assembled["meta"]["assembly_id"]
    error = await error_of(client, "contextAssembly/tracePage", {"request": REQUEST, "result": assembled})
    assert error.code == -32602 and "exactly one" in error.message
    error = await error_of(client, "contextAssembly/tracePage", {"request": {"input": {"text": "x"}}})
    assert error.code == -32602 and paths(error) == ["/request/scope_variables"]  # scope_variables is required
