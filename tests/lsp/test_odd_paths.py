"""A workspace whose path holds a space, `#` and non-ASCII letters: its open documents get their
diagnostics pushed and pulled, as anywhere else. pygls keeps open documents under the URI with its
escapes decoded, the client sends them escaped (`sp%20ace`): looked up as sent, every document
there counted as not open, and got no diagnostics, no code lens, nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .editor_support import capabilities, diagnostics_for, make_editor_client, open_doc, start, workspace_copy
from .support import SERVER

CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_editor_client)
ENGINE = ('{"id": "odd", "rules": [{"id": "r", "when": [{"field": "input.text", "operator": "equalz", '
          '"value": "x"}], "then": {"add_memories": ["no-such-memory"]}}]}')


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return workspace_copy(tmp_path_factory.mktemp("odd") / "my work #1 – café")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    await start(lsp_client, root, capabilities())
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_documents_under_a_path_with_spaces_and_accents_get_their_diagnostics(client: LanguageClient,
                                                                                  root: Path) -> None:
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "odd.json", ENGINE)
    assert "%20" in uri and "%23" in uri  # as a client sends it
    found = await diagnostics_for(client, uri, version=1)
    assert {d.code for d in found} >= {"unknown-operator", "unknown-memory"}
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lenses  # the "Evaluate this rule" lens of the open text
