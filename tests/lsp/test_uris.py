"""The LSP server reads `file:` URIs with pygls' converter, also in the core (`workspace/uris.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pygls.uris import to_fs_path

from context_assembly.lsp.server import build_server
from context_assembly.workspace import uris


@pytest.fixture
def server_built() -> Iterator[None]:
    server = build_server()
    yield
    server.close()
    uris.use_converter(uris.standard_converter)


@pytest.mark.usefixtures("server_built")
@pytest.mark.parametrize("uri", ["file:///C:/proj/.codebolt/a.json", "file://share/c$/a.json",
                                 "file:///tmp/a%20b.json", "untitled:x"])
def test_the_core_reads_uris_as_pygls_does(uri: str) -> None:
    expected = to_fs_path(uri)
    found = uris.uri_to_path(uri)
    assert (str(found) if found is not None else None) == (str(Path(expected)) if expected else None)


@pytest.mark.usefixtures("server_built")
def test_a_windows_drive_letter_is_read_as_a_drive() -> None:
    found = uris.uri_to_path("file:///C:/proj/a.json")
    assert found is not None and str(found).lower().startswith("c:")
