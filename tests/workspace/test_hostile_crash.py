"""Crash hygiene: a process killed in the middle of an atomic write leaves a hidden temp file; the
next server to open the workspace removes it — only names the server's own writes make, only files
older than a safe age (a younger one may be another process's write in flight)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from context_assembly.methods import Session
from context_assembly.workspace.atomic import TEMP_SAFE_AGE_S, temp_name

OLD = time.time() - TEMP_SAFE_AGE_S - 60


def aged(path: Path, content: bytes = b"half") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    os.utime(path, (OLD, OLD))
    return path


def test_old_temp_files_of_interrupted_writes_are_removed_on_start(example_copy: Path) -> None:
    codebolt = example_copy / ".codebolt"
    stale = [aged(temp_name(codebolt / "context-rule-engines" / "planning.json")),
             aged(temp_name(codebolt / "memory" / "style-guide.md")),
             aged(temp_name(codebolt / "vectordb" / "docs" / "collection.json"))]
    young = temp_name(codebolt / "PersistentMemory" / "recent-history.json")
    young.write_bytes(b"in flight")
    foreign = [aged(codebolt / "memory" / ".notes.swp"), aged(codebolt / "memory" / ".x.tmp"),
               aged(codebolt / "memory" / "draft.0123456789ab.tmp"), aged(codebolt / ".keep.ABCDEF012345.tmp")]
    session = Session(example_copy)
    try:
        assert not any(path.exists() for path in stale)
        assert young.exists()
        assert all(path.exists() for path in foreign)  # not the server's naming: never touched
        assert (codebolt / "context-rule-engines" / "planning.json").is_file()
    finally:
        session.close()


WRITER = """
import sys
from context_assembly.workspace import atomic
from pathlib import Path

def hang(src, dst):
    print("written", flush=True)
    import time
    time.sleep(60)
atomic.os.replace = hang
atomic.write_atomic(Path(sys.argv[1]), b"new content")
"""


def test_a_write_killed_before_its_rename_leaves_a_temp_file_the_next_start_removes(example_copy: Path) -> None:
    target = example_copy / ".codebolt" / "memory" / "style-guide.md"
    before = target.read_bytes()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE)
    assert writer.stdout is not None and writer.stdout.readline().strip() == b"written"
    writer.send_signal(signal.SIGKILL)
    writer.wait(10)
    [left] = [p for p in target.parent.iterdir() if p.name.startswith(".style-guide.md.")]
    assert target.read_bytes() == before  # the write never landed, nothing torn
    Session(example_copy).close()
    assert left.exists()  # too young: it could be a write in flight
    os.utime(left, (OLD, OLD))
    Session(example_copy).close()
    assert not left.exists()
