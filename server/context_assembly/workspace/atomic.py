"""Crash-safe file writes and the inter-process lock that serialises edits of one workspace.

Several sidecar processes may share a workspace (SPEC §5.3): a write either lands whole or not at
all, and read-modify-write cycles run one at a time under a lock file in `.codebolt/.locks/`.
"""

from __future__ import annotations

import contextlib
import hashlib
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


def write_new(path: Path | str, data: bytes) -> bool:
    """Create `path` with `data`, whole or not at all, unless it exists: False then, nothing written.
    (A hard link of the staged file is the atomic create-if-absent: readers never see it half written.)"""
    target = Path(path)
    tmp = stage_file(target, data)
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    except OSError as exc:
        raise StorageError(f"cannot write {target}: {exc}", {"path": str(target)}) from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    fsync_directory(target.parent)
    return True


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
    """`.<name>.<random>.tmp` beside the target; for a name too long to take 18 bytes more (a file
    name holds 255), a digest of it stands in, so any file that can exist can be written."""
    name = target.name
    if len(os.fsencode(name)) > 255 - 18:
        name = hashlib.blake2b(os.fsencode(name), digest_size=16).hexdigest()
    return target.with_name(f".{name}.{uuid.uuid4().hex[:12]}.tmp")


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
    """Delete `path` durably; False when it was already gone (or a parent is a file: never there)."""
    target = Path(path)
    try:
        target.unlink()
    except (FileNotFoundError, NotADirectoryError):
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
    thread is re-entrant. Other threads and processes take turns first come, first served: one
    that finds the lock held, or others already waiting, queues (`_Line`, a ticket in
    `<name>.queue/`) and says so meanwhile (a shared hold of `<name>.want`), so that a holder which
    keeps the lock between uses (the graph's session) sees `lock_wanted` and lets go, and a process
    that has just let go queues behind the waiters instead of taking the lock straight back.
    `timeout` bounds how long the line may stand still: a waiter fails (StorageError "still busy")
    only when no waiter has got the lock for `timeout` seconds (a holder that does not let go),
    never while the line moves however long it is; negative waits for ever.
    """
    from filelock import FileLock, Timeout  # here: a first `evaluateRules` takes no lock

    lock_dir = _locks_dir(where, name)
    lock_path = lock_dir / f"{name}.lock"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        # One instance per path makes nested use re-entrant; its per-thread context means each thread
        # takes its own OS lock, so threads exclude each other as processes do.
        lock = FileLock(lock_path, is_singleton=True)
        if not _taken_now(lock, lock_dir, name):
            if fcntl is None:
                _wait_saying_so(lock, FileLock(lock_dir / f"{name}.want", is_singleton=True),
                                lock_dir / f"{name}.turn", timeout)
            else:
                _Line(lock_dir, name).wait_for(lock, timeout)
        if fcntl is None and lock.lock_counter == 1:  # taken (not nested use): the lock changed hands
            _mark_turn(lock_dir / f"{name}.turn")
    except Timeout as exc:
        raise StorageError(f"workspace lock {name!r} still busy: it has not changed hands for {timeout:g} s",
                           {"lock": str(lock_path)}) from exc
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
        held = _held_elsewhere(fd)
        if held is False:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return held is True

    def waiting(self) -> int:
        """How many wait in line, at least 1 (ask once `wanted`): a holder shares turns among them."""
        return max(waiting_in_line(self._where, self._name), 1)

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


def _taken_now(lock: BaseFileLock, lock_dir: Path, name: str) -> bool:
    """The lock taken without waiting: held already by this thread (nested use), or free with
    nobody waiting for it. With waiters, a newcomer (or the holder that just let go) queues behind
    them. Costs one open and `flock` of the want file beyond filelock's own try (~10 µs)."""
    from filelock import Timeout

    if lock.is_locked:  # nested use in this thread: never waits, whoever else waits
        lock.acquire(timeout=0)
        return True
    if fcntl is not None and _want_held(lock_dir / f"{name}.want"):
        return False
    if fcntl is None and lock_wanted(lock_dir, name):  # no line: still, the one waiting goes first
        return False
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    return True


def _held_elsewhere(fd: int) -> bool | None:
    """One non-blocking exclusive `flock` try on an open file: True when another holds it, False
    when this try took it (the caller lets go or closes), None when `flock` failed otherwise."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    return False


def _want_held(path: Path) -> bool:
    """Whether anyone holds the want file (a waiter, shared; or a waiter of an older version,
    exclusively): one non-blocking exclusive try on a file opened for it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no want file: nobody has ever waited here
        return False
    try:
        return _held_elsewhere(fd) is True
    finally:
        os.close(fd)  # closing drops a hold just won


# A waiter in line looks this often whether its turn has come (the head: whether the lock is free).
_HEAD_POLL_S = 0.01
_TURN_SLICE_S = 0.05  # without a line: how often a waiter looks whether the lock changed hands
_LINE_POLL_S = 0.025
_STRAY_TEMP_S = 10.0  # a ticket being made is renamed into the line within microseconds


class _Line:
    """The first-come, first-served line of a workspace lock's waiters, across processes (POSIX).

    `<name>.queue/` holds one ticket file per waiter, named by a number one above the highest in
    line when it was taken (under `flock` of `.seq`), so numbers order arrivals. A waiter holds
    `flock` on its own ticket from before it is visible (made under a dot name, locked, renamed)
    until it leaves, so a ticket nobody holds belongs to a process that died: whoever finds one
    removes it, and a killed waiter never blocks the line. The waiter whose ticket is the lowest
    live one is the head and alone tries the lock; the others wait for their turn. A waiter that
    gets the lock writes its ticket to `.turn`, which the others watch: the line has moved.
    """

    def __init__(self, lock_dir: Path, name: str) -> None:
        self.folder = lock_dir / f"{name}.queue"
        self.want_path = lock_dir / f"{name}.want"
        self._head = False  # whether the last look found no live ticket ahead

    def wait_for(self, lock: BaseFileLock, timeout: float) -> None:
        """Queue for `lock`, then take it; filelock's Timeout once the line has not moved for
        `timeout` seconds (negative: wait for ever)."""
        from filelock import Timeout

        self.folder.mkdir(exist_ok=True)
        want = os.open(self.want_path, os.O_RDONLY | os.O_CREAT, 0o666)
        ticket: tuple[int, str, int] | None = None
        try:
            saying = _hold_shared(want)  # first: a holder letting go meanwhile queues behind this one
            ticket = self._take_ticket()
            moved_at, last_turn = time.monotonic(), self._turn()
            while True:
                saying = saying or _hold_shared(want)
                if self._first(ticket[0]):
                    try:
                        lock.acquire(timeout=0)
                    except Timeout:
                        pass
                    else:
                        self._mark_turn(ticket[1])
                        return
                now = time.monotonic()
                turn = self._turn()
                if turn != last_turn:
                    moved_at, last_turn = now, turn
                elif timeout >= 0 and now - moved_at >= timeout:
                    raise Timeout(str(lock.lock_file))
                time.sleep(_HEAD_POLL_S if self._head else _LINE_POLL_S)
        finally:
            if ticket is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.folder / ticket[1])
                os.close(ticket[2])
            os.close(want)  # drops the shared hold: no longer waiting

    def _take_ticket(self) -> tuple[int, str, int]:
        """(number, file name, open locked descriptor) of a new ticket behind every one in line."""
        guard = os.open(self.folder / ".seq", os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(guard, fcntl.LOCK_EX)  # held for microseconds; a killed holder's goes with it
            number = max((n for n, _ in self._tickets()), default=0) + 1
            name = f"{number:012d}.{os.getpid()}.{uuid.uuid4().hex[:8]}"  # never a name seen before
            staged = self.folder / f".{name}.tmp"
            fd = os.open(staged, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # before the name is visible: a live ticket is always held
                os.rename(staged, self.folder / name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(staged)
                os.close(fd)
                raise
        finally:
            os.close(guard)
        return number, name, fd

    def _tickets(self) -> list[tuple[int, str]]:
        found: list[tuple[int, str]] = []
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return found
        for name in names:
            if name.startswith("."):
                if name.endswith(".tmp"):
                    self._drop_stray(name)
                continue
            number, _, _rest = name.partition(".")
            if number.isdigit():
                found.append((int(number), name))
        return found

    def _first(self, mine: int) -> bool:
        """Whether no live ticket is ahead of `mine`, removing the dead ones found ahead."""
        ahead = sorted((t for t in self._tickets() if t[0] < mine), reverse=True)
        for _number, name in ahead:  # nearest first: usually alive, and one look settles it
            if _held_by_someone(self.folder / name):
                self._head = False
                return False
        self._head = True
        return True

    def _drop_stray(self, name: str) -> None:
        """Remove a ticket left half made by a killed process (old, and held by nobody)."""
        path = self.folder / name
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime > _STRAY_TEMP_S:
                _held_by_someone(path)

    def _turn(self) -> bytes:
        try:
            fd = os.open(self.folder / ".turn", os.O_RDONLY)
        except OSError:
            return b""
        try:
            return os.read(fd, 64)
        except OSError:
            return b""
        finally:
            os.close(fd)

    def _mark_turn(self, ticket: str) -> None:
        """Tell the line it moved (only the lock's holder writes here, so writes never interleave)."""
        with contextlib.suppress(OSError):
            fd = os.open(self.folder / ".turn", os.O_WRONLY | os.O_CREAT, 0o666)
            try:
                os.pwrite(fd, ticket.encode().ljust(64), 0)
            finally:
                os.close(fd)


def _hold_shared(fd: int) -> bool:
    """Say that one waits: a shared hold of the want file. Holders' probes test it exclusively for
    microseconds, so a try that meets one tries again at once, then at the next look (a waiter of an
    older version holds it exclusively while it waits)."""
    for attempt in range(3):
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            time.sleep(0.0005 * (attempt + 1))
        except OSError:
            return False
        else:
            return True
    return False


def _held_by_someone(path: Path) -> bool:
    """Whether a ticket's waiter still holds it; one that nobody holds (its waiter died) is removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # gone: its waiter left
        return False
    try:
        held = _held_elsewhere(fd)
        if held is False:
            with contextlib.suppress(OSError):
                if os.path.samestat(os.fstat(fd), os.stat(path)):  # still the file looked at
                    os.unlink(path)
        return held is True
    finally:
        os.close(fd)


def has_line() -> bool:
    """Whether waiters for a workspace lock queue in a line here (POSIX `flock`); not on Windows."""
    return fcntl is not None


def waiting_in_line(where: WorkspaceLayout | Path | str, name: str) -> int:
    """How many waiters are in line for `workspace_lock(where, name)` (tickets, counted without
    checking that their processes live; 0 without a line, as on Windows)."""
    try:
        names = os.listdir(_locks_dir(where, name) / f"{name}.queue")
    except OSError:
        return 0
    return sum(1 for entry in names if not entry.startswith("."))


def _wait_saying_so(lock: BaseFileLock, want: BaseFileLock, turn: Path, timeout: float) -> None:
    """Without `fcntl` (Windows), no `_Line`: wait for `lock` holding `want` (waiters queue on it,
    unordered; the one holding it waits for the lock, and newcomers let it go first); filelock's
    Timeout once the lock has not changed hands (`turn`, rewritten by every taker) for `timeout`
    (negative: for ever), never while it does, however long the wait in line."""
    _acquire_while_moving(want, turn, timeout)
    try:
        _acquire_while_moving(lock, turn, timeout)
    finally:
        want.release()


def _acquire_while_moving(lock: BaseFileLock, turn: Path, timeout: float) -> None:
    from filelock import Timeout

    if timeout < 0:
        lock.acquire(timeout=-1)
        return
    seen, since = _turn_of(turn), time.monotonic()
    while True:
        try:
            lock.acquire(timeout=min(_TURN_SLICE_S, timeout))
            return
        except Timeout:
            now = _turn_of(turn)
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= timeout:
                raise


def _mark_turn(turn: Path) -> None:
    """Say that the lock changed hands (no line: what waiters watch to tell a moving queue from a stuck one)."""
    with contextlib.suppress(OSError):
        turn.write_bytes(os.urandom(8))


def _turn_of(turn: Path) -> bytes:
    try:
        return turn.read_bytes()
    except OSError:
        return b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _copy_mode(target: Path, tmp: Path) -> None:
    # A replaced file keeps its permissions; a new one gets the umask default from os.open.
    with contextlib.suppress(FileNotFoundError):
        os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
