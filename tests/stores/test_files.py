"""File-backed stores: markdown notes under .codebolt/memory/ and read-only workspace files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.errors import InvalidParamsError, StorageError
from context_assembly.stores import interfaces
from context_assembly.stores.files import MarkdownNotes, WorkspaceFiles
from context_assembly.workspace.layout import WorkspaceLayout


@pytest.fixture
def notes(tmp_path: Path) -> MarkdownNotes:
    layout = WorkspaceLayout(tmp_path)
    return MarkdownNotes(layout.memory_dir, layout.locks_dir)


def test_interfaces(notes: MarkdownNotes, tmp_path: Path) -> None:
    assert isinstance(notes, interfaces.NoteStore)
    assert isinstance(WorkspaceFiles(tmp_path), interfaces.FileReader)


def test_notes_are_real_files(notes: MarkdownNotes, tmp_path: Path) -> None:
    assert notes.read("architecture-notes") is None
    info = notes.write("architecture-notes", "# Architecture\n\nWe use SQLite. ✓\n")
    assert info.name == "architecture-notes" and info.size > 0
    path = tmp_path / ".codebolt" / "memory" / "architecture-notes.md"
    assert path.read_text(encoding="utf-8") == "# Architecture\n\nWe use SQLite. ✓\n"
    assert notes.read("architecture-notes.md") is None  # names are exact here: markdown:// drops a written `.md`
    path.write_text("edited by a person\n", encoding="utf-8")
    assert notes.read("architecture-notes") == "edited by a person\n"
    assert notes.delete("architecture-notes") is True
    assert notes.delete("architecture-notes") is False
    assert not path.exists()


def test_nested_notes_and_listing(notes: MarkdownNotes, tmp_path: Path) -> None:
    notes.write("decisions/auth", "a")
    notes.write("decisions/storage", "b")
    notes.write("style-guide", "c")
    memory = tmp_path / ".codebolt" / "memory"
    (memory / "context").mkdir()
    (memory / "context" / "snap.json").write_text("{}")  # snapshots are not notes
    (memory / ".draft.md").write_text("hidden")
    (memory / ".style-guide.md.0123abcd.tmp").write_text("a temp file left by a crash")
    (memory / "readme.txt").write_text("not markdown")
    assert [n.name for n in notes.list()] == ["decisions/auth", "decisions/storage", "style-guide"]
    assert [n.name for n in notes.list("decisions/")] == ["decisions/auth", "decisions/storage"]


def test_note_generation_changes_on_write_and_delete_only(notes: MarkdownNotes) -> None:
    empty = notes.generation()
    notes.write("a", "one")
    first = notes.generation()
    assert first != empty
    notes.read("a")
    notes.list()
    assert notes.generation() == first
    notes.write("a", "two!")
    second = notes.generation()
    assert second != first
    notes.write("sub/b", "x")
    third = notes.generation()
    assert third != second
    notes.delete("sub/b")
    assert notes.generation() != third


def test_notes_refuse_bad_names_and_values(notes: MarkdownNotes) -> None:
    for name in ("", "../x", ".hidden", "a/.b", "/abs", "a\\b", "a\x00b", "a//b", "%2e%2e/x"):
        with pytest.raises(InvalidParamsError):
            notes.write(name, "x")
        with pytest.raises(InvalidParamsError):
            notes.read(name)
    with pytest.raises(InvalidParamsError):
        not_text: Any = b"bytes"
        notes.write("ok", not_text)
    with pytest.raises(InvalidParamsError):
        notes.write("ok", "\udcff")  # a lone surrogate is no text
    small = MarkdownNotes(notes.memory_dir, notes.locks_dir, max_bytes=10)
    with pytest.raises(InvalidParamsError, match="too big"):
        small.write("big", "x" * 11)


def test_note_with_invalid_utf8_is_still_readable(notes: MarkdownNotes) -> None:
    notes.write("n", "ok")
    (notes.memory_dir / "n.md").write_bytes(b"caf\xe9\n")
    assert notes.read("n") == "caf\ufffd\n"


def test_note_under_a_file_is_a_storage_error(notes: MarkdownNotes) -> None:
    notes.write("plain", "x")
    (notes.memory_dir / "plain").write_text("a file, not a folder")
    with pytest.raises(StorageError, match="folder"):
        notes.write("plain/child", "x")
    assert notes.read("plain/child") is None


def test_note_that_is_a_directory(notes: MarkdownNotes) -> None:
    (notes.memory_dir / "dir.md").mkdir(parents=True)
    assert notes.read("dir") is None
    with pytest.raises(InvalidParamsError):
        notes.write("dir", "x")
    assert notes.delete("dir") is False


# -- workspace files


def test_workspace_files_read_only_text(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "auth.py").write_text("\ufeffdef login(): ...\n", encoding="utf-8")
    files = WorkspaceFiles(tmp_path)
    assert files.read("src/auth.py") == "def login(): ...\n"  # a BOM is not content
    assert files.read("src/missing.py") is None
    assert files.read("missing-dir/x.py") is None
    assert not hasattr(files, "write") and not hasattr(files, "delete")
    with pytest.raises(InvalidParamsError, match="directory"):
        files.read("src")
    (tmp_path / "bin.dat").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InvalidParamsError, match="UTF-8"):
        files.read("bin.dat")


def test_workspace_files_size_cap(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * (1024 * 1024 + 1))
    (tmp_path / "ok.txt").write_text("x" * (1024 * 1024))
    files = WorkspaceFiles(tmp_path)
    with pytest.raises(InvalidParamsError, match="too large"):
        files.read("big.txt")
    assert len(files.read("ok.txt") or "") == 1024 * 1024


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_workspace_files_refuse_special_files(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InvalidParamsError, match="regular"):
        WorkspaceFiles(tmp_path).read("pipe")  # and does not block


def test_workspace_files_listing_and_generation(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("a")
    (tmp_path / "README.md").write_text("r")
    files = WorkspaceFiles(tmp_path)
    assert [(f.path, f.is_dir) for f in files.list()] == [("README.md", False), ("src", True)]
    assert [f.path for f in files.list("src")] == ["src/a.py"]
    assert files.list("nope") == []
    files.read("src/a.py")
    generation = files.generation()
    assert files.generation() == generation
    (tmp_path / "src" / "a.py").write_text("changed")
    assert files.generation() != generation


def _age(root: Path) -> None:
    """Every folder under `root` last modified long ago (beyond the racy window)."""
    for folder, _, _ in os.walk(root):
        os.utime(folder, ns=(0, 1_000_000_000))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["api-write", "api-delete", "new", "replace", "remove", "edit", "folder"]),
                          st.sampled_from(["a", "b", "sub/c", "sub/deeper/d"]), st.text(max_size=6)), max_size=12))
def test_watched_note_generation_agrees_with_a_full_scan(tmp_path_factory: Any, steps: list[Any]) -> None:
    root = tmp_path_factory.mktemp("notes")
    layout = WorkspaceLayout(root)
    watched = MarkdownNotes(layout.memory_dir, layout.locks_dir)
    watched.watch()
    plain = MarkdownNotes(layout.memory_dir, layout.locks_dir)
    for action, name, text in steps:
        path = layout.memory_dir / f"{name}.md"
        if action == "api-write":
            watched.write(name, text)
        elif action == "api-delete":
            watched.delete(name)
        elif action in ("new", "replace") and (action == "new" or path.exists()):
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(".tmp-" + path.name)
            temporary.write_text(text + "!")  # another process's atomic write: the folder's mtime moves
            os.replace(temporary, path)
        elif action == "remove" and path.exists():
            path.unlink()
        elif action == "edit" and path.exists():
            with open(path, "a") as handle:  # in place: only the watcher tells
                handle.write(text + "?")
            watched.changed()
        elif action == "folder":
            (layout.memory_dir / name).mkdir(parents=True, exist_ok=True)
        assert watched.generation() == plain.generation()
        if layout.memory_dir.exists():
            _age(layout.memory_dir)  # so that the next check may trust the folders' mtimes
        assert watched.generation() == plain.generation()


def test_watched_notes_skip_the_scan_until_something_changes(notes: MarkdownNotes, tmp_path: Path) -> None:
    notes.watch()
    notes.write("a", "x")
    memory_dir = notes.memory_dir
    _age(memory_dir)
    first = notes.generation()
    (memory_dir / "a.md").write_text("longer text")  # in place, unreported: the watched stamp keeps its answer
    assert notes.generation() == first
    notes.changed()
    assert notes.generation() != first
