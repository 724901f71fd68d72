"""Markdown notes (`markdown://<note>`): real files `.codebolt/memory/<note>.md` that people edit too.

Writes replace the file atomically (readers see the old text or the new, never a mix, and a crash
leaves the old one) under a workspace lock, so processes sharing the workspace take turns. The temp
files of atomic writes start with a dot and end in `.tmp`: listing shows only visible `*.md` files,
so a temp file left by a killed process never appears as a note.

`stage` prepares many notes at once for an all-or-nothing write (`memory import`): each is written
to a temp file beside its note first; `commit` then renames them all into place under the lock,
putting back the ones already replaced when a rename fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from stat import S_ISREG

from ...errors import ContextAssemblyError, StorageError
from ...workspace.atomic import remove_file, replace_all, stage_file, workspace_lock, write_atomic
from ..confine import check_relative_path, is_inside, refuse, resolve_inside
from ..interfaces import NoteInfo

SUFFIX = ".md"
MAX_NAME_BYTES = 255  # a file name (ext4, APFS, NTFS); write_atomic's temp names fit beside any
MAX_SEGMENT_BYTES = MAX_NAME_BYTES - len(SUFFIX)
_log = logging.getLogger(__name__)
SNAPSHOTS = "context"  # .codebolt/memory/context/: assembly snapshots, not notes
LOCK = "memory-notes"
MAX_NOTE_BYTES = 8 * 1024 * 1024

RACY_S = 2  # folder mtimes this recent may not show a write in the same clock tick yet

_Found = list[tuple[str, os.stat_result]]


def _folders_unchanged(folders: dict[str, int]) -> bool:
    for folder, mtime in folders.items():
        try:
            if os.stat(folder).st_mtime_ns != mtime:
                return False
        except OSError:
            if mtime != -1:
                return False
    return True


def note_name(name: object, pointer: str = "/uri") -> str:
    """The checked name of a note: its relative path without the file's `.md`, no hidden segments.
    Exact: the note of file `x.md.md` is named `x.md` (a `markdown://` URI drops one written `.md`).
    A segment longer than a file name holds (with `.md`) is refused: no such note can exist."""
    checked = check_relative_path(name, what="markdown note", pointer=pointer, allow_hidden=False)
    for segment in checked.split("/"):
        if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
            raise refuse(f"the markdown note name has a segment of more than {MAX_SEGMENT_BYTES} bytes "
                         f"({segment[:40]!r}…): a file name holds at most {MAX_NAME_BYTES} with `.md`", pointer)
    return checked


def _listable(name: str) -> bool:
    """Whether a file's note can be read back by its name: not one whose name the checks refuse
    (a drive-like `v:1`, a backslash, a control character) or that is no valid UTF-8."""
    try:
        name.encode("utf-8")
        return note_name(name) == name
    except (UnicodeEncodeError, ContextAssemblyError):
        _log.info("markdown file %r is not listed: no markdown:// name reads it", name)
        return False


class MarkdownNotes:
    def __init__(self, memory_dir: Path | str, locks_dir: Path | str, *, max_bytes: int = MAX_NOTE_BYTES) -> None:
        self.memory_dir = Path(memory_dir)
        self.locks_dir = Path(locks_dir)
        self.max_bytes = max_bytes
        self._watched = False
        self._changes = 0  # changes reported by a watcher, and writes through this object
        self._last: tuple[int, int, dict[str, int]] | None = None  # (generation, _changes, folder -> mtime)

    def path(self, name: str, pointer: str = "/uri") -> Path:
        """The real path of a note, refused when it would leave the memory directory."""
        return resolve_inside(self.memory_dir, note_name(name, pointer) + SUFFIX, what="markdown note",
                              pointer=pointer, allow_hidden=False)

    def stamp(self, names: list[str]) -> tuple[tuple[str, int, int], ...]:
        """(name, mtime_ns, size) of just these notes (-1s when missing): a cheap cache key for a
        pipeline that names its notes, instead of fingerprinting the whole folder."""
        stamps = []
        for name in names:
            try:
                stat = os.stat(self.path(name))
                stamps.append((name, stat.st_mtime_ns, stat.st_size))
            except OSError:
                stamps.append((name, -1, -1))
        return tuple(stamps)

    def read(self, name: str) -> str | None:
        target = self.path(name)
        if not target.is_file():  # missing, a folder, or something that is no regular file (a FIFO would block)
            return None
        return self._read_file(target, name)

    def read_stamped(self, name: str) -> tuple[str | None, tuple[str, int, int]]:
        """`read` and `stamp` of one note at once (its path resolved once), the stamp taken before
        the read: an edit after it shows as a different stamp."""
        target = self.path(name)
        try:
            found = os.stat(target)
        except OSError:
            return None, (name, -1, -1)
        stamp = (name, found.st_mtime_ns, found.st_size)
        return (self._read_file(target, name) if S_ISREG(found.st_mode) else None), stamp

    def _read_file(self, target: Path, name: str) -> str | None:
        try:
            with open(target, "rb") as handle:
                data = handle.read(self.max_bytes + 1)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as exc:
            raise StorageError(f"cannot read markdown note {name!r}: {exc.strerror}") from exc
        if len(data) > self.max_bytes:
            raise refuse(f"markdown note {name!r} is too big to read (more than {self.max_bytes} bytes)")
        # People edit notes by hand: a stray invalid byte should not make the whole note unreadable.
        return data.decode("utf-8", errors="replace")

    def _encode(self, text: str, pointer: str = "/value") -> bytes:
        if not isinstance(text, str):
            raise refuse("a markdown note is written from a string", pointer)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise refuse(f"the note text is not valid Unicode: {exc}", pointer) from None
        if len(data) > self.max_bytes:
            raise refuse(f"the note is too big ({len(data)} bytes; at most {self.max_bytes})", pointer)
        return data

    def _target(self, name: str, created: list[Path] | None = None) -> Path:
        """The note's file, its folder made (the folders made are added to `created`, top first)."""
        target = self.path(name)
        if target.is_dir():
            raise refuse(f"markdown note {name!r} names a directory")
        missing, folder = [], target.parent
        while created is not None and not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the folder of markdown note {name!r}: {exc.strerror}") from exc
        if created is not None:
            created += reversed(missing)
        return target

    def write(self, name: str, text: str) -> NoteInfo:
        data = self._encode(text)
        with workspace_lock(self.locks_dir, LOCK):
            target = self._target(name)  # resolved under the lock, right before the write
            write_atomic(target, data)
            self._changes += 1
            stat = target.stat()
        return NoteInfo(note_name(name), stat.st_size, stat.st_mtime)

    def stage(self, notes: Sequence[tuple[str, str]]) -> StagedNotes:
        """Each (name, text) checked as `write` checks it and written to a temp file beside its note
        (hidden: no listing shows it); nothing changes until `commit()`. A failure removes what it staged."""
        encoded = [(name, self._encode(text)) for name, text in notes]
        staged = StagedNotes(self)
        try:
            for name, data in encoded:
                target = self._target(name, staged.folders)
                staged.files.append((stage_file(target, data), target))
        except BaseException:
            staged.discard()
            raise
        return staged

    def delete(self, name: str) -> bool:
        with workspace_lock(self.locks_dir, LOCK):
            target = self.path(name)
            if target.is_dir():
                return False
            self._changes += 1
            return remove_file(target)

    def list(self, prefix: str = "") -> list[NoteInfo]:
        notes = []
        for relative, stat in self._scan()[0]:
            name = relative[: -len(SUFFIX)]
            if name.startswith(prefix) and _listable(name):
                notes.append(NoteInfo(name, stat.st_size, stat.st_mtime))
        return sorted(notes, key=lambda note: note.name)

    def watch(self, on: bool = True) -> None:
        """A file watcher reports every change under the memory folder to `changed` from now on:
        `generation` can then trust folder mtimes and those reports instead of stat-ing every note."""
        self._watched = on

    def changed(self) -> None:
        """A watcher saw a change under the memory folder (an edit in place leaves folder mtimes alone)."""
        self._changes += 1

    def generation(self) -> int:
        """A fingerprint of the notes (count, sizes, newest mtime of notes and folders): changes on every write.

        Cheap on purpose, since caches ask before every assembly: one `scandir` pass with the
        entries' own stat (no realpath per note), where `_scan` validates every path. Assembly
        snapshots (`memory/context/`) are not notes and are left out. With a watcher (`watch`), the
        last pass is reused while no change was reported and no folder's mtime moved (a note
        created, deleted or atomically replaced moves its folder's): a `stat` per folder, none per
        note. Folder mtimes within the last `RACY_S` seconds are not trusted (a write in the same
        clock tick would not move them).
        """
        last = self._last
        if last is not None and self._watched and last[1] == self._changes and _folders_unchanged(last[2]):
            return last[0]
        changes = self._changes
        fingerprint, folders = self._walk()
        trusted = time.time_ns() - RACY_S * 1_000_000_000
        self._last = (fingerprint, changes, folders) if all(m < trusted for m in folders.values()) else None
        return fingerprint

    def _walk(self) -> tuple[int, dict[str, int]]:
        count, total, newest = 0, 0, 0
        folders: dict[str, int] = {}
        pending: list[tuple[str, bool]] = [(os.fspath(self.memory_dir), True)]
        while pending:
            directory, top = pending.pop()
            try:
                folders[directory] = mtime = os.stat(directory).st_mtime_ns
                newest = max(newest, mtime)
                entries = list(os.scandir(directory))
            except OSError:
                folders[directory] = -1
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not (top and entry.name == SNAPSHOTS):
                            pending.append((entry.path, False))
                    elif entry.name.endswith(SUFFIX):
                        stat = entry.stat()
                        count, total, newest = count + 1, total + stat.st_size, max(newest, stat.st_mtime_ns)
                except OSError:
                    continue
        digest = hashlib.blake2b(f"{count}:{total}:{newest}".encode(), digest_size=7).digest()
        return int.from_bytes(digest, "big"), folders

    def _scan(self) -> tuple[_Found, int]:
        """(relative path, stat) of every visible `*.md` file that resolves inside the memory directory,
        and the newest mtime (ns) of the folders walked (a delete shows there)."""
        real_base = os.path.realpath(self.memory_dir)
        found: _Found = []
        newest_dir = 0
        for directory, dirs, files in os.walk(real_base):  # symlinked folders are not followed
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            try:
                newest_dir = max(newest_dir, os.stat(directory).st_mtime_ns)
            except OSError:
                continue
            for file in files:
                if file.startswith(".") or not file.endswith(SUFFIX) or len(file) == len(SUFFIX):
                    continue
                full = os.path.join(directory, file)
                if not is_inside(real_base, os.path.realpath(full)) or not os.path.isfile(full):
                    continue  # a symlink out of the workspace is never listed
                try:
                    stat = os.stat(full)
                except OSError:
                    continue
                found.append((os.path.relpath(full, real_base).replace(os.sep, "/"), stat))
        return found, newest_dir


class StagedNotes:
    """Notes `MarkdownNotes.stage` wrote to temp files: `commit` renames them all into place (or
    none), `discard` removes them and the folders staging made."""

    def __init__(self, notes: MarkdownNotes) -> None:
        self.notes = notes
        self.files: list[tuple[Path, Path]] = []  # (temp file, note file)
        self.folders: list[Path] = []  # made for the notes, outermost first

    def commit(self) -> int:
        with workspace_lock(self.notes.locks_dir, LOCK):
            try:
                replace_all(self.files)
            except BaseException:
                self.discard()
                raise
            self.notes._changes += 1
        count, self.files, self.folders = len(self.files), [], []
        return count

    def discard(self) -> None:
        for tmp, _target in self.files:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for folder in reversed(self.folders):  # innermost first; only while empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        self.files, self.folders = [], []
