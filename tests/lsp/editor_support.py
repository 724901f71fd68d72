"""Helpers for the editor end-to-end tests (tests/lsp/test_editor_*.py): a scratch copy of the
example workspace, a client that records every published diagnostic with its version, and
capabilities for push-only, pull and UTF-8 clients."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import register_lsp_features

from .support import EXAMPLE, PlainClientProtocol

SETTINGS: dict[str, Any] = {"diagnostics_debounce_ms": 0}


def workspace_copy(target: Path) -> Path:
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks"))
    return target


class RecordingProtocol(PlainClientProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.published_event = asyncio.Event()

    def _handle_notification(self, method_name: str, params: Any) -> None:
        if method_name == types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS:
            self.published.append(params)
            self.published_event.set()
        super()._handle_notification(method_name, params)


def make_editor_client() -> LanguageClient:
    client = LanguageClient(protocol_cls=RecordingProtocol, converter_factory=default_converter)
    register_lsp_features(client)

    @client.feature("client/registerCapability")
    def register_capability(ls: LanguageClient, params: Any) -> None:
        return None

    return client


def capabilities(pull: bool = False, snippets: bool = True, encodings: list[str] | None = None) \
        -> types.ClientCapabilities:
    caps = client_capabilities("visual-studio-code")
    assert caps.text_document is not None
    caps.text_document.diagnostic = types.DiagnosticClientCapabilities(related_document_support=True) if pull \
        else None
    if pull:
        caps.workspace = caps.workspace or types.WorkspaceClientCapabilities()
        caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    completion = caps.text_document.completion
    if completion is not None and completion.completion_item is not None:
        completion.completion_item.snippet_support = snippets
    if encodings is not None:
        caps.general = types.GeneralClientCapabilities(position_encodings=encodings)
    return caps


async def start(client: LanguageClient, root: Path, caps: types.ClientCapabilities) -> types.InitializeResult:
    client.set_configuration(SETTINGS, section="contextAssembly")
    return await client.initialize_session(types.InitializeParams(
        capabilities=caps, root_uri=root.as_uri(),
        initialization_options={"settings": SETTINGS},
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")]))


async def diagnostics_for(client: LanguageClient, uri: str, version: int | None = None,
                          timeout: float = 20.0) -> list[types.Diagnostic]:
    """The latest diagnostics published for `uri` (at `version` when given)."""
    protocol: RecordingProtocol = client.protocol  # type: ignore[assignment]
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        for params in reversed(protocol.published):
            if params.uri == uri and (version is None or params.version == version):
                return list(params.diagnostics)
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise AssertionError(f"no diagnostics for {uri} at version {version}")
        protocol.published_event.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(protocol.published_event.wait(), remaining)


def open_doc(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    language = "yaml" if path.suffix in (".yaml", ".yml") else "json"
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id=language, version=version, text=path.read_text() if text is None else text)))
    return uri


def change_doc(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def position_of(text: str, needle: str, delta: int = 0, encoding: str = "utf-16") -> types.Position:
    """The LSP position of `needle` (+ delta characters) in `text`."""
    offset = text.index(needle) + delta
    before = text[:offset]
    line = before.count("\n")
    column_text = before[before.rfind("\n") + 1:]
    units = {"utf-16": len(column_text.encode("utf-16-le")) // 2, "utf-8": len(column_text.encode()),
             "utf-32": len(column_text)}[encoding]
    return types.Position(line=line, character=units)
