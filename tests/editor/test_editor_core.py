"""The pure editor layer on big and odd documents: a 5,000-rule file, U+2028 inside strings,
YAML dialects, and the cursor on broken text."""

from __future__ import annotations

import json
import time
from pathlib import Path

from context_assembly.editor.completion import complete
from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import DocumentStore, build_document, overlay
from context_assembly.editor.hover import hover
from context_assembly.workspace.loader import load_workspace


def big_engine(n: int) -> str:
    rules = [{"id": f"r{i}", "priority": i % 7, "when": [{"field": "addVar.phase", "operator": "eq",
                                                          "value": f"p{i}"}],
              "then": {"add_memories": ["architecture-docs"]}} for i in range(n)]
    rules[-1]["when"][0]["operator"] = "eqq"
    return json.dumps({"id": "big", "rules": rules}, indent=1)


def test_five_thousand_rules(example_copy: Path) -> None:
    root = example_copy.resolve()
    workspace = load_workspace(root)
    text = big_engine(5000)
    uri = (root / ".codebolt" / "context-rule-engines" / "big.json").as_uri()
    started = time.perf_counter()
    document = build_document(uri, text, 1, root)
    assert document is not None
    found = document_diagnostics(document, overlay(workspace, [document]))
    elapsed = time.perf_counter() - started
    errors = [d for d in found if d["code"] == "unknown-operator"]
    assert len(errors) == 1 and errors[0]["data"]["pointer"] == "/rules/4999/when/0/operator"
    assert errors[0]["range"]["start"]["line"] == text[: text.rindex('"eqq"')].count("\n")
    assert elapsed < 20
    items = complete(document, text.rindex('"eqq"') + 2, workspace)
    assert "eq" in {i["label"] for i in items}


def test_store_parses_once_per_version(example_copy: Path) -> None:
    root = example_copy.resolve()
    store = DocumentStore(root)
    uri = (root / ".codebolt" / "context-rule-engines" / "x.json").as_uri()
    first = store.update(uri, '{"id": "x"}', 1)
    assert first is not None and store.update(uri, '{"id": "x"}', 1) is first
    assert store.update(uri, '{"id": "y"}', 2) is not first
    assert store.update((root / "README.md").as_uri(), "{}", 1) is None  # not a definition file


def test_schema_recognises_a_file_outside_codebolt(example_copy: Path) -> None:
    root = example_copy.resolve()
    doc = build_document((root / "draft.json").as_uri(), '{"$schema": "urn:context-assembly:schema:rule-engine"}',
                         1, root)
    assert doc is not None and doc.kind == "rule-engine"


def test_line_separator_and_emoji_positions(example_copy: Path) -> None:
    root = example_copy.resolve()
    text = ('{"id": "u", "name": "\u2028🚀", "rules": [{"id": "r", "when": [{"field": "input.text", '
            '"operator": "eqq"}]}]}')
    doc = build_document((root / ".codebolt" / "context-rule-engines" / "u.json").as_uri(), text, 1, root)
    assert doc is not None
    found = document_diagnostics(doc, overlay(load_workspace(root), [doc]))
    op = next(d for d in found if d["code"] == "unknown-operator")
    assert op["range"]["start"] == {"line": 0, "character": text.index('"eqq"') + 1}  # one emoji = 2 units
    utf32 = document_diagnostics(doc, overlay(load_workspace(root), [doc]), "utf-32")
    op32 = next(d for d in utf32 if d["code"] == "unknown-operator")
    assert op32["range"]["start"]["character"] == text.index('"eqq"')


def test_hover_and_completion_on_yaml_dialect(example_copy: Path) -> None:
    root = example_copy.resolve()
    path = root / ".codebolt" / "PersistentMemory" / "project-conventions.yaml"
    text = path.read_text()
    doc = build_document(path.as_uri(), text, 1, root)
    assert doc is not None and doc.kind == "persistent-memory"
    workspace = overlay(load_workspace(root), [doc])
    assert "markdown_read" in str(hover(doc, text.index("markdown_read") + 2, workspace))
    items = complete(doc, text.index("constraints") + 3, workspace)
    assert "knowledge" in {i["label"] for i in items}
    found = document_diagnostics(doc, workspace)
    assert any(d["code"] == "shorthand" for d in found)
    shorthand = next(d for d in found if d["code"] == "shorthand")
    assert shorthand["range"]["start"]["line"] == shorthand["range"]["end"]["line"]  # never the whole file


def test_an_edit_reuses_the_previous_version(example_copy: Path) -> None:
    """The store builds each version from the last: untouched rules keep their objects and their
    checks, and the diagnostics equal those of the new text read from scratch."""
    root = example_copy.resolve()
    workspace = load_workspace(root)
    uri = (root / ".codebolt" / "context-rule-engines" / "big.json").as_uri()
    store = DocumentStore(root)
    text = big_engine(300)
    first = store.update(uri, text, 1)
    assert first is not None
    before = document_diagnostics(first, overlay(workspace, [first]))
    first.parsed.warm()
    at = text.index('"p150"') + 2
    edited_text = text[:at] + "q" + text[at:]
    second = store.update(uri, edited_text, 2)
    assert second is not None and second.source.memo is first.source.memo
    assert sum(a is b for a, b in zip(second.value["rules"], first.value["rules"], strict=True)) == 299
    after = document_diagnostics(second, overlay(workspace, [second]))
    fresh = build_document(uri, edited_text, 2, root)
    assert fresh is not None
    assert after == document_diagnostics(fresh, overlay(workspace, [fresh]))
    assert [d["code"] for d in after] == [d["code"] for d in before]  # only the 'eqq' of the last rule
    broken = store.update(uri, edited_text.replace('"eqq"', '"eqq'), 3)
    assert broken is not None and [d["code"] for d in document_diagnostics(broken, overlay(workspace, [broken]))] \
        == ["syntax"]
