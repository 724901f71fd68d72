"""Editor documents: recognising definition files, parsing them once per version, and the
workspace as the editor sees it (open documents laid over what is on disk)."""

from __future__ import annotations

import re
import threading
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from ..documents import ParsedDocument, parse_document
from ..model.problems import Problem
from ..rules.dialects import detect_dialect
from ..workspace.layout import DEFINITION_FILES, WorkspaceLayout
from ..workspace.loader import KINDS, SourceFile, Workspace, collect_memories, prepare_source
from ..workspace.places import Places
from ..workspace.uris import uri_to_path

# `$schema` fragments -> kind, for definition files outside their usual directory
SCHEMA_KINDS = (("rule-engine", "rule-engine"), ("persistent-memory", "persistent-memory"),
                ("context-rules", "context-rules"), ("ingestion-pipeline", "ingestion-pipeline"),
                ("graph-view", "graph-view"), ("rule-test", "rule-test"))
# a key only one rule dialect has (seed-004: condition/action, seed-003: when/then), as YAML or JSON writes it
_DIALECT_KEY = re.compile(r"""(?:^|[\s{,"'])(condition|action|when|then)["']?[ \t]*:""", re.MULTILINE)
Position = dict[str, int]
Range = dict[str, Position]


def kind_of_path(path: Path, root: Path) -> str | None:
    """The definition kind of a file by where it lives under `.codebolt/`, else None."""
    layout = WorkspaceLayout(root)
    for kind, attribute in DEFINITION_FILES.items():
        named: Path = getattr(layout, attribute)
        if path == named or path.name == named.name and path.parent.name == ".codebolt":
            return kind
    for kind, (attribute, suffixes) in KINDS.items():
        directory: Path = getattr(layout, attribute)
        if path.parent == directory and path.suffix in suffixes:
            return kind
    # another root: recognise by the directory names alone
    parts = PurePosixPath(path.as_posix()).parts
    if ".codebolt" in parts:
        for kind, (attribute, suffixes) in KINDS.items():
            relative = getattr(layout, attribute).relative_to(layout.codebolt).parts
            if tuple(parts[-1 - len(relative):-1]) == relative and path.suffix in suffixes:
                return kind
    return None


def kind_of_schema(value: Any) -> str | None:
    schema = value.get("$schema") if isinstance(value, dict) else None
    if isinstance(schema, str):
        for fragment, kind in SCHEMA_KINDS:
            if fragment in schema:
                return kind
    return None


@attrs.define(eq=False)
class EditorDocument:
    """One open (or on-disk) definition document at one version."""

    uri: str
    version: int | None
    text: str
    path: Path
    relpath: str
    kind: str  # a kind of workspace/layout.DEFINITION_DIRS or DEFINITION_FILES (settings)
    parsed: ParsedDocument
    source: SourceFile  # as the workspace loader would have read it (dialect, normalised rules)
    places: Places  # the workspace it was named against: other files' URIs in the client's spelling
    # outside the workspace root (another project's `.codebolt/` open in the same window): never
    # part of this workspace, checked on its own (editor/diagnostics.py)
    outside: bool = False

    @property
    def dialect(self) -> str:
        if self.source.dialect is not None:
            return self.source.dialect
        if self.kind != "context-rules":
            return "canonical"
        # a context-rule file that does not parse (being typed): the dialect its keys name so far,
        # else the one its suffix suggests, as the loader decides a file without those keys
        written = _DIALECT_KEY.search(self.text)
        return detect_dialect({written.group(1): None} if written else {}, self.path.suffix)

    @property
    def value(self) -> Any:
        return self.parsed.value

    @property
    def kind_format(self) -> str:
        return self.parsed.kind

    # positions ---------------------------------------------------------------------------------

    def position(self, offset: int, encoding: str) -> Position:
        line, character = self.parsed.lines.offset_to_position(offset, encoding)
        return {"line": line, "character": character}

    def range(self, start: int, end: int, encoding: str) -> Range:
        return {"start": self.position(start, encoding), "end": self.position(end, encoding)}

    def offset(self, position: Position, encoding: str) -> int:
        return self.parsed.lines.position_to_offset(position["line"], position["character"], encoding)


def build_document(uri: str, text: str, version: int | None, root: Path | Places,
                   previous: EditorDocument | None = None) -> EditorDocument | None:
    """The document when `uri` is a definition file (by path under `.codebolt/`, else by `$schema`).
    `previous`, the same document at an earlier version, makes the work incremental."""
    path = uri_to_path(uri)
    if path is None:
        return None
    places = Places.of(root)
    relpath = places.relpath(path)
    # a workspace file's kind by its relpath, whichever spelling (symlinks) the uri took to it
    kind = kind_of_path(places.path(relpath) if relpath is not None else path, places.client_root)
    parsed = parse_document(text, path.name, previous.parsed if previous is not None else None)
    if kind is None:
        kind = kind_of_schema(parsed.value)
        if kind is None:
            return None
    outside = relpath is None
    if relpath is None:
        relpath = path.as_posix()
    # the previous version's per-rule work (structure, schema, meaning) is reused for unchanged rules
    memo = previous.source.memo if previous is not None and previous.kind == kind else None
    source = SourceFile(path, relpath, kind, parsed, (0, 0)) if memo is None \
        else SourceFile(path, relpath, kind, parsed, (0, 0), memo=memo)
    for issue in parsed.syntax_errors:
        line, column = parsed.lines.line_col(issue.start)
        end_line, end_column = parsed.lines.line_col(issue.end)
        source.problems.append(Problem(issue.message, "syntax", path="", line=line, column=column,
                                       end_line=end_line, end_column=end_column))
    prepare_source(source)
    return EditorDocument(uri, version, text, path, relpath, kind, parsed, source, places, outside)


class DocumentStore:
    """Open documents by URI, parsed once per version. Thread-safe."""

    def __init__(self, root: Path | Places) -> None:
        self.places = Places.of(root)  # the client's spelling of the root, which documents map through
        self._docs: dict[str, EditorDocument] = {}
        # uri -> relpath of every open document that was a definition at some version: one known
        # by `$schema` alone stops being one when an edit breaks it, and its diagnostics must go too
        self._known: dict[str, str] = {}
        self._lock = threading.Lock()

    def update(self, uri: str, text: str, version: int | None) -> EditorDocument | None:
        with self._lock:
            current = self._docs.get(uri)
            if current is not None and current.version == version and version is not None \
                    and current.text == text:
                return current
            # an older snapshot (a worker done late) is answered for, but never replaces a newer text
            stale = current is not None and current.version is not None and version is not None \
                and current.version > version
        document = build_document(uri, text, version, self.places, None if stale else current)
        if stale:
            return document
        with self._lock:
            if document is None:
                self._docs.pop(uri, None)
            else:
                self._docs[uri] = document
                self._known[uri] = document.relpath
        return document

    def get(self, uri: str) -> EditorDocument | None:
        with self._lock:
            return self._docs.get(uri)

    def known(self, uri: str) -> str | None:
        """The relpath of `uri` when it was a definition at some version since it was opened."""
        with self._lock:
            return self._known.get(uri)

    def close(self, uri: str) -> str | None:
        """Forget `uri`; its relpath when it was a definition at some version (see `known`)."""
        with self._lock:
            self._docs.pop(uri, None)
            return self._known.pop(uri, None)

    def all(self) -> list[EditorDocument]:
        with self._lock:
            return list(self._docs.values())


def overlay(workspace: Workspace, documents: list[EditorDocument]) -> Workspace:
    """The workspace with the open documents' unsaved text in place of their files on disk."""
    if not documents:
        return workspace
    files = dict(workspace.files)
    changed = memories_changed = False
    for document in documents:
        if document.kind in DEFINITION_FILES or document.outside:
            continue  # not a workspace file: the settings are read from disk (load_settings); another root's
        on_disk = files.get(document.relpath)
        if on_disk is not document.source:
            files[document.relpath] = document.source
            changed = True
            memories_changed |= "persistent-memory" in (document.kind, on_disk.kind if on_disk else None)
    if not changed:
        return workspace
    if not memories_changed:
        return attrs.evolve(workspace, files=files)
    memories, memory_sources = collect_memories(files)
    return attrs.evolve(workspace, files=files, memories=memories, memory_sources=memory_sources)


def load_document(uri: str, root: Path | Places) -> EditorDocument | None:
    """A definition file read from disk (for references and rename across closed files)."""
    path = uri_to_path(uri)
    if path is None or not path.is_file():
        return None
    return build_document(uri, path.read_text(encoding="utf-8", errors="replace"), None, root)


def document_from_source(source: SourceFile, places: Places) -> EditorDocument:
    """A workspace file (not open in the editor) as an editor document, named as the client names it."""
    path = places.path(source.relpath)
    return EditorDocument(path.as_uri(), None, source.document.text, path, source.relpath, source.kind,
                          source.document, source, places)
