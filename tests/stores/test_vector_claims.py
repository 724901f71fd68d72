"""A new vector collection's model is decided once, by the database: a `memory import` creating the
collection and another process writing to it at the same moment never leave a settings file that
names another model than the documents hold, and neither write fails (the other process waits for
the import and follows its model). Each writer is a real process."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import multiprocessing
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import ConflictError
from context_assembly.stores.embedding import HASHING, default_embedder_name
from context_assembly.stores.factory import open_embedded_stores
from context_assembly.stores.importer import import_memory
from context_assembly.stores.memory import MemoryRouter
from context_assembly.workspace.atomic import lock_wanted, workspace_lock
from context_assembly.workspace.layout import WorkspaceLayout

SPAWN = multiprocessing.get_context("spawn")
pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="spawned writers and SQLite locks timed as on POSIX"),
    pytest.mark.skipif(importlib.util.find_spec("wordllama") is None,
                       reason="needs a default model other than the import's (hashing-256)"),
]

# vector docs, then a graph write that waits for the graph's lock (held by the test) inside the
# import's database transaction, then more vector docs
IMPORT = {
    "collections": {"newc": {"embedding_model": HASHING}},
    "writes": [*({"uri": f"vector://newc/doc{i}", "value": {"text": f"imported text {i}"}} for i in range(3)),
               {"uri": "graph://default/node/pause", "value": {"kind": "K", "name": "pause"}},
               *({"uri": f"vector://newc/doc{i}", "value": {"text": f"imported text {i}"}} for i in range(3, 6))],
}


def _memory(root: str) -> MemoryRouter:
    layout = WorkspaceLayout(Path(root))
    return MemoryRouter(layout, stores=open_embedded_stores(layout))


def _run_import(root: str, out: str) -> None:
    """Child process: `memory import` of IMPORT; its result or error into `out`."""
    memory = _memory(root)
    try:
        result: dict[str, Any] = {"ok": import_memory(memory, IMPORT, Path(root) / ".codebolt")["written"]}
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        result = {"error": f"{type(exc).__name__}: {exc}"}
    memory.close()
    Path(out).write_text(json.dumps(result), encoding="utf-8")


def _agent_write(root: str, ready: Any, out: str) -> None:
    """Child process: an agent writing one document to the collection with the default model (its
    embedder loaded first, so that the write itself starts at once)."""
    from context_assembly.stores.embedding import get_embedder

    memory = _memory(root)
    get_embedder(default_embedder_name()).embed(["warm up"])
    ready.set()
    try:
        result: dict[str, Any] = {"ok": memory.write("vector://newc/agent-doc", {"text": "written by an agent"})}
    except Exception as exc:  # noqa: BLE001
        result = {"error": f"{type(exc).__name__}: {exc}"}
    memory.close()
    Path(out).write_text(json.dumps(result), encoding="utf-8")


def _database_write_locked(db_path: Path) -> bool:
    """Whether a write transaction holds the database (one try, no waiting)."""
    if not db_path.exists():
        return False
    conn = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return True
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()
    return False


def _until(condition: Any, within: float) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@contextlib.contextmanager
def _import_paused_in_its_transaction(root: Path) -> Iterator[Any]:
    """A `memory import` process inside its database transaction, the collection claimed there
    (not committed) and the import waiting for the graph's lock, which this holds until the block
    ends; yields the import process."""
    layout = WorkspaceLayout(root)
    with workspace_lock(layout, "kuzu"):
        importer = SPAWN.Process(target=_run_import, args=(str(root), str(root / "import.json")))
        importer.start()
        try:
            assert _until(lambda: lock_wanted(layout, "kuzu") and _database_write_locked(layout.db_path), 60)
            yield importer
        except BaseException:
            importer.kill()
            raise


def _claim(root: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(WorkspaceLayout(root).db_path)
    try:
        return conn.execute("SELECT embedding_model, dimension FROM vector_collections WHERE collection = 'newc'"
                            ).fetchall()
    finally:
        conn.close()


def _settings_model(root: Path) -> str:
    path = WorkspaceLayout(root).vectordb_dir / "newc" / "collection.json"
    return str(json.loads(path.read_text(encoding="utf-8"))["embedding_model"])


def _result(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def test_an_agent_writing_to_a_collection_an_import_is_creating_waits_and_follows_its_model(tmp_path: Path) -> None:
    agent_out = tmp_path / "agent.json"
    ready = SPAWN.Event()
    with _import_paused_in_its_transaction(tmp_path) as importer:
        agent = SPAWN.Process(target=_agent_write, args=(str(tmp_path), ready, str(agent_out)))
        agent.start()
        assert ready.wait(60)
        # Give the agent's write time to resolve the collection's settings while the import's claim is
        # not committed (a process that writes the file first would have written it by now).
        _until((tmp_path / ".codebolt" / "vectordb" / "newc" / "collection.json").exists, 2.0)
    for process in (importer, agent):
        process.join(90)
        assert process.exitcode == 0
    assert _result(tmp_path / "import.json") == {"ok": {"graph": 1, "vector": 6}}
    assert "ok" in _result(agent_out), _result(agent_out)
    assert _claim(tmp_path) == [(HASHING, 256)]
    assert _settings_model(tmp_path) == HASHING  # the file names what the database holds
    memory = _memory(str(tmp_path))
    try:
        memory.write("vector://newc/later", {"text": "a later write"})  # the collection stays writable
        assert memory.stores.vectors.get("newc", "agent-doc")["text"] == "written by an agent"  # type: ignore[union-attr,index]
        assert {d["doc_uri"] for d in memory.stores.vectors.list("newc")} == {  # type: ignore[union-attr]
            *(f"doc{i}" for i in range(6)), "agent-doc", "later"}
    finally:
        memory.close()


def test_a_settings_file_written_meanwhile_with_another_model_neither_fails_the_import_nor_stays(
        tmp_path: Path) -> None:
    """An older sidecar (or a hand) writes collection.json naming another model while the import is
    creating the collection: the import's later documents still use the import's model, and once it
    commits, the file is made to follow the database."""
    with _import_paused_in_its_transaction(tmp_path) as importer:
        path = WorkspaceLayout(tmp_path).vectordb_dir / "newc" / "collection.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"embedding_model": default_embedder_name()}), encoding="utf-8")
    importer.join(90)
    assert importer.exitcode == 0
    assert _result(tmp_path / "import.json") == {"ok": {"graph": 1, "vector": 6}}
    assert _claim(tmp_path) == [(HASHING, 256)]
    assert _settings_model(tmp_path) == HASHING
    memory = _memory(str(tmp_path))
    try:
        memory.write("vector://newc/later", {"text": "a later write"})
    finally:
        memory.close()


def test_an_import_naming_another_model_than_the_database_holds_says_so_accurately(tmp_path: Path) -> None:
    """The collection holds the default model's documents, its settings file is gone (a fresh
    checkout): an import naming hashing-256 for it fails, and says what the database holds and that
    the import names another model, not a file that does not exist."""
    memory = _memory(str(tmp_path))
    try:
        memory.write("vector://newc/first", {"text": "written with the default model"})
        (WorkspaceLayout(tmp_path).vectordb_dir / "newc" / "collection.json").unlink()
        with pytest.raises(ConflictError) as caught:
            import_memory(memory, {"collections": {"newc": {"embedding_model": HASHING}},
                                   "writes": [{"uri": "vector://newc/doc", "value": {"text": "imported"}}]},
                          tmp_path / ".codebolt")
        message = caught.value.message
        assert f"holds {default_embedder_name()} embeddings" in message
        assert f"this import names {HASHING}" in message
        assert "collection.json" not in message
        assert "Rolled back: database (vector)" in message
    finally:
        memory.close()
