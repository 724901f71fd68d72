"""Shared fixtures: the shipped example workspace and a scratch copy of it."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.collector import collector  # noqa: F401  (a fixture for tests that count collections)
from tests.postgres import postgres_dsn  # noqa: F401  (a session fixture every test folder can use)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "quickstart"

# The compile cache of rule engines (rules/cache.py) in a folder of this run, for the servers the
# tests spawn too: never the user's, and every run starts without entries.
_RULE_CACHE = tempfile.mkdtemp(prefix="rule-cache-")
os.environ["CONTEXT_ASSEMBLY_RULE_CACHE"] = _RULE_CACHE
atexit.register(shutil.rmtree, _RULE_CACHE, True)
# The embedding model's shared float32 vectors (stores/model_files.py) likewise
_MODEL_CACHE = tempfile.mkdtemp(prefix="model-cache-")
os.environ["CONTEXT_ASSEMBLY_MODEL_CACHE"] = _MODEL_CACHE
atexit.register(shutil.rmtree, _MODEL_CACHE, True)


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A private copy of examples/quickstart (tests may write to it)."""
    target = tmp_path / "quickstart"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks"))
    return target
