"""Other processes of a workspace, for the tests of what its sidecars share: one holding a lock file
meanwhile, and several running the same script from the same moment."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOLD_LOCK = textwrap.dedent("""
    import sys
    from filelock import FileLock
    with FileLock(sys.argv[1]):
        print("held", flush=True)
        sys.stdin.readline()
""")


@contextmanager
def lock_held(path: Path | str) -> Iterator[None]:
    """Another process holding the lock file `path` (a `filelock.FileLock`) meanwhile; it exits
    without doing anything else."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()


def at_once(script: str, argv: list[str], count: int, timeout: float = 300) -> list[str]:
    """The standard output of `count` processes running `script` with `argv`, each started, then all
    told to go (a line on stdin, which the script waits for once it has imported what it needs).
    AssertionError with its standard error when one fails."""
    members = [subprocess.Popen([sys.executable, "-c", script, *argv], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(count)]
    for member in members:
        assert member.stdin is not None
        member.stdin.write("go\n")
        member.stdin.flush()
    outputs = []
    for member in members:
        out, err = member.communicate(timeout=timeout)
        assert member.returncode == 0, err
        outputs.append(out)
    return outputs
