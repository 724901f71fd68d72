"""Shared fixtures: the shipped example workspace and a scratch copy of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.postgres import postgres_dsn  # noqa: F401  (a session fixture every test folder can use)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "quickstart"


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A private copy of examples/quickstart (tests may write to it)."""
    target = tmp_path / "quickstart"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks"))
    return target
