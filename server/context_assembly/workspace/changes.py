"""Has anything under `.codebolt/` changed since the loader last looked? (inotify, Linux)

Every method sees the definition files as they are on disk now. Without help that means a
`scandir` per folder and a `stat` per definition file on every call (~0.3 ms for 50 files, ~1.2 ms
for 200, twice per call). With an inotify instance watching the definition folders, the answer is
one non-blocking `read` that finds nothing: the kernel queues an event inside the system call that
changed the folder (a write, a create, a rename, a delete, a `touch`) before that call returns, so a
change made before a request was sent is always seen by that request. No thread, no polling, and
the client's `workspace/didChangeWatchedFiles` (asynchronous) plays no part in correctness.

Watched: `.codebolt/` itself (the settings file; folders created, renamed or deleted) and every
definition folder, or, while one does not exist, its nearest existing ancestor. Any event (or a
queue overflow) makes the loader scan as before and re-arm. The watch is not trusted, and the
loader scans on every call as before, when inotify is unavailable (not Linux, no instances left),
when a watch cannot be added, when a definition file or folder is a symbolic link (a change of
its target is not an event of the watched folder), and when `CONTEXT_ASSEMBLY_WATCH=0` is set:
for file systems that do not deliver events for changes made elsewhere (NFS and other network
mounts, some container volume drivers) and for definition files changed through a hard link
in another folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

ENVIRONMENT = "CONTEXT_ASSEMBLY_WATCH"  # "0": never trust a watch, stat every file on every call

try:
    from inotify_simple import INotify
    from inotify_simple import flags as _flags
except (ImportError, OSError):  # not Linux (the package is only installed there), or no libc
    INotify = None
    MASK = 0
else:
    MASK = (_flags.CREATE | _flags.DELETE | _flags.MODIFY | _flags.CLOSE_WRITE | _flags.ATTRIB
            | _flags.MOVED_FROM | _flags.MOVED_TO | _flags.DELETE_SELF | _flags.MOVE_SELF)


def enabled() -> bool:
    return INotify is not None and os.environ.get(ENVIRONMENT, "1") != "0"


def nearest_existing(path: Path, stop: Path) -> Path:
    """`path`, or its closest ancestor that is a directory (never above `stop`)."""
    while path != stop and not path.is_dir():
        path = path.parent
    return path


class ChangeWatch:
    """One inotify instance over a workspace's definition folders.

    `unchanged()` is True only when the watch is armed and nothing happened since the last call
    that returned False (or since `arm`): then the loader may reuse its last workspace without
    looking at the disk. Arm before scanning, so that a change made during a scan is an event
    the next call sees."""

    def __init__(self, root: Path, folders: Iterable[Path]) -> None:
        self.root = root
        self.folders = list(folders)
        self._inotify: Any = None
        self._watches: dict[Path, int] = {}
        self.armed = False
        if not enabled():
            return
        try:
            self._inotify = INotify(nonblocking=True)
        except OSError as exc:  # EMFILE: max_user_instances reached
            logger.info("definition files are stat-ed on every call: inotify unavailable (%s)", exc)

    @property
    def available(self) -> bool:
        return self._inotify is not None

    def targets(self) -> set[Path]:
        codebolt = self.root / ".codebolt"
        out = {nearest_existing(codebolt, self.root)}
        out.update(nearest_existing(folder, self.root) for folder in self.folders)
        return out

    def arm(self, trusted: bool = True) -> None:
        """Watch the current targets (dropping watches no longer needed) and forget pending events.
        `trusted=False`: the caller found something a watch cannot see (a symbolic link)."""
        if self._inotify is None:
            return
        self._drain()
        wanted = self.targets()
        for path in [p for p in self._watches if p not in wanted]:
            with contextlib.suppress(OSError):  # gone already
                self._inotify.rm_watch(self._watches[path])
            del self._watches[path]
        try:
            for path in wanted:
                self._watches[path] = self._inotify.add_watch(path, MASK)
        except OSError as exc:  # ENOSPC (max_user_watches), or the folder vanished meanwhile
            logger.debug("cannot watch %s: %s", path, exc)
            self.armed = False
            return
        self.armed = trusted

    def _drain(self) -> bool:
        """Read every pending event; True when there was at least one."""
        seen = False
        try:
            while self._inotify.read(timeout=0):
                seen = True
        except OSError:  # the instance is broken: stop trusting it
            self.armed = False
            return True
        return seen

    def unchanged(self) -> bool:
        if self._inotify is None or not self.armed:
            return False
        if self._drain():
            self.armed = False  # the caller scans and re-arms
            return False
        return True

    def close(self) -> None:
        if self._inotify is not None:
            with contextlib.suppress(OSError):
                self._inotify.close()
            self._inotify = None
            self.armed = False
