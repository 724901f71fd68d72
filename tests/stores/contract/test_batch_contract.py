"""`StoreSet.batch()` and `NoteStore.stage()`: many writes, all or nothing, on every backend."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError, StorageError
from context_assembly.stores.embedding import HASHING
from context_assembly.stores.graph import GraphEdge, GraphNode
from context_assembly.stores.interfaces import Batching, StagedWrites
from context_assembly.stores.store_set import StoreSet
from context_assembly.workspace.layout import WorkspaceLayout
from tests.postgres import fresh_project
from tests.stores.contract.conftest import open_backend
from tests.stores.refusals import fail_commit_on_kv_key, refuse_kv_key


class Boom(Exception):
    pass


@pytest.fixture
def pair(backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[tuple[StoreSet, StoreSet]]:
    """Two StoreSets on the same data (two connections: two sidecars, say)."""
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    project = fresh_project()
    first = open_backend(backend, tmp_path / "workspace", request, project)
    second = open_backend(backend, tmp_path / "workspace", request, project)
    yield first, second
    first.close()
    second.close()


def write_every_batched_kind(stores: StoreSet) -> None:
    assert stores.vectors is not None
    stores.kv.set("default", "default", "k", {"v": 1})
    stores.json_docs.put("doc", {"a": [1]})
    stores.working.set("t-1", "scratch", "x")
    stores.blobs.put("files", "a.bin", b"\x00\x01")
    stores.events.append("audit", "login", {"user": "ann"}, 10.0)
    stores.episodic.append("t-1", {"role": "user", "content": "hi"})
    stores.vectors.upsert("docs", "d1", "the login request times out", {})
    if "graph" in stores.batched:
        assert stores.graph is not None
        stores.graph.upsert_node("default", "a", "K", "a", {})


def snapshot(stores: StoreSet) -> dict[str, Any]:
    """What a reader sees in every batched kind."""
    assert stores.vectors is not None
    seen: dict[str, Any] = {
        "kv": [(e.key, e.value) for e in stores.kv.list()], "json": stores.json_docs.get("doc"),
        "working": stores.working.list("t-1"), "blob": stores.blobs.get("files", "a.bin"),
        "log": [e["event_type"] for e in stores.events.search("audit")],
        "episodic": [t["content"] for t in stores.episodic.recent("t-1")],
        "vector": [d["doc_uri"] for d in stores.vectors.list("docs")]}
    if "graph" in stores.batched:
        assert stores.graph is not None
        seen["graph"] = stores.graph.get_node("default", "a") is not None
    return seen


def generations(stores: StoreSet) -> dict[str, int]:
    return {scheme: stores.generation(scheme) for scheme in sorted(stores.batched)}


def test_the_database_batches_every_kind_it_holds(stores: StoreSet) -> None:
    assert isinstance(stores.database, Batching)
    assert {"kv", "json", "working", "blob", "log", "episodic", "vector"} <= stores.batched
    assert "markdown" not in stores.batched and "file" not in stores.batched


def test_a_failed_batch_writes_nothing_and_a_finished_one_everything(stores: StoreSet) -> None:
    assert stores.vectors is not None
    stores.vectors.settings("docs", HASHING)
    empty, before = snapshot(stores), generations(stores)
    with pytest.raises(Boom), stores.batch():
        write_every_batched_kind(stores)
        assert stores.database is not None and stores.database.in_batch()
        raise Boom
    assert snapshot(stores) == empty and generations(stores) == before
    assert stores.database is not None and not stores.database.in_batch()
    with stores.batch():
        write_every_batched_kind(stores)
    after = snapshot(stores)
    assert after["kv"] == [("k", {"v": 1})] and after["blob"] == b"\x00\x01" and after["vector"] == ["d1"]
    assert after["log"] == ["login"] and after["episodic"] == ["hi"] and after.get("graph", True)
    assert all(generations(stores)[scheme] > before[scheme] for scheme in stores.batched)


def test_inside_a_batch_its_writes_are_seen_only_by_it(pair: tuple[StoreSet, StoreSet]) -> None:
    first, second = pair
    with first.batch():
        first.kv.set("default", "default", "k", 1)
        assert first.kv.get("default", "default", "k") is not None  # the batch reads its own writes
        assert second.kv.get("default", "default", "k") is None  # nobody else sees them yet
    entry = second.kv.get("default", "default", "k")
    assert entry is not None and entry.value == 1


def test_a_refused_write_inside_a_batch_undoes_only_itself(stores: StoreSet) -> None:
    with stores.batch():
        stores.json_docs.put("doc", {"a": 1})
        with pytest.raises(InvalidParamsError):
            stores.json_docs.put("absent", 1, "/x")  # a pointer into a missing document
        stores.kv.set("default", "default", "k", 2)
    assert stores.json_docs.get("doc") == (True, {"a": 1}) and stores.json_docs.get("absent") == (False, None)
    assert [e.key for e in stores.kv.list()] == ["k"]


def test_a_batch_inside_a_batch_joins_it(stores: StoreSet) -> None:
    with pytest.raises(Boom), stores.batch():
        with stores.batch():
            stores.kv.set("default", "default", "inner", 1)
        stores.kv.set("default", "default", "outer", 1)
        raise Boom
    assert stores.kv.list() == []


def test_a_write_the_database_refuses_fails_the_batch(stores: StoreSet, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    undo = _install(refuse_kv_key, "bad", stores, tmp_path, request)
    try:
        with pytest.raises(StorageError, match="key bad is refused"), stores.batch():
            stores.json_docs.put("doc", {"a": 1})
            stores.kv.set_many([("default", "default", "ok", 1), ("default", "default", "bad", 2)])
        assert stores.json_docs.get("doc") == (False, None) and stores.kv.list() == []
    finally:
        undo()


def test_a_failing_commit_rolls_back_the_whole_batch(stores: StoreSet, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    undo = _install(fail_commit_on_kv_key, "late", stores, tmp_path, request)
    try:
        with pytest.raises(StorageError), stores.batch():
            stores.json_docs.put("doc", {"a": 1})
            stores.kv.set("default", "default", "late", 1)  # accepted now; the commit fails
            stores.kv.set("default", "default", "after", 1)
        assert stores.json_docs.get("doc") == (False, None) and stores.kv.list() == []
        stores.kv.set("default", "default", "fine", 1)  # the store keeps working
        assert [e.key for e in stores.kv.list()] == ["fine"]
    finally:
        undo()


def _install(how: Any, key: str, stores: StoreSet, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    layout = WorkspaceLayout(tmp_path / "workspace")
    if stores.backend == "embedded":
        return how(key, layout=layout)
    project = getattr(stores.database, "project", None)
    return how(key, layout=layout, dsn=request.getfixturevalue("postgres_dsn"), project=project)


# -- markdown notes (files on every backend): staged, then renamed into place all or none


def test_staged_notes_appear_only_on_commit(stores: StoreSet) -> None:
    stores.notes.write("old", "before")
    staged = stores.notes.stage([("old", "after"), ("new/deep/one", "fresh")])
    assert isinstance(staged, StagedWrites)
    assert stores.notes.read("old") == "before" and stores.notes.read("new/deep/one") is None
    assert [n.name for n in stores.notes.list()] == ["old"]  # temp files never list as notes
    assert staged.commit() == 2
    assert stores.notes.read("old") == "after" and stores.notes.read("new/deep/one") == "fresh"


def test_discarded_notes_leave_nothing_behind(stores: StoreSet, tmp_path: Path) -> None:
    memory_dir = WorkspaceLayout(tmp_path / "workspace").memory_dir
    stores.notes.write("old", "before")
    before = sorted(p.relative_to(memory_dir) for p in memory_dir.rglob("*"))
    stores.notes.stage([("old", "after"), ("new/deep/one", "fresh")]).discard()
    assert sorted(p.relative_to(memory_dir) for p in memory_dir.rglob("*")) == before
    assert stores.notes.read("old") == "before"


def test_a_failed_rename_puts_back_the_notes_already_replaced(stores: StoreSet, tmp_path: Path) -> None:
    memory_dir = WorkspaceLayout(tmp_path / "workspace").memory_dir
    stores.notes.write("a", "old a")
    staged = stores.notes.stage([("a", "new a"), ("b", "new b"), ("c", "new c")])
    (memory_dir / "c.md").mkdir()  # something else took the note's path since it was staged
    (memory_dir / "c.md" / "keep").write_text("x")
    with pytest.raises(StorageError, match="put back"):
        staged.commit()
    assert stores.notes.read("a") == "old a" and stores.notes.read("b") is None
    assert sorted(p.name for p in memory_dir.iterdir()) == ["a.md", "c.md"]  # no temp file left


def test_staging_refuses_what_a_write_refuses(stores: StoreSet, tmp_path: Path) -> None:
    memory_dir = WorkspaceLayout(tmp_path / "workspace").memory_dir
    with pytest.raises(InvalidParamsError):
        stores.notes.stage([("fine", "text"), ("../escape", "text")])
    with pytest.raises(InvalidParamsError):
        stores.notes.stage([("fine", "text"), ("bad", 5)])  # type: ignore[list-item]
    assert not memory_dir.exists() or list(memory_dir.rglob("*")) == []


def test_blob_values_survive_a_batch_byte_for_byte(stores: StoreSet) -> None:
    data = base64.b64decode("AAEC/w==")
    with stores.batch():
        stores.blobs.put("b", "k", data)
    assert stores.blobs.get("b", "k") == data


def test_graph_loads_join_the_batch_where_the_database_holds_the_graph(stores: StoreSet) -> None:
    if "graph" not in stores.batched:
        assert stores.backend == "embedded"  # its graph is a database of its own, with its own transaction
        return
    assert stores.graph is not None
    with pytest.raises(Boom), stores.batch():
        stores.graph.load([GraphNode("default", "a", "K", "a"), GraphNode("default", "b", "K", "b")],
                          [GraphEdge("default", "e", "R", "a", "b")])  # type: ignore[attr-defined]
        raise Boom
    assert stores.graph.get_node("default", "a") is None and stores.graph.get_edge("default", "e") is None


def test_staged_collection_settings_are_written_only_on_commit(stores: StoreSet, tmp_path: Path) -> None:
    assert stores.vectors is not None
    vectordb = WorkspaceLayout(tmp_path / "workspace").vectordb_dir
    staged = stores.vectors.stage_settings({"fresh": HASHING, "other": None})
    assert stores.vectors.settings("fresh").embedding_model == HASHING  # this thread's writes use it
    with stores.batch():
        stores.vectors.upsert("fresh", "d", "some words", {})
    assert not (vectordb / "fresh").exists()
    assert staged.commit() == 2
    assert (vectordb / "fresh" / "collection.json").is_file()
    assert stores.vectors.settings("fresh").embedding_model == HASHING
    stores.vectors.stage_settings({"dropped": HASHING}).discard()
    assert not (vectordb / "dropped").exists()
    assert "dropped" not in [c["collection"] for c in stores.vectors.list()]
