"""Converting a graph written by Kuzu 0.11 into LadybugDB's format, on first open.

LadybugDB cannot open Kuzu's files (different header: `KUZU` vs `LBUG`), but imports what Kuzu's
`EXPORT DATABASE` writes. So a workspace graph from before the switch is exported by Kuzu in a child
process (the two engines are never loaded into one process), imported into a new file beside the
old one, and only then swapped in; the Kuzu file is kept as `graph.kuzu.kuzu-0.11.bak`. Kuzu is
needed only for this, once: `pip install 'kuzu==0.11.3'` (or the extra `context-assembly[kuzu]`).
Runs under the graph's workspace lock, so two processes never convert at once.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import ladybug

from ...errors import StorageError

KUZU_HEADER = b"KUZU"
BACKUP_SUFFIX = ".kuzu-0.11.bak"
# Run in the graph's folder with names made here (no quote in them), so no path is spliced into Cypher.
_EXPORT = "import kuzu, sys; kuzu.Connection(kuzu.Database(sys.argv[1])).execute(f\"EXPORT DATABASE '{sys.argv[2]}'\")"


def written_by_kuzu(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(len(KUZU_HEADER)) == KUZU_HEADER
    except (FileNotFoundError, IsADirectoryError):
        return False


def migrate_from_kuzu(path: Path) -> Path:
    """Convert the Kuzu database at `path` in place; return where the Kuzu file was kept."""
    export = path.with_name(path.name + ".export")
    fresh = path.with_name(path.name + ".ladybug")
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    for leftover in (export, fresh, fresh.with_name(fresh.name + ".wal")):
        _remove(leftover)  # from a conversion that was interrupted: start it again
    done = subprocess.run([sys.executable, "-c", _EXPORT, path.name, export.name], cwd=path.parent,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StorageError(_export_failure(done.stderr), {"path": str(path)})
    try:
        database = ladybug.Database(str(fresh))
        connection = ladybug.Connection(database)
        try:
            connection.execute(f"IMPORT DATABASE '{_quoted(export)}'")
        finally:
            connection.close()
            database.close()
    except RuntimeError as exc:
        _remove(fresh)
        raise StorageError(f"cannot convert the Kuzu graph {path.name}: {exc}", {"path": str(path)}) from exc
    finally:
        _remove(export)
    for suffix in ("", ".wal"):
        old = path.with_name(path.name + suffix)
        if old.exists():
            old.replace(backup.with_name(backup.name + suffix))
    fresh.replace(path)
    return backup


def _export_failure(stderr: str) -> str:
    if "No module named 'kuzu'" in stderr:
        return ("the knowledge graph was written by Kuzu 0.11 and must be converted once to LadybugDB; "
                "install Kuzu for the conversion (pip install 'kuzu==0.11.3') and run the command again")
    last = stderr.strip().splitlines()[-1:] or ["no output"]
    return f"cannot export the Kuzu graph for conversion: {last[0]}"


def _quoted(path: Path) -> str:
    return str(path).replace("\\", "\\\\").replace("'", "\\'")


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()
