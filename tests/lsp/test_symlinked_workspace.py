"""A workspace reached through a symlink, as the editor names it: the root itself is a symlink to the
project folder, or the project's `.codebolt` is a symlink to a folder elsewhere (shared between
projects). The server answers in the client's spelling: diagnostics on the URI opened, related
places, definitions, renames and test runs under the root the client named, and the open documents
of the linked `.codebolt` laid over the workspace. Resolving the links named files the editor never
opened (or took the documents for another project's)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .editor_support import (
    capabilities,
    diagnostics_for,
    make_editor_client,
    open_doc,
    position_of,
    start,
    workspace_copy,
)
from .support import SERVER

pytestmark = pytest.mark.asyncio(loop_scope="module")
CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_editor_client)
ENGINE = json.dumps({"id": "odd", "rules": [{"id": "r", "when": [
    {"field": "input.text", "operator": "equalz", "value": "x"}], "then": {"add_memories": ["no-such-memory"]}}]})
FAILING = json.dumps({"request": {"scope_variables": {}, "additional_variables": {"phase": "review"}},
                      "cases": [{"name": "budget", "expect": {"max_token_estimate": 1}}]}, indent=2)


ROOTS: dict[int, Path] = {}  # id of a client -> the root it named


def linked(base: Path, situation: str) -> Path:
    """The root the client names: a symlink to the project, or the project with a linked `.codebolt`."""
    if situation == "linked-root":
        real = workspace_copy(base / "real")
        (base / "link").symlink_to(real, target_is_directory=True)
        return base / "link"
    project = workspace_copy(base / "project")
    shared = base / "shared" / "cb"
    shared.parent.mkdir()
    shutil.move(project / ".codebolt", shared)
    (project / ".codebolt").symlink_to(shared, target_is_directory=True)
    return project


# parametrized here, not on `root`: pytest-lsp's fixture does not follow the fixtures it asks for
@pytest_lsp.fixture(scope="module", config=CONFIG, params=["linked-root", "linked-codebolt"])
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[None]:
    root = ROOTS[id(lsp_client)] = linked(tmp_path_factory.mktemp(request.param), request.param)
    await start(lsp_client, root, capabilities())
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def root(client: LanguageClient) -> Path:
    return ROOTS[id(client)]


def codebolt(root: Path, *parts: str) -> Path:
    return root.joinpath(".codebolt", *parts)


def in_client_spelling(root: Path, uri: str) -> bool:
    return uri.startswith(root.as_uri() + "/")


async def test_diagnostics_on_the_uri_opened(client: LanguageClient, root: Path) -> None:
    path = codebolt(root, "context-rule-engines", "odd.json")
    assert path.resolve() != path  # the test is about a link on the way
    uri = open_doc(client, path, ENGINE)
    found = await diagnostics_for(client, uri, version=1)
    assert {d.code for d in found} >= {"unknown-operator", "unknown-memory"}
    published = {p.uri for p in client.protocol.published}  # type: ignore[attr-defined]
    assert path.resolve().as_uri() not in published


async def test_related_places_in_the_client_spelling(client: LanguageClient, root: Path) -> None:
    original = codebolt(root, "context-rule-engines", "review.json")
    text = original.read_text()
    uri = open_doc(client, codebolt(root, "context-rule-engines", "zz-copy.json"), text)
    duplicate = next(d for d in await diagnostics_for(client, uri, version=1) if d.code == "duplicate-id")
    assert duplicate.related_information
    assert [r.location.uri for r in duplicate.related_information] == [original.as_uri()]


async def test_navigation_in_the_client_spelling(client: LanguageClient, root: Path) -> None:
    path = codebolt(root, "context-rule-engines", "review.json")
    text = path.read_text()
    uri = open_doc(client, path)
    where = position_of(text, '"architecture-docs"]', 3)
    definition = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri), position=where))
    assert isinstance(definition, types.Location)
    assert definition.uri == codebolt(root, "PersistentMemory", "architecture-docs.json").as_uri()
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri), position=where,
        context=types.ReferenceContext(include_declaration=True)))
    assert refs and all(in_client_spelling(root, r.uri) for r in refs)
    assert codebolt(root, "context-rule-engines", "planning.json").as_uri() in {r.uri for r in refs}
    edit = await client.text_document_rename_async(types.RenameParams(
        text_document=types.TextDocumentIdentifier(uri), position=where, new_name="arch"))
    assert edit is not None and edit.document_changes is not None
    *texts, moved = edit.document_changes
    assert isinstance(moved, types.RenameFile)
    assert (moved.old_uri, moved.new_uri) == (codebolt(root, "PersistentMemory", "architecture-docs.json").as_uri(),
                                              codebolt(root, "PersistentMemory", "arch.json").as_uri())
    assert all(in_client_spelling(root, t.text_document.uri) for t in texts)  # type: ignore[union-attr]


async def test_unsaved_memory_of_the_linked_codebolt_is_seen(client: LanguageClient, root: Path) -> None:
    text = json.dumps({"id": "needs", "rules": [{"id": "r", "when": [], "then": {"add_memories": ["brand-new"]}}]})
    uri = open_doc(client, codebolt(root, "context-rule-engines", "needs.json"), text)
    assert any(d.code == "unknown-memory" for d in await diagnostics_for(client, uri, version=1))
    protocol = client.protocol
    count = len(protocol.published)  # type: ignore[attr-defined]
    open_doc(client, codebolt(root, "PersistentMemory", "brand-new.json"), json.dumps(
        {"id": "brand-new", "label": "New", "retrieval": {"pipeline": []}, "contribution": {"section": "knowledge"}}))
    for _ in range(100):
        later = [p for p in protocol.published[count:] if p.uri == uri]  # type: ignore[attr-defined]
        if later and not any(d.code == "unknown-memory" for d in later[-1].diagnostics):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the unsaved memory file was not laid over the workspace")


async def test_a_test_run_lands_on_the_file_opened(client: LanguageClient, root: Path) -> None:
    path = codebolt(root, "tests", "running.json")
    path.write_text(FAILING)
    uri = open_doc(client, path)
    await diagnostics_for(client, uri, version=1)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="contextAssembly.runTest", arguments=[".codebolt/tests/running.json"]))
    assert result["summary"]["failed"] == 1
    for _ in range(100):  # the assembly case's failure is put on the open file
        if any("budget" in d.message for d in await diagnostics_for(client, uri)):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the test run's failure did not reach the file the editor has open")


async def test_every_publish_is_in_the_client_spelling(client: LanguageClient, root: Path) -> None:
    published = [p.uri for p in client.protocol.published]  # type: ignore[attr-defined]
    assert published and [u for u in published if not in_client_spelling(root, u)] == []


async def test_a_test_run_lands_on_the_file_opened_by_its_other_spelling(client: LanguageClient, root: Path) -> None:
    """The test file open under the resolved path (not the root the client named): the run's failure
    is still put on that open file (results were kept under the URI the server spelled)."""
    path = codebolt(root, "tests", "running-too.json")
    path.write_text(FAILING)
    uri = open_doc(client, path.resolve())
    await diagnostics_for(client, uri, version=1)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="contextAssembly.runTest", arguments=[".codebolt/tests/running-too.json"]))
    assert result["summary"]["failed"] == 1
    for _ in range(100):
        if any("budget" in d.message for d in await diagnostics_for(client, uri)):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the test run's failure did not reach the file the editor has open")
