"""Crash-safe file writes and the inter-process lock that serialises edits of one workspace.

Several sidecar processes may share a workspace (SPEC §5.3): a write either lands whole or not at
all, and read-modify-write cycles run one at a time under a lock file in `.codebolt/.locks/`.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StorageError
from .layout import WorkspaceLayout

try:
    import fcntl
except ImportError:  # Windows: `WantProbe` asks through filelock
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from filelock import BaseFileLock

DEFAULT_LOCK_TIMEOUT = 10.0

_LOCK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def write_atomic(path: Path | str, data: bytes) -> None:
    """Replace `path` with `data`: readers see the old bytes or the new ones, never a mix.

    The temp file sits in the target's directory so `os.replace` is a same-file-system rename.
    Raises StorageError on an OS failure; the target is then untouched and no temp file remains.
    """
    target = Path(path)
    tmp = stage_file(target, data)
    try:
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise StorageError(f"cannot write {target}: {exc}", {"path": str(target)}) from exc
        raise
    fsync_directory(target.parent)


def stage_file(target: Path, data: bytes) -> Path:
    """`data` written and synced to a temp file beside `target` (a `temp_name`), for a later
    `os.replace`. Raises StorageError on an OS failure, leaving no temp file."""
    tmp = temp_name(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise StorageError(f"cannot write {target}: {exc}", {"path": str(target)}) from exc
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        _copy_mode(target, tmp)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise StorageError(f"cannot write {target}: {exc}", {"path": str(target)}) from exc
        raise
    return tmp


def replace_all(pairs: list[tuple[Path, Path]]) -> None:
    """Rename each staged (temp file, target) onto its target, all or none: before a target is
    replaced its old file is set aside (renamed), and a failed rename puts back every target already
    replaced. Renames only, so putting back needs no free space. StorageError names the failed file."""
    done: list[tuple[Path, Path | None]] = []  # (target, its old file set aside, or None: it was new)
    current = Path()
    try:
        for tmp, current in pairs:
            if current.is_dir():
                raise IsADirectoryError(21, "is a directory", str(current))
            aside = temp_name(current)
            try:
                os.rename(current, aside)
                done.append((current, aside))
            except FileNotFoundError:
                done.append((current, None))
            os.replace(tmp, current)
    except OSError as exc:
        _put_back(done)
        raise StorageError(f"cannot write {current}: {exc.strerror or exc}; the files already replaced were "
                           "put back", {"path": str(current)}) from exc
    for _target, old in done:
        if old is not None:
            with contextlib.suppress(OSError):
                os.unlink(old)
    for folder in {target.parent for _tmp, target in pairs}:
        fsync_directory(folder)


def _put_back(done: list[tuple[Path, Path | None]]) -> None:
    for target, aside in reversed(done):
        with contextlib.suppress(OSError):
            if aside is None:
                os.unlink(target)
            else:
                os.replace(aside, target)


TEMP_NAME = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")  # what write_atomic names its temp files, only that
TEMP_SAFE_AGE_S = 600.0  # far longer than any write takes: a younger temp file may be another process's


def temp_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")


def sweep_temp_files(directory: Path, older_than_s: float = TEMP_SAFE_AGE_S) -> list[Path]:
    """Remove temp files that interrupted writes (a killed process) left under `directory`: only
    names write_atomic makes, only regular files, only those untouched for `older_than_s`."""
    removed: list[Path] = []
    cutoff = time.time() - older_than_s
    for folder, _dirs, names in os.walk(directory):
        for name in names:
            if not TEMP_NAME.fullmatch(name):
                continue
            path = Path(folder) / name
            try:
                info = path.lstat()
                if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                    path.unlink()
                    removed.append(path)
            except OSError:
                continue  # gone meanwhile, or not ours to remove
    return removed


def remove_file(path: Path | str) -> bool:
    """Delete `path` durably; False when it was already gone."""
    target = Path(path)
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"cannot delete {target}: {exc}", {"path": str(target)}) from exc
    fsync_directory(target.parent)
    return True


def fsync_directory(directory: Path) -> None:
    """Make a rename or unlink in `directory` survive a power cut (POSIX only)."""
    if os.name != "posix":
        return  # Windows cannot open a directory; NTFS journals the rename itself
    # Some file systems (network, FUSE) refuse fsync on a directory; the rename has happened anyway.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def workspace_lock(
    where: WorkspaceLayout | Path | str, name: str, *, timeout: float = DEFAULT_LOCK_TIMEOUT
) -> Iterator[None]:
    """Hold `<locks dir>/<name>.lock` exclusively across processes and threads.

    `where` is a layout (its `.codebolt/.locks/`) or the locks directory itself. Nested use in one
    thread is re-entrant; other threads and processes wait up to `timeout` seconds (negative: for
    ever), then StorageError. One that has to wait holds `<name>.want` meanwhile, so that a holder
    which keeps the lock between uses (the graph's session) sees `lock_wanted` and lets go.
    """
    from filelock import FileLock, Timeout  # here: a first `evaluateRules` takes no lock

    lock_dir = _locks_dir(where, name)
    lock_path = lock_dir / f"{name}.lock"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        # One instance per path makes nested use re-entrant; its per-thread context means each thread
        # takes its own OS lock, so threads exclude each other as processes do.
        lock = FileLock(lock_path, is_singleton=True)
        if not _taken_now(lock):
            _wait_saying_so(lock, FileLock(lock_dir / f"{name}.want", is_singleton=True), timeout)
    except Timeout as exc:
        raise StorageError(f"workspace lock {name!r} still busy after {timeout:g} s", {"lock": str(lock_path)}) from exc
    except OSError as exc:
        raise StorageError(f"cannot lock {lock_path}: {exc}", {"lock": str(lock_path)}) from exc
    try:
        yield
    finally:
        lock.release()


def lock_wanted(where: WorkspaceLayout | Path | str, name: str) -> bool:
    """True while another thread or process waits for `workspace_lock(where, name)`: its holder
    should let go. One non-blocking try of `<name>.want` (a waiter holds it while it waits)."""
    from filelock import FileLock, Timeout

    want = FileLock(_locks_dir(where, name) / f"{name}.want", is_singleton=True)
    try:
        want.acquire(timeout=0)
    except Timeout:
        return True
    except OSError:  # the locks folder is gone or unwritable: nobody can be waiting through it
        return False
    want.release()
    return False


class WantProbe:
    """`lock_wanted` for a holder that asks often (an idle graph session, every tick): the want
    file is kept open and tested with `flock` directly, ~5 µs where filelock's acquire and
    release take ~0.1 ms (a sidecar idle with the graph open spent 1.5% of a core on it). The
    file is reopened when a different one took its place. Without `fcntl`: `lock_wanted`."""

    def __init__(self, where: WorkspaceLayout | Path | str, name: str) -> None:
        self._where, self._name = where, name
        self._path = _locks_dir(where, name) / f"{name}.want"
        self._fd: int | None = None

    def wanted(self) -> bool:
        if fcntl is None:
            return lock_wanted(self._where, self._name)
        fd = self._open()
        if fd is None:  # no want file: nobody has ever waited here
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open(self) -> int | None:
        try:
            current = os.stat(self._path)
        except OSError:
            self.close()
            return None
        if self._fd is not None and os.path.samestat(os.fstat(self._fd), current):
            return self._fd
        self.close()
        with contextlib.suppress(OSError):
            self._fd = os.open(self._path, os.O_RDONLY)
        return self._fd


def _locks_dir(where: WorkspaceLayout | Path | str, name: str) -> Path:
    if not _LOCK_NAME.fullmatch(name):
        raise ValueError(f"unsafe lock name {name!r}")
    return where.locks_dir if isinstance(where, WorkspaceLayout) else Path(where)


def _taken_now(lock: BaseFileLock) -> bool:
    from filelock import Timeout

    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    return True


def _wait_saying_so(lock: BaseFileLock, want: BaseFileLock, timeout: float) -> None:
    """Wait for `lock` holding `want` (waiters queue on it; one at a time waits for the lock), both
    within `timeout` (negative: for ever); filelock's Timeout when it runs out."""
    deadline = time.monotonic() + timeout
    want.acquire(timeout=timeout)
    try:
        lock.acquire(timeout=timeout if timeout < 0 else max(deadline - time.monotonic(), 0.0))
    finally:
        want.release()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _copy_mode(target: Path, tmp: Path) -> None:
    # A replaced file keeps its permissions; a new one gets the umask default from os.open.
    with contextlib.suppress(FileNotFoundError):
        os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
