"""The editor's end-to-end tests: one real server over stdio per module, on a copy of the example
workspace. A module says what its client announces with `CAPABILITIES` (default: push diagnostics,
snippets); the `initialize` result is handed to the module's `INIT` list when it has one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from ..editor_support import capabilities, make_editor_client, start, workspace_copy
from ..support import SERVER


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    return workspace_copy(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "ws")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, client_factory=make_editor_client))
async def client(lsp_client: LanguageClient, root: Path, request: pytest.FixtureRequest) -> AsyncIterator[None]:
    result = await start(lsp_client, root, getattr(request.module, "CAPABILITIES", capabilities()))
    if hasattr(request.module, "INIT"):
        request.module.INIT.append(result)
    yield
    await lsp_client.shutdown_session()
