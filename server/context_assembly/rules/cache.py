"""The on-disk cache of compiled rule engines: one entry per rule file version.

An entry is what compiling a rule file costs and decides (rules/persist.py): the matcher's code
object and what its globals are made from. Its key is a hash of the file's bytes, its name, the
package version, Python's bytecode magic number and the compiler's own source files, so an entry
made by another version of anything involved is never found. An entry carries its own key and a
digest of its payload: a truncated, corrupt or foreign file reads as a miss, and the caller
compiles and writes it again. Writes go to a temporary file in the same folder, then `os.replace`:
several servers sharing a workspace (and a cache) never see half an entry, and the last of two
writers of one key leaves the same bytes the first did.

Where: `$CONTEXT_ASSEMBLY_RULE_CACHE` when set (`0`, `off` or empty: no cache), else
`compiled-rules` under the user's cache folder (`platformdirs`: `$XDG_CACHE_HOME/context-assembly`
on Linux). The folder is trusted as Python's own `__pycache__` is: whoever can write to it can
run code in the server. A cache that cannot be read or written is no cache: nothing fails.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import tempfile
import time
from pathlib import Path

from .. import __version__
from ..cache_folders import cache_folder

logger = logging.getLogger(__name__)

ENV = "CONTEXT_ASSEMBLY_RULE_CACHE"
_MAGIC = b"CARC1\n"  # this file format
_DIGEST = 32  # bytes of a sha256
# The packages whose code decides what an entry holds (compiler, operators, model, parsing, loading)
_COMPILER = ("rules", "registry", "model", "documents", "workspace")
_fingerprint: bytes | None = None
_SHARD = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}|\..*\.tmp")  # an entry, or a temporary file of `put`


def default_dir() -> Path | None:
    """The cache folder the environment asks for; None when it asks for none."""
    return cache_folder(ENV, "compiled-rules")


def compiler_fingerprint() -> bytes:
    """The package version, the bytecode magic number and a digest of the compiler's sources
    (a changed operator or emitter makes different entries even within one version)."""
    global _fingerprint
    if _fingerprint is None:
        digest = hashlib.sha256(__version__.encode() + b"\0" + importlib.util.MAGIC_NUMBER)
        package = Path(__file__).resolve().parent.parent
        for folder in _COMPILER:
            for module in sorted((package / folder).rglob("*.py")):
                digest.update(module.relative_to(package).as_posix().encode() + b"\0")
                digest.update(module.read_bytes())
        _fingerprint = digest.digest()
    return _fingerprint


class CompileCache:
    """Entries by key in one folder; every failure to read is a miss, every failure to write is ignored.

    Entries not used for `max_age_days` are removed by the first write of a process (each edit of a
    rule file leaves its old version's entry behind); a hit marks its entry used at most once a day.
    """

    def __init__(self, directory: Path, max_age_days: float = 30) -> None:
        self.directory = directory
        self.max_age_s = max_age_days * 86_400
        self._pruned = False

    @classmethod
    def from_environment(cls) -> CompileCache | None:
        directory = default_dir()
        return None if directory is None else cls(directory)

    @staticmethod
    def key(content: bytes, name: str) -> str:
        """The key of one file version: its bytes, its name (an engine without an id takes the
        file's) and the compiler that reads it."""
        digest = hashlib.sha256(compiler_fingerprint())
        digest.update(name.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(content)
        return digest.hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def get(self, key: str) -> bytes | None:
        """The payload stored under `key`, or None (absent, unreadable, truncated, corrupt, foreign)."""
        try:
            data = self.path(key).read_bytes()
        except OSError:
            return None
        head = _MAGIC + bytes.fromhex(key)
        start = len(head) + _DIGEST
        if len(data) < start or not data.startswith(head):
            logger.info("compile cache: ignoring a foreign entry %s", key)
            return None
        payload = data[start:]
        if hashlib.sha256(payload).digest() != data[len(head):start]:
            logger.info("compile cache: ignoring a corrupt entry %s", key)
            return None
        self._used(self.path(key))
        return payload

    @staticmethod
    def _used(path: Path) -> None:
        """Mark an entry used (its mtime), when the mark is more than a day old."""
        try:
            if time.time() - path.stat().st_mtime > 86_400:
                os.utime(path)
        except OSError:
            pass

    def prune(self) -> int:
        """Remove entries (and temporary files of interrupted writes) unused for `max_age_days`;
        how many were removed. Only names this cache writes are touched."""
        removed, limit = 0, time.time() - self.max_age_s
        try:
            folders = [p for p in self.directory.iterdir() if _SHARD.fullmatch(p.name) and p.is_dir()]
        except OSError:
            return 0
        for folder in folders:
            try:
                names = [p for p in folder.iterdir() if _ENTRY.fullmatch(p.name)]
            except OSError:
                continue
            for path in names:
                try:
                    if path.stat().st_mtime < limit:
                        path.unlink()
                        removed += 1
                except OSError:
                    continue
        return removed

    def put(self, key: str, payload: bytes) -> bool:
        """Store atomically; False when the folder cannot be written (the cache then just misses)."""
        target = self.path(key)
        data = _MAGIC + bytes.fromhex(key) + hashlib.sha256(payload).digest() + payload
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.replace(temporary, target)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError as exc:
            logger.info("compile cache: cannot write %s: %s", target, exc)
            return False
        if not self._pruned:
            self._pruned = True
            self.prune()
        return True
