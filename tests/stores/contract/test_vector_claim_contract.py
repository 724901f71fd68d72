"""On every backend: a write to a collection that another sidecar's batch (a `memory import`) is
creating with another model waits for it and follows its model; the settings file names what the
database holds."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.stores.embedding import HASHING, default_embedder_name
from context_assembly.stores.store_set import StoreSet
from tests.postgres import fresh_project
from tests.stores.contract.conftest import open_backend

pytestmark = pytest.mark.skipif(importlib.util.find_spec("wordllama") is None,
                                reason="needs a default model other than the batch's (hashing-256)")


@pytest.fixture
def pair(backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[tuple[StoreSet, StoreSet]]:
    """Two StoreSets on the same data and checkout (two sidecars)."""
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    project = fresh_project()
    first = open_backend(backend, tmp_path / "workspace", request, project)
    second = open_backend(backend, tmp_path / "workspace", request, project)
    yield first, second
    first.close()
    second.close()


def test_a_write_racing_a_batch_that_creates_the_collection_follows_its_model(
        pair: tuple[StoreSet, StoreSet], tmp_path: Path) -> None:
    importer, agent = pair
    assert importer.vectors is not None and agent.vectors is not None
    assert default_embedder_name() != HASHING
    settings_file = tmp_path / "workspace" / ".codebolt" / "vectordb" / "newc" / "collection.json"
    inside, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def run_import() -> None:  # as `memory import` does: settings staged, one batch, then the files
        assert importer.vectors is not None
        staged = importer.vectors.stage_settings({"newc": HASHING})
        try:
            with importer.batch():
                importer.vectors.upsert("newc", "doc", "imported words", {})
                inside.set()
                release.wait(30)
                importer.vectors.upsert("newc", "doc2", "more imported words", {})
            staged.commit()
            outcome["import"] = "ok"
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            staged.discard()
            outcome["import"] = f"{type(exc).__name__}: {exc}"

    def run_agent() -> None:
        assert agent.vectors is not None
        try:
            agent.vectors.upsert("newc", "agent-doc", "written by an agent", {})
            outcome["agent"] = "ok"
        except Exception as exc:  # noqa: BLE001
            outcome["agent"] = f"{type(exc).__name__}: {exc}"

    importing = threading.Thread(target=run_import)
    importing.start()
    try:
        assert inside.wait(30)
        writing = threading.Thread(target=run_agent)
        writing.start()
        # the agent's write resolves the collection's settings while the batch's claim is uncommitted
        deadline = time.monotonic() + 1.0
        while not settings_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        release.set()
        importing.join(60)
    writing.join(60)
    assert outcome == {"import": "ok", "agent": "ok"}
    assert json.loads(settings_file.read_text(encoding="utf-8"))["embedding_model"] == HASHING
    for sidecar in (importer, agent):
        assert sidecar.vectors is not None
        assert sidecar.vectors.settings("newc").embedding_model == HASHING
        assert sidecar.vectors.index.claimed_model("newc") == (HASHING, 256)  # type: ignore[attr-defined]
    agent.vectors.upsert("newc", "later", "a later write", {})
    assert {d["doc_uri"] for d in agent.vectors.list("newc")} == {"doc", "doc2", "agent-doc", "later"}


def test_settings_claim_a_new_collection_for_every_sidecar(pair: tuple[StoreSet, StoreSet]) -> None:
    """`settings(collection, model)` on a collection that holds nothing pins the model in the
    database: another sidecar's first write uses it, and asking for another model gets the one held."""
    first, second = pair
    assert first.vectors is not None and second.vectors is not None
    assert first.vectors.settings("pinned", HASHING).embedding_model == HASHING
    second.vectors.upsert("pinned", "d", "some words", {})
    assert second.vectors.index.claimed_model("pinned") == (HASHING, 256)  # type: ignore[attr-defined]
    assert second.vectors.settings("pinned", default_embedder_name()).embedding_model == HASHING
