"""textDocument/formatting and rangeFormatting end to end: the edits format the open (unsaved)
text, touch only the lines that change, keep YAML comments, and a broken document gets none."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from context_assembly.formatting import format_text

from ..editor_support import capabilities, make_editor_client, open_doc, start
from ..editor_support import workspace_copy as copy
from ..support import SERVER

pytestmark = pytest.mark.asyncio(loop_scope="module")
CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_editor_client)
OPTIONS = types.FormattingOptions(tab_size=8, insert_spaces=False)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy(tmp_path_factory.mktemp("editor-formatting") / "ws")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    result = await start(lsp_client, root, capabilities())
    assert result.capabilities.document_formatting_provider
    assert result.capabilities.document_range_formatting_provider
    yield
    await lsp_client.shutdown_session()


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """The client's side: apply the edits (ASCII text, so UTF-16 columns are characters)."""
    starts = [0]
    for index, ch in enumerate(text):
        if ch == "\n":
            starts.append(index + 1)

    def offset(position: types.Position) -> int:
        return starts[position.line] + position.character if position.line < len(starts) else len(text)

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for begin, end, new in spans:
        text = text[:begin] + new + text[end:]
    return text


async def format_doc(client: LanguageClient, uri: str) -> list[types.TextEdit] | None:
    return await client.text_document_formatting_async(types.DocumentFormattingParams(
        text_document=types.TextDocumentIdentifier(uri), options=OPTIONS))


async def test_formatting_the_unsaved_text_gives_the_formatter_s_result(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "context-rule-engines" / "fmt.json"
    text = json.dumps({"rules": [{"then": {"add_memories": ["architecture-docs"]}, "id": "r",
                                  "when": [{"value": "x", "operator": "eq", "field": "addVar.phase"}]}],
                       "id": "fmt"}, indent=4)
    uri = open_doc(client, path, text)
    edits = await format_doc(client, uri)
    assert edits
    formatted = apply(text, edits)
    assert formatted == format_text(text, "fmt.json", "rule-engine")
    assert not path.exists(), "formatting edits the buffer, never the disk"


async def test_an_already_formatted_document_gets_no_edits(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "context-rule-engines" / "planning.json"
    edits = await format_doc(client, open_doc(client, path))
    assert edits is not None and list(edits) == []


async def test_only_changed_lines_are_edited(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "context-rule-engines" / "review.json"
    text = path.read_text()
    broken_indent = text.replace('\n  "name"', '\n        "name"', 1)
    edits = await format_doc(client, open_doc(client, path, broken_indent, version=2))
    assert edits is not None and len(edits) == 1
    assert edits[0].range.start.line == edits[0].range.end.line - 1
    assert apply(broken_indent, edits) == text


async def test_range_formatting_keeps_to_the_selection(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "PersistentMemory" / "recent-history.json"
    text = path.read_text()
    lines = text.split("\n")
    lines[1] = "      " + lines[1].lstrip()
    lines[-3] = "          " + lines[-3].lstrip()
    messy = "\n".join(lines)
    uri = open_doc(client, path, messy, version=3)
    edits = await client.text_document_range_formatting_async(types.DocumentRangeFormattingParams(
        text_document=types.TextDocumentIdentifier(uri), options=OPTIONS,
        range=types.Range(types.Position(0, 0), types.Position(2, 0))))
    assert edits is not None and len(edits) == 1 and edits[0].range.start.line == 1
    assert apply(messy, edits).split("\n")[-3] == lines[-3], "lines outside the selection stay as they are"


async def test_yaml_comments_survive_formatting(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "ContextRuleEngine" / "03_fmt.yaml"
    text = "then:  # the action\n  always_include:\n  - path: docs/a.md\nname: fmt   # its name\nwhen:\n" \
           "  task_contains: [a]\n"
    edits = await format_doc(client, open_doc(client, path, text))
    formatted = apply(text, edits or [])
    assert formatted.startswith("name: fmt   # its name\n")
    assert "# the action" in formatted and "    - path: docs/a.md" in formatted


async def test_a_document_that_does_not_parse_gets_no_edits(client: LanguageClient, root: Path) -> None:
    path = root / ".codebolt" / "PersistentMemory" / "broken.json"
    assert await format_doc(client, open_doc(client, path, '{"id": "broken", "label": ')) is None


async def test_files_outside_codebolt_are_not_formatted(client: LanguageClient, root: Path) -> None:
    assert await format_doc(client, open_doc(client, root / "package.json", '{"b":1,  "a":2}')) is None


@pytest.mark.parametrize("text", ["- &x [*x]\n", "&x {a: *x}\n", "a: " + "[" * 300 + "]" * 300 + "\n"])
async def test_a_yaml_file_that_cannot_be_laid_out_gets_no_edits(client: LanguageClient, root: Path,
                                                                 text: str) -> None:
    # a node that contains itself (an alias inside its anchor), or nesting deeper than the round trip goes
    path = root / ".codebolt" / "ContextRuleEngine" / f"90_odd-{len(text)}.yaml"
    assert await format_doc(client, open_doc(client, path, text)) is None
