"""Code actions (LSP shape): a quick fix for every fixable diagnostic (did-you-mean candidates,
alias → canonical spelling, a missing rule id) and "rewrite this file in the canonical format"
for the seed-004/003 rule dialects and the seed-002 memory shorthand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..documents.pointers import resolve_pointer
from ..pipelines.shorthand import is_shorthand, normalise_memory
from ..rules.dialects import normalise_file
from ..workspace.layout import WorkspaceLayout
from ..workspace.places import CODEBOLT, Places
from .capabilities import QUICKFIX, REWRITE
from .documents import EditorDocument, Range


def _literal(document: EditorDocument, rng: Range, value: str, encoding: str) -> str:
    """`value` spelled like the text it replaces: quoted when that was quoted (or in JSON)."""
    start = document.offset(rng["start"], encoding)
    original = document.text[start:start + 1]
    if document.kind_format == "json" or original in "\"'" and original:
        return json.dumps(value)
    return value


def _fix(document: EditorDocument, diagnostic: dict[str, Any], title: str, new_text: str,
         rng: Range | None = None, preferred: bool = False) -> dict[str, Any]:
    edit = {"range": rng or diagnostic["range"], "newText": new_text}
    action: dict[str, Any] = {"title": title, "kind": QUICKFIX, "diagnostics": [diagnostic],
                              "edit": {"changes": {document.uri: [edit]}}}
    if preferred:
        action["isPreferred"] = True
    return action


def _replaceable(document: EditorDocument, diagnostic: dict[str, Any], encoding: str) -> bool:
    """Whether the diagnostic's range is exactly the string its pointer names in this version: a
    replacement takes the place of that text (a dialect's problem may name a whole list or action)."""
    data = diagnostic.get("data")
    pointer = data.get("pointer") if isinstance(data, dict) else None
    if not isinstance(pointer, str) or document.value is None \
            or not isinstance(resolve_pointer(document.value, pointer), str):
        return False
    rng = diagnostic["range"]
    span = document.parsed.span(pointer)
    return span == (document.offset(rng["start"], encoding), document.offset(rng["end"], encoding))


def quick_fixes(document: EditorDocument, diagnostic: dict[str, Any], encoding: str) -> list[dict[str, Any]]:
    data: dict[str, Any] = diagnostic["data"] if isinstance(diagnostic.get("data"), dict) else {}
    actions = []
    replaceable = _replaceable(document, diagnostic, encoding)
    replacement = data.get("replacement") if replaceable else None
    if isinstance(replacement, str):
        actions.append(_fix(document, diagnostic, f"Use the canonical spelling '{replacement}'",
                            _literal(document, diagnostic["range"], replacement, encoding), preferred=True))
    for i, candidate in enumerate((data.get("candidates") if replaceable else None) or []):
        if isinstance(candidate, str):
            actions.append(_fix(document, diagnostic, f"Change to '{candidate}'",
                                _literal(document, diagnostic["range"], candidate, encoding), preferred=i == 0))
    message = str(diagnostic.get("message", ""))
    if diagnostic.get("code") == "schema" and "'id'" in message and "required" in message \
            and document.kind_format == "json" and document.value is not None:
        pointer = str(data.get("pointer", ""))
        span = document.parsed.span(pointer)
        if span is not None and document.text[span[0]] == "{":
            rule_id = _new_id(document, pointer)
            at = document.position(span[0] + 1, encoding)
            empty = resolve_pointer(document.value, pointer) == {}  # no member to separate it from
            member = f' "id": {json.dumps(rule_id)}' + (" " if empty else ",")
            actions.append(_fix(document, diagnostic, f"Add the id '{rule_id}'", member,
                                {"start": at, "end": at}, preferred=True))
    return actions


def _new_id(document: EditorDocument, pointer: str) -> str:
    tokens = [t for t in pointer.split("/") if t]
    if not tokens:
        return document.path.stem
    taken = json.dumps(document.value)
    n = int(tokens[-1]) + 1 if tokens[-1].isdigit() else 1
    while f'"rule-{n}"' in taken:
        n += 1
    return f"rule-{n}"


def rewrite_canonical(document: EditorDocument, root: Path | Places, encoding: str) -> dict[str, Any] | None:
    """A context-rule file as a canonical engine (a new file in context-rule-engines/, the old one
    deleted), or a shorthand memory definition rewritten in place."""
    value = document.value
    if value is None:
        return None
    whole = document.range(0, len(document.text), encoding)
    if document.kind == "persistent-memory" and isinstance(value, dict) and is_shorthand(value):
        canonical = normalise_memory(value, document.path.stem)
        text = json.dumps(canonical, indent=2, ensure_ascii=False) + "\n"
        return {"title": "Rewrite this file in the canonical format", "kind": REWRITE,
                "edit": {"changes": {document.uri: [{"range": whole, "newText": text}]}}}
    if document.kind != "context-rules":
        return None
    stem = document.path.stem
    _dialect, rules, problems = normalise_file(value, stem, document.path.suffix)
    if problems:
        return None
    engines_dir = _engines_dir(document, Places.of(root))
    if engines_dir is None:
        return None
    engine_id = stem.lstrip("0123456789_-") or stem
    engine = {"id": engine_id, "name": engine_id, "enabled": True, "rules": [r.rule for r in rules]}
    target_uri = (engines_dir / f"{engine_id}.json").as_uri()
    text = json.dumps(engine, indent=2, ensure_ascii=False) + "\n"
    start = {"line": 0, "character": 0}
    return {"title": f"Rewrite this file in the canonical format (context-rule-engines/{engine_id}.json)",
            "kind": REWRITE,
            "edit": {"documentChanges": [
                {"kind": "create", "uri": target_uri, "options": {"ignoreIfExists": False}},
                {"textDocument": {"uri": target_uri, "version": None},
                 "edits": [{"range": {"start": start, "end": start}, "newText": text}]},
                {"kind": "delete", "uri": document.uri},
            ]}}


def _engines_dir(document: EditorDocument, places: Places) -> Path | None:
    """Where the rewritten engine goes: beside the file, in its own project's `context-rule-engines/`
    (another project's file open in the window stays in that project), None when it has no project."""
    codebolt = next((parent for parent in document.path.parents if parent.name == CODEBOLT), None)
    if codebolt is not None:
        return WorkspaceLayout(codebolt.parent).rule_engines_dir
    return None if document.outside else places.layout.rule_engines_dir


def code_actions(document: EditorDocument, diagnostics: list[dict[str, Any]], root: Path | Places,
                 encoding: str = "utf-16", only: list[str] | None = None) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = []
    if not only or any(k.startswith(QUICKFIX) for k in only):
        for diagnostic in diagnostics:
            if diagnostic.get("source") in (None, "context-assembly"):
                actions += quick_fixes(document, diagnostic, encoding)
    if not only or any(REWRITE.startswith(k) or k.startswith("refactor") for k in only):
        rewrite = rewrite_canonical(document, root, encoding)
        if rewrite is not None:
            actions.append(rewrite)
    return actions
