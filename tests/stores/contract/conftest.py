"""Every store kind's contract, run against every backend: a backend is correct when these pass.

`stores` is a fresh StoreSet per test: embedded in a temporary workspace, or PostgreSQL (the
session's server) under a project key of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from context_assembly.stores.factory import open_stores
from context_assembly.stores.store_set import StoreSet
from context_assembly.workspace.layout import WorkspaceLayout
from context_assembly.workspace.settings import StoreSettings
from tests.postgres import fresh_project

BACKENDS = ["embedded", "postgres"]


def open_backend(backend: str, root: Path, request: pytest.FixtureRequest, project: str | None = None) -> StoreSet:
    layout = WorkspaceLayout(root)
    if backend == "embedded":
        return open_stores(layout)
    dsn = request.getfixturevalue("postgres_dsn")
    return open_stores(layout, StoreSettings(backend="postgres", dsn=dsn, project=project or fresh_project()))


def open_sidecars(backend: str, root: Path, request: pytest.FixtureRequest, count: int) -> list[StoreSet]:
    """`count` StoreSets on one workspace or one PostgreSQL project: sidecars, each with its own connections."""
    project = fresh_project()
    return [open_backend(backend, root, request, project) for _ in range(count)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def stores(backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[StoreSet]:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    opened = open_backend(backend, tmp_path / "workspace", request)
    yield opened
    opened.close()
