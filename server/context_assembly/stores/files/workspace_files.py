"""Read-only access to the workspace's own files (`file://<path>`): the active file, a doc.

Only regular UTF-8 text files inside the workspace, up to a size cap; nothing here writes.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path

from ..confine import check_relative_path, is_inside, refuse, resolve_inside
from ..interfaces import FileInfo

MAX_FILE_BYTES = 1024 * 1024
MAX_LISTED = 1000
_TRACKED = 1024  # how many served paths the generation fingerprint follows


class WorkspaceFiles:
    def __init__(self, root: Path | str, *, max_bytes: int = MAX_FILE_BYTES) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._served: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def path(self, relative: str, pointer: str = "/uri") -> Path:
        return resolve_inside(self.root, relative, what="file path", pointer=pointer)

    def read(self, path: str) -> str | None:
        target = self.path(path)
        self._track(target)
        try:
            info = os.stat(target)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise refuse(f"file://{path} cannot be read: {exc.strerror}") from None
        if stat.S_ISDIR(info.st_mode):
            raise refuse(f"file://{path} is a directory, not a file (list it with a file:// prefix)")
        if not stat.S_ISREG(info.st_mode):
            raise refuse(f"file://{path} is not a regular file")
        if info.st_size > self.max_bytes:
            raise refuse(f"file://{path} is too large to read ({info.st_size} bytes; at most {self.max_bytes})")
        try:
            with open(target, "rb") as handle:
                data = handle.read(self.max_bytes + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise refuse(f"file://{path} cannot be read: {exc.strerror}") from None
        if len(data) > self.max_bytes:  # grew since the stat
            raise refuse(f"file://{path} is too large to read (more than {self.max_bytes} bytes)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise refuse(f"file://{path} is not a UTF-8 text file") from None
        return text.removeprefix("\ufeff")

    def list(self, directory: str = "", name_prefix: str = "") -> list[FileInfo]:
        clean = check_relative_path(directory, what="file path", pointer="/prefix") if directory else ""
        real_root = os.path.realpath(self.root)
        base = self.path(clean, "/prefix") if clean else Path(real_root)
        entries = []
        try:
            with os.scandir(base) as scan:
                for entry in scan:
                    if not entry.name.startswith(name_prefix) or not _utf8(entry.name):
                        continue  # the prefix before the cap: a narrow prefix finds its files in any folder
                    full = os.path.realpath(entry.path)
                    if not is_inside(real_root, full):
                        continue  # a symlink out of the workspace is not listed
                    try:
                        info = os.stat(full)
                    except OSError:
                        continue
                    relative = f"{clean}/{entry.name}" if clean else entry.name
                    entries.append(FileInfo(relative, stat.S_ISDIR(info.st_mode), info.st_size, info.st_mtime))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise refuse(f"file://{clean} cannot be listed: {exc.strerror}", "/prefix") from None
        return sorted(entries, key=lambda e: e.path)[:MAX_LISTED]

    def generation(self) -> int:
        """A fingerprint of the files read so far (their size and mtime): changes when one of them does."""
        with self._lock:
            paths = list(self._served)
        parts = []
        for path in paths:
            try:
                info = os.stat(path)
                parts.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
            except OSError:
                parts.append(f"{path}:-")
        digest = hashlib.blake2b("\n".join(parts).encode(errors="surrogateescape"), digest_size=7).digest()
        return int.from_bytes(digest, "big")

    def _track(self, target: Path) -> None:
        with self._lock:
            key = os.fspath(target)
            self._served[key] = None
            self._served.move_to_end(key)
            while len(self._served) > _TRACKED:
                self._served.popitem(last=False)


def _utf8(name: str) -> bool:
    """Whether a file name is valid UTF-8 (os.scandir gives others with surrogate escapes, which no
    file:// URI can name)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
