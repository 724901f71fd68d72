"""A real PostgreSQL with pgvector for the tests: the `pgserver` wheel, started in a temporary folder.

Nothing to install by hand. Where the wheel is missing the PostgreSQL tests skip, except under CI
(`CI=true`), where they fail: the shared-database backend is never left untested there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def start_server(folder: Path) -> object:
    try:
        with warnings.catch_warnings():  # pgserver asks platformdirs for a runtime folder as it is
            # imported; without XDG_RUNTIME_DIR (CI, a root shell) platformdirs warns and uses
            # /tmp/runtime-<uid>, which serves its lock file as well
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import pgserver  # type: ignore[import-untyped]
    except ImportError as exc:
        if in_ci():
            pytest.fail(f"PostgreSQL tests need the pgserver wheel (pip install -e '.[test]'): {exc}")
        pytest.skip("pgserver is not installed (pip install -e '.[test]')")
    return pgserver.get_server(str(folder), cleanup_mode="stop")


def server_dsn(server: object) -> str:
    return str(server.get_uri())  # type: ignore[attr-defined]


def server_folder() -> Path:
    """A short, world-readable temporary folder: the socket path must stay short, and pgserver runs
    the server as its own user when the tests run as root."""
    folder = Path(tempfile.mkdtemp(prefix="ca-pg-"))
    folder.chmod(0o755)
    return folder


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN (Unix socket) of one PostgreSQL server shared by the whole test session."""
    folder = server_folder()
    try:
        server = start_server(folder / "data")
        try:
            yield server_dsn(server)
        finally:
            server.cleanup()  # type: ignore[attr-defined]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fresh_project() -> str:
    """A project key no other test uses: tests share the server, never each other's rows."""
    return f"test-{uuid.uuid4().hex[:12]}"
