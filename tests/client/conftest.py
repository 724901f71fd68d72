"""A seeded copy of examples/quickstart per test module (the client tests start their own sidecars)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lsp.support import clone, seeded_copy


@pytest.fixture(scope="session")
def client_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seeded_copy(tmp_path_factory.mktemp("client-template") / "quickstart")


@pytest.fixture(scope="module")
def workspace(client_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone(client_template, tmp_path_factory.mktemp("client-ws") / "quickstart")
