"""The sidecar's warm-up loads what its memories' vector searches read, so that a first assembly
does not wait for the embedding model, a collection's matrix or its keyword postings."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from context_assembly.runtime import Runtime, searched_collections
from context_assembly.stores.embedding import HASHING
from context_assembly.workspace.layout import WorkspaceLayout
from context_assembly.workspace.loader import load_workspace
from tests.postgres import fresh_project


def memory(memory_id: str, *steps: dict[str, object], status: str = "active") -> dict[str, object]:
    return {"id": memory_id, "label": memory_id, "description": "d", "status": status,
            "retrieval": {"pipeline": [{"type": "derive_query", "from": ["input.text"]}, *steps]},
            "contribution": {"section": "knowledge", "priority": "medium", "max_items": 5}}


def search(collection: str, mode: str | None = None) -> dict[str, object]:
    step: dict[str, object] = {"type": "vector_search", "collection": collection, "topK": 3}
    return step if mode is None else {**step, "mode": mode}


MEMORIES = [
    memory("docs-plain", search("docs")),
    memory("docs-hybrid", search("docs", "hybrid"), {"type": "rank", "strategy": "score_desc"}),
    memory("notes", search("notes", "vector")),
    memory("off", search("archive", "hybrid"), status="disabled"),
    memory("per-user", search("${scope.user.user_id}", "hybrid")),
    memory("kv", {"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["ada"]}),
]


def workspace(root: Path) -> Path:
    folder = root / ".codebolt" / "PersistentMemory"
    folder.mkdir(parents=True)
    for definition in MEMORIES:
        (folder / f"{definition['id']}.json").write_text(json.dumps(definition))
    return root


@contextmanager
def opened(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root)
    try:
        yield runtime
    finally:
        runtime.close()


def test_the_collections_searched_and_whether_hybrid(tmp_path: Path) -> None:
    assert searched_collections(load_workspace(workspace(tmp_path))) == {"docs": True, "notes": False}


def test_searches_inside_conditional_branches_are_found(tmp_path: Path) -> None:
    branchy = memory("branchy", {"type": "conditional", "condition": {"field": "addVar.phase", "operator": "eq",
                                                                     "value": "planning"},
                                 "then_steps": [search("plans", "hybrid")], "else_steps": [search("notes")]})
    folder = workspace(tmp_path) / ".codebolt" / "PersistentMemory"
    (folder / "branchy.json").write_text(json.dumps(branchy))
    assert searched_collections(load_workspace(tmp_path)) == {"docs": True, "notes": False, "plans": True}


def test_the_warm_up_loads_matrices_and_postings_of_the_collections_searched(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with opened(root) as writer:
        for collection in ("docs", "notes", "archive"):
            writer.memory.vectors.settings(collection, HASHING)  # type: ignore[union-attr]
            writer.memory.vectors.upsert_many(collection, [  # type: ignore[union-attr]
                (f"d{i}", f"{collection} text number {i}", {}) for i in range(20)])
    with opened(root) as runtime:  # a new sidecar's
        index = runtime.memory.vectors.index  # type: ignore[union-attr]
        index.postings.min_chunks, index.postings.background = 0, False
        assert runtime.prepare_searches(runtime.workspace()) == ["docs", "notes"]
        assert sorted(index._indexes) == ["docs", "notes"]  # the matrices, not the disabled memory's
        assert index.postings._snapshot is not None  # "docs" is searched hybrid


def test_the_warm_up_creates_no_database(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with opened(root) as runtime:
        assert runtime.prepare_searches(runtime.workspace()) == []
    assert not WorkspaceLayout(root).db_path.exists()


def test_collections_never_written_are_left_to_the_first_search(tmp_path: Path) -> None:
    with opened(workspace(tmp_path)) as runtime:
        runtime.memory.write("kv://users/ada", "the database exists now")
        assert runtime.prepare_searches(runtime.workspace()) == []


def test_a_collection_that_cannot_be_prepared_is_logged_and_the_others_are(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    root = workspace(tmp_path)
    with opened(root) as writer:
        writer.memory.vectors.settings("docs", HASHING)  # type: ignore[union-attr]
        writer.memory.vectors.upsert("docs", "d1", "docs text", {})  # type: ignore[union-attr]
        db = writer.memory.vectors.index._db  # type: ignore[union-attr]
        with db.transaction() as conn:  # written by a version that knew another embedding model
            conn.execute("INSERT INTO vector_collections VALUES ('notes', 'retired-model', 8)")
    with opened(root) as runtime, caplog.at_level(logging.WARNING):
        assert runtime.prepare_searches(runtime.workspace()) == ["docs"]
    assert "could not prepare the searches of collection 'notes'" in caplog.text
    assert "retired-model" in caplog.text


def test_on_postgresql_the_models_of_the_collections_searched_are_loaded(tmp_path: Path, postgres_dsn: str) -> None:
    root = workspace(tmp_path)
    (root / ".codebolt" / "context-assembly.json").write_text(json.dumps(
        {"stores": {"backend": "postgres", "dsn": postgres_dsn, "project": fresh_project()}}))
    with opened(root) as writer:
        writer.memory.vectors.settings("docs", HASHING)  # type: ignore[union-attr]
        writer.memory.vectors.upsert("docs", "d1", "docs text", {})  # type: ignore[union-attr]
    with opened(root) as runtime:  # a new sidecar's: "notes" holds nothing yet
        assert runtime.prepare_searches(runtime.workspace()) == ["docs"]
