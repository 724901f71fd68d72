"""The real server over stdio (pytest-lsp) on a seeded copy of examples/quickstart, one per test module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from .support import SERVER, Served, clone, make_client, seeded_copy

# The server reads its settings from `workspace/configuration` (section contextAssembly): a long
# pipeline timeout keeps the tests that hold a store's lock deterministic on a slow machine.
SETTINGS: dict[str, Any] = {"pipeline_timeout_ms": 60000}


@pytest.fixture(scope="session")
def seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seeded_copy(tmp_path_factory.mktemp("template") / "quickstart")


@pytest.fixture(scope="module")
def workspace(seeded_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone(seeded_template, tmp_path_factory.mktemp("ws") / "quickstart")


@pytest.fixture
async def served() -> AsyncIterator[list[Served]]:
    """The network servers a test starts (`support.start`): each stopped after it, exiting 0 and
    without a traceback (a dropped client is dropped quietly)."""
    started: list[Served] = []
    yield started
    codes = [await server.stop() for server in started]  # every one stopped, whichever fails
    assert codes == [0] * len(started)
    for server in started:
        assert not [line for line in server.stderr if b"Traceback" in line], server.stderr


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, client_factory=make_client))
async def client(lsp_client: LanguageClient, workspace: Path) -> AsyncIterator[None]:
    lsp_client.set_configuration(SETTINGS, section="contextAssembly")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="quickstart")],
    ))
    yield
    await lsp_client.shutdown_session()
