"""Incremental `didChange` changes are applied with LSP's line breaks and the negotiated column
encoding: a U+2028 in a string does not move later changes (pygls' own code would), several changes
in one notification apply in order, and a whole-text change replaces the text."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import hypothesis.strategies as st
import pytest
import pytest_lsp
from hypothesis import given
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from context_assembly.lsp.text_sync import TextSync

from .editor_support import capabilities, diagnostics_for, make_editor_client, open_doc, start, workspace_copy
from .support import SERVER

CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_editor_client)
UNITS = {"utf-8": lambda s: len(s.encode("utf-8", "surrogatepass")),
         "utf-16": lambda s: len(s.encode("utf-16-le", "surrogatepass")) // 2, "utf-32": len}


def reference_offset(text: str, line: int, character: int, encoding: str) -> int:
    """An LSP position as a `str` offset, the slow and obvious way."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = len(text) if line + 1 >= len(starts) else starts[line + 1]
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    offset = start
    while offset < end and UNITS[encoding](text[start : offset + 1]) <= character:
        offset += 1
    return offset


def partial(line: int, character: int, end_line: int, end_character: int, text: str) \
        -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(line, character), types.Position(end_line, end_character)), text=text)


TEXTS = st.text(alphabet="ab\n\r\u2028😀é ", max_size=12)


@given(TEXTS, st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.integers(0, 4), st.integers(0, 6), TEXTS),
                       max_size=4), st.sampled_from(sorted(UNITS)))
def test_changes_apply_as_lsp_counts_positions(text: str, changes: list[tuple[int, int, int, int, str]],
                                               encoding: str) -> None:
    sync = TextSync()
    expected = text
    events = []
    for line, character, end_line, end_character, inserted in changes:
        (line, character), (end_line, end_character) = sorted([(line, character), (end_line, end_character)])
        start = reference_offset(expected, line, character, encoding)
        end = max(start, reference_offset(expected, end_line, end_character, encoding))
        expected = expected[:start] + inserted + expected[end:]
        events.append(partial(line, character, end_line, end_character, inserted))
    assert sync.apply("file:///a.json", text, events, encoding) == expected
    # one notification or one per change: the same text
    step_by_step, current = TextSync(), text
    for event in events:
        current = step_by_step.apply("file:///a.json", current, [event], encoding)
    assert current == expected


def test_a_whole_text_change_and_a_stale_index() -> None:
    sync = TextSync()
    assert sync.apply("u", "abc", [partial(0, 1, 0, 2, "X")], "utf-16") == "aXc"
    assert sync.apply("u", "new\ntext", [types.TextDocumentContentChangeWholeDocument(text="whole")],
                      "utf-16") == "whole"
    # the text changed under the cache (another path set it): the index is rebuilt, not trusted
    assert sync.apply("u", "line one\nline two", [partial(1, 0, 1, 4, "LINE")], "utf-16") == "line one\nLINE two"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return workspace_copy(tmp_path_factory.mktemp("text-sync") / "ws")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    await start(lsp_client, root, capabilities())
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_an_incremental_change_after_a_line_separator_in_a_string(client: LanguageClient, root: Path) -> None:
    lines = ['{"id": "sync", "name": "one\u2028two 😀",', ' "rules": [{"id": "r", "when": [{"field": "input.text",',
             '  "operator": "contains", "value": "x"}], "then": {}}]}']
    uri = open_doc(client, root / ".codebolt" / "context-rule-engines" / "sync.json", "\n".join(lines))
    assert await diagnostics_for(client, uri, version=1) == []
    at = lines[2].index('"contains"') + 1
    # two changes in one notification: "contains" -> "containz", then a word into the name (line 0,
    # after the emoji: UTF-16 columns)
    name_end = len(lines[0].encode("utf-16-le")) // 2 - 2
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[partial(2, at + 7, 2, at + 8, "z"), partial(0, name_end, 0, name_end, " three")]))
    found = await diagnostics_for(client, uri, version=2)
    assert [d.code for d in found] == ["unknown-operator"]
    assert found[0].range.start == types.Position(2, at - 1)
    # pygls' own code (lines split at U+2028 too) would have put the first change on the wrong line
    result = await client.protocol.send_request_async("contextRuleEngine/validate", {"uri": uri})
    assert [e["code"] for e in result["errors"]] == ["unknown-operator"]
