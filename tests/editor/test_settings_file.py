"""The settings file (`.codebolt/context-assembly.json`) as an editor document: schema diagnostics
with ranges, completion of keys and values (ladder strategies from the registry, schema enums) and
hover on keys and strategy names — the pure functions, called directly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from context_assembly.editor import navigation as nav
from context_assembly.editor.actions import code_actions
from context_assembly.editor.completion import complete
from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import EditorDocument, build_document, kind_of_path, overlay
from context_assembly.editor.formatting import formatted
from context_assembly.editor.hover import hover
from context_assembly.registry.ladder import LADDER, STRATEGY_NAMES
from context_assembly.schemas.validate import built_schema
from context_assembly.workspace.loader import Workspace, load_workspace
from context_assembly.workspace.settings import TOKENIZERS


@pytest.fixture
def root(example_copy: Path) -> Path:
    return example_copy.resolve()


@pytest.fixture
def workspace(root: Path) -> Workspace:
    return load_workspace(root)


def settings_document(root: Path, text: str) -> EditorDocument:
    built = build_document((root / ".codebolt" / "context-assembly.json").as_uri(), text, 1, root)
    assert built is not None
    return built


def labels(items: list[dict[str, Any]]) -> list[str]:
    return [i["label"] for i in items]


def test_the_settings_file_is_an_editor_document_of_its_own_kind(root: Path, tmp_path: Path) -> None:
    assert kind_of_path(root / ".codebolt" / "context-assembly.json", root) == "settings"
    # under another root too, and only directly in `.codebolt/`
    assert kind_of_path(tmp_path / "x" / ".codebolt" / "context-assembly.json", root) == "settings"
    assert kind_of_path(root / ".codebolt" / "PersistentMemory" / "context-assembly.json", root) \
        == "persistent-memory"
    assert kind_of_path(root / "context-assembly.json", root) is None


def test_schema_problems_are_diagnostics_on_the_offending_value(root: Path, workspace: Workspace) -> None:
    text = '{\n  "tokenizer": "words",\n  "budget": {"ladder": ["truncate", "shrink"]}\n}'
    doc = settings_document(root, text)
    found = document_diagnostics(doc, overlay(workspace, [doc]), "utf-16")
    by_line = {d["range"]["start"]["line"]: d for d in found}
    assert set(by_line) == {1, 2}
    assert all(d["code"] == "schema" and d["severity"] == 1 for d in found)
    tokenizer = by_line[1]["range"]
    assert (tokenizer["start"]["character"], tokenizer["end"]["character"]) == \
        (text.splitlines()[1].index('"words"'), text.splitlines()[1].index('"words"') + len('"words"'))
    assert text.splitlines()[2][by_line[2]["range"]["start"]["character"]:].startswith('"shrink"')


def test_a_valid_settings_file_has_no_diagnostics_and_a_broken_one_a_syntax_error(
        root: Path, workspace: Workspace) -> None:
    good = settings_document(root, json.dumps({"max_tokens": 4000, "budget": {"ladder": ["summarize"]}}))
    assert document_diagnostics(good, workspace) == []
    broken = settings_document(root, '{"max_tokens": 4000,')
    assert [d["code"] for d in document_diagnostics(broken, workspace)] == ["syntax"]


def test_an_open_settings_document_is_not_a_workspace_file(root: Path, workspace: Workspace) -> None:
    doc = settings_document(root, '{"tokenizer": "words"}')
    assert overlay(workspace, [doc]) is workspace


def test_keys_come_from_the_built_settings_schema(root: Path, workspace: Workspace) -> None:
    text = '{"tokenizer": "estimate", "": 1}'
    items = complete(settings_document(root, text), text.index('""') + 1, workspace)
    expected = set(built_schema("settings")["properties"]) - {"tokenizer"}
    assert set(labels(items)) == expected
    budget = next(i for i in items if i["label"] == "budget")
    assert budget["detail"].startswith("What the assembly does")
    nested = '{"budget": {"": 1}}'
    keys = labels(complete(settings_document(root, nested), nested.index('""') + 1, workspace))
    assert {"ladder", "relevance_floor", "keep_recent_turns", "warnings_max_tokens"} <= set(keys)


def test_ladder_values_are_the_registry_strategies_those_not_listed_first(
        root: Path, workspace: Workspace) -> None:
    text = '{"budget": {"ladder": ["summarize", "tr"]}}'
    doc = settings_document(root, text)
    items = complete(doc, text.index('"tr"') + 3, workspace)
    assert set(labels(items)) == set(STRATEGY_NAMES)
    ordered = [i["label"] for i in sorted(items, key=lambda i: i["sortText"])]
    assert ordered[-1] == "summarize"  # already in the ladder
    truncate = next(i for i in items if i["label"] == "truncate")
    assert truncate["textEdit"]["newText"] == "truncate"  # inside the string: no quotes added
    start = text.index('"tr"') + 1
    assert truncate["textEdit"]["range"]["start"]["character"] == start
    assert truncate["textEdit"]["range"]["end"]["character"] == start + 2
    assert "Hard-truncate" in truncate["documentation"]["value"]
    # a new array element outside a string gets its quotes
    empty = '{"budget": {"ladder": [ ]}}'
    first = complete(settings_document(root, empty), empty.index("[ ") + 1, workspace)
    assert set(labels(first)) == set(STRATEGY_NAMES)
    assert json.loads(first[0]["textEdit"]["newText"]) == first[0]["label"]


def test_enum_values_come_from_the_schema(root: Path, workspace: Workspace) -> None:
    text = '{"tokenizer": "", "stores": {"backend": ""}}'
    doc = settings_document(root, text)
    assert labels(complete(doc, text.index('""') + 1, workspace)) == list(TOKENIZERS)
    backends = built_schema("settings")["properties"]["stores"]["properties"]["backend"]["enum"]
    assert labels(complete(doc, text.rindex('""') + 1, workspace)) == backends
    # a value the schema does not enumerate: nothing to offer
    numbers = '{"max_tokens": 1}'
    assert complete(settings_document(root, numbers), numbers.index("1"), workspace) == []


def test_an_access_grant_gets_keys_and_hover_like_any_setting(root: Path, workspace: Workspace) -> None:
    """`access` maps token names to grants (additionalProperties): a grant's keys complete and
    hover from the schema too."""
    text = '{"access": {"reviewer": {"methods": ["memory/*"], "": 1}}}'
    doc = settings_document(root, text)
    assert set(labels(complete(doc, text.index('""') + 1, workspace))) == {"read", "write"}
    methods = hover(doc, text.index('"methods"') + 2, workspace)
    assert methods is not None and methods["contents"]["value"].startswith("**access.reviewer.methods** (setting)")
    grant = hover(doc, text.index('"reviewer"') + 2, workspace)
    assert grant is not None and "What one token name may do" in grant["contents"]["value"]


def test_hover_on_a_key_shows_its_description_and_default(root: Path, workspace: Workspace) -> None:
    text = '{"budget": {"keep_recent_turns": 2}, "tokenizer": "cl100k"}'
    doc = settings_document(root, text)
    found = hover(doc, text.index("keep_recent") + 2, workspace)
    assert found is not None
    value = found["contents"]["value"]
    assert value.startswith("**budget.keep_recent_turns** (setting)")
    assert "newest turns of a thread" in value and "Default: `4`" in value
    assert found["range"]["start"]["character"] == text.index("keep_recent")
    tokenizer = hover(doc, text.index('"tokenizer"') + 2, workspace)
    assert tokenizer is not None and "`cl100k`" in tokenizer["contents"]["value"]


def test_hover_on_a_strategy_name_shows_the_registry_entry(root: Path, workspace: Workspace) -> None:
    text = '{"budget": {"ladder": ["compress_turns", "nonsense"]}}'
    doc = settings_document(root, text)
    found = hover(doc, text.index("compress") + 3, workspace)
    assert found is not None
    strategy = next(s for s in LADDER if s.name == "compress_turns")
    assert strategy.description in found["contents"]["value"]
    assert "`budget.keep_recent_turns`" in found["contents"]["value"]
    assert hover(doc, text.index("nonsense") + 2, workspace) is None


def test_the_other_features_answer_on_a_settings_document(root: Path, workspace: Workspace) -> None:
    text = '{\n  "budget": {\n    "ladder": ["truncate"]\n  }\n}'
    doc = settings_document(root, text)
    assert nav.document_symbols(doc) == []
    assert {"startLine": 1, "endLine": 2} in [{k: r[k] for k in ("startLine", "endLine")}
                                            for r in nav.folding_ranges(doc)]
    assert code_actions(doc, document_diagnostics(doc, workspace), root) == []
    assert nav.memory_id_at(doc, text.index("truncate"), workspace) is None
    # formatted in the settings schema's key order (the kind names the schema)
    unordered = settings_document(root, json.dumps({"budget": {"summary_tokens": 5, "ladder": ["truncate"]},
                                                    "tokenizer": "o200k"}))
    assert list(json.loads(formatted(unordered) or "")) == ["tokenizer", "budget"]
    assert list(json.loads(formatted(unordered) or "")["budget"]) == ["ladder", "summary_tokens"]
    broken = settings_document(root, '{"budget": {"ladder": ["tr')
    assert set(labels(complete(broken, len(broken.text), workspace))) == set(STRATEGY_NAMES)
    assert hover(broken, len(broken.text) - 1, workspace) is None  # "tr" names no strategy
