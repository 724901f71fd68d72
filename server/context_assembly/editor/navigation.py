"""Navigation (LSP shape): document symbols, go to definition / references / rename of a memory
id across every rule file and rule-test file of the workspace, and folding ranges."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from ..errors import ConflictError, ContextAssemblyError, InvalidParamsError, RequestFailedError
from ..schemas.fragments import FILE_ID_PATTERN
from ..workspace.loader import SourceFile, Workspace
from ..workspace.places import Places
from . import context as ctx
from . import tests
from .documents import EditorDocument, document_from_source

# SymbolKind
MODULE, CLASS, METHOD, FIELD = 2, 5, 6, 8
RULE_KINDS = ("rule-engine", "context-rules")
REFERRING_KINDS = (*RULE_KINDS, "rule-test")  # the files that name memory ids


def _location(document: EditorDocument, span: tuple[int, int], encoding: str) -> dict[str, Any]:
    return {"uri": document.uri, "range": document.range(span[0], span[1], encoding)}


def memory_id_at(document: EditorDocument, offset: int, workspace: Workspace) -> str | None:
    cursor = ctx.cursor_at(document, offset)
    word = document.text[cursor.start:cursor.end]
    if cursor.part != "value":
        return None
    if _names_memory(document.kind, cursor.tokens) and word in workspace.memories:
        return word
    if document.kind == "persistent-memory" and cursor.tokens in (("id",), ("name",)):
        return next((m for m, s in workspace.memory_sources.items() if s.relpath == document.relpath), None)
    return None


def _walk(value: Any, tokens: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield tokens, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, (*tokens, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, (*tokens, str(i)))


def _names_memory(kind: str, tokens: tuple[str, ...]) -> bool:
    """Whether the value at `tokens` in a file of `kind` is a memory reference."""
    if kind == "rule-test":  # expectations: memories_included / _excluded, an item's `memory`
        return tests.place(tokens) == "memory"
    return ctx.is_reference(ctx.Cursor(0, tokens, "value", 0, 0, False, ""))


def _reference_spans(source: SourceFile, memory_id: str) -> list[tuple[int, int]]:
    if source.value is None:
        return []
    spans = []
    for tokens, value in _walk(source.value):
        if value == memory_id and tokens and _names_memory(source.kind, tokens):
            span = source.document.span(list(tokens))
            if span is not None:
                spans.append(span)
    return spans


def _inner(document: EditorDocument, span: tuple[int, int]) -> tuple[int, int]:
    """The span without its quotes (a string value)."""
    text = document.text[span[0]:span[1]]
    return (span[0] + 1, span[1] - 1) if len(text) >= 2 and text[0] in "\"'" and text[-1] == text[0] else span


def _document(source: SourceFile, open_docs: dict[str, EditorDocument], places: Places) -> EditorDocument:
    return open_docs.get(source.relpath) or document_from_source(source, places)


def _places(workspace: Workspace, places: Places | None) -> Places:
    """The client's spelling of the workspace (`places`); without one, the workspace's own root."""
    return places if places is not None else Places.of(workspace.root)


def definition(memory_id: str, workspace: Workspace, open_docs: dict[str, EditorDocument],
               encoding: str, places: Places | None = None) -> dict[str, Any] | None:
    source = workspace.memory_sources.get(memory_id)
    if source is None:
        return None
    document = _document(source, open_docs, _places(workspace, places))
    pointer = "/id" if isinstance(source.value, dict) and "id" in source.value else "/name"
    span = document.parsed.span(pointer) or (0, 0)
    return _location(document, span, encoding)


def references(memory_id: str, workspace: Workspace, open_docs: dict[str, EditorDocument], encoding: str,
               include_declaration: bool = True, places: Places | None = None) -> list[dict[str, Any]]:
    places = _places(workspace, places)
    found = []
    if include_declaration:
        where = definition(memory_id, workspace, open_docs, encoding, places)
        if where is not None:
            found.append(where)
    for source in workspace.files.values():
        if source.kind in REFERRING_KINDS:
            document = _document(source, open_docs, places)
            found += [_location(document, span, encoding) for span in _reference_spans(source, memory_id)]
    return found


def _rename_problem(memory_id: str, new_id: str, workspace: Workspace) -> ContextAssemblyError | None:
    if not re.fullmatch(FILE_ID_PATTERN, new_id):
        message = f"'{new_id}' is not a memory id: letters, digits, '_', '.' and '-', not starting with '.' or '-'"
        return InvalidParamsError(message, [{"path": "/newName", "message": message}])
    if new_id != memory_id and new_id in workspace.memories:
        return ConflictError(f"a memory '{new_id}' exists already")
    return None


def rename(memory_id: str, new_id: str, workspace: Workspace, open_docs: dict[str, EditorDocument],
           encoding: str, file_renames: bool = False, places: Places | None = None) -> dict[str, Any]:
    """A workspace edit touching the definition's id and every reference, and renaming the
    definition's file where the file's name is its id (the repository finds definitions by file
    name): then `documentChanges`, the text edits followed by the file's rename, which the editor
    must support (`file_renames`). Refused (an error, nothing changed) for a name that is no memory
    id, one another memory has, or a file rename the editor cannot make."""
    problem = _rename_problem(memory_id, new_id, workspace)
    if problem is not None:
        raise problem
    places = _places(workspace, places)
    changes: dict[str, list[dict[str, Any]]] = {}

    def replace(document: EditorDocument, span: tuple[int, int]) -> None:
        start, end = _inner(document, span)
        quoted = (start, end) != span
        text = new_id if quoted or document.kind_format == "yaml" else json.dumps(new_id)
        changes.setdefault(document.uri, []).append({"range": document.range(start, end, encoding), "newText": text})

    source = workspace.memory_sources.get(memory_id)
    if source is not None and isinstance(source.value, dict) and source.value.get("id") == memory_id:
        document = _document(source, open_docs, places)
        span = document.parsed.span("/id")
        if span is not None:
            replace(document, span)
    for referring in workspace.files.values():
        if referring.kind in REFERRING_KINDS:
            document = _document(referring, open_docs, places)
            for span in _reference_spans(referring, memory_id):
                replace(document, span)
    if source is None or source.path.stem != memory_id or new_id == memory_id:
        return {"changes": changes}
    target = source.path.with_name(new_id + source.path.suffix)
    if not file_renames:
        raise RequestFailedError(f"renaming '{memory_id}' renames its file {source.relpath} too, which this "
                                 "editor cannot do in a rename (no 'rename' resource operation): rename the file, "
                                 "then the references")
    if target.exists():
        raise ConflictError(f"{target.name} exists already beside {source.relpath}")
    versions = {d.uri: d.version for d in open_docs.values()}
    edits: list[dict[str, Any]] = [{"textDocument": {"uri": uri, "version": versions.get(uri)}, "edits": found}
                                   for uri, found in changes.items()]
    moved = _document(source, open_docs, places).uri
    new_uri = places.uri(PurePosixPath(source.relpath).with_name(target.name).as_posix())
    return {"documentChanges": [*edits, {"kind": "rename", "oldUri": moved, "newUri": new_uri}]}


def _symbol(document: EditorDocument, name: str, kind: int, pointer: str, encoding: str,
            children: list[dict[str, Any]] | None = None, detail: str | None = None) -> dict[str, Any] | None:
    span = document.parsed.span(pointer)
    if span is None:
        return None
    rng = document.range(span[0], span[1], encoding)
    out: dict[str, Any] = {"name": name or "(unnamed)", "kind": kind, "range": rng, "selectionRange": rng}
    if detail:
        out["detail"] = detail
    if children:
        out["children"] = children
    return out


def document_symbols(document: EditorDocument, encoding: str = "utf-16") -> list[dict[str, Any]]:
    value = document.value
    if value is None:
        return []
    symbols: list[dict[str, Any] | None] = []
    if document.kind == "rule-engine" and isinstance(value, dict):
        rules: list[Any] = value["rules"] if isinstance(value.get("rules"), list) else []
        children = [_symbol(document, str(r.get("id") or r.get("name") or i), METHOD, f"/rules/{i}", encoding,
                            detail=r.get("name") if isinstance(r.get("name"), str) else None)
                    for i, r in enumerate(rules) if isinstance(r, dict)]
        symbols.append(_symbol(document, str(value.get("id") or document.path.stem), CLASS, "", encoding,
                               [c for c in children if c]))
    elif document.kind == "context-rules":
        for rule in document.source.rules:
            symbols.append(_symbol(document, str(rule.rule.get("id")), METHOD, rule.pointer, encoding))
    elif document.kind == "persistent-memory" and isinstance(value, dict):
        retrieval = value.get("retrieval") if isinstance(value.get("retrieval"), dict) else None
        base = "/retrieval/pipeline" if retrieval is not None else "/pipeline"
        steps = (retrieval or value).get("pipeline")
        children = [_symbol(document, str(s.get("type", s.get("step"))), FIELD, f"{base}/{i}", encoding,
                            detail=s.get("alias") if isinstance(s.get("alias"), str) else None)
                    for i, s in enumerate(steps if isinstance(steps, list) else []) if isinstance(s, dict)]
        symbols.append(_symbol(document, str(value.get("id") or value.get("name") or document.path.stem), MODULE,
                               "", encoding, [c for c in children if c]))
    return [s for s in symbols if s]


def folding_ranges(document: EditorDocument) -> list[dict[str, int]]:
    """Objects and arrays that span lines (JSON: brackets outside strings; YAML: indentation)."""
    lines = document.parsed.lines
    ranges = []
    if document.kind_format == "json":
        stack: list[int] = []
        in_string = escaped = False
        for i, ch in enumerate(document.text):
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                stack.append(i)
            elif ch in "}]" and stack:
                start_line, end_line = lines.line_of(stack.pop()), lines.line_of(i)
                if end_line > start_line:
                    ranges.append({"startLine": start_line, "endLine": end_line - 1})
        return sorted(ranges, key=lambda r: (r["startLine"], r["endLine"]))
    indents: list[tuple[int, int]] = []  # (indent, line)
    count = lines.line_count()
    last_content = 0
    for line in range(count):
        text = lines.line_text(line)
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        indent = len(text) - len(text.lstrip())
        while indents and indents[-1][0] >= indent:
            _, start = indents.pop()
            if last_content > start:
                ranges.append({"startLine": start, "endLine": last_content})
        indents.append((indent, line))
        last_content = line
    while indents:
        _, start = indents.pop()
        if last_content > start:
            ranges.append({"startLine": start, "endLine": last_content})
    return sorted(ranges, key=lambda r: (r["startLine"], r["endLine"]))
