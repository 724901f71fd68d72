"""`context-assembly db migrate` on a fresh PostgreSQL database, and on the embedded stores."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest

from context_assembly.cli.main import main
from context_assembly.stores.postgres.migrations import LATEST


def settings(root: Path, stores: dict[str, str]) -> Path:
    (root / ".codebolt").mkdir(parents=True)
    (root / ".codebolt" / "context-assembly.json").write_text(json.dumps({"stores": stores}))
    return root


def test_migrate_a_fresh_database_once(postgres_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    monkeypatch.setenv("CONTEXT_ASSEMBLY_DSN", postgres_dsn.replace("/postgres?", f"/{name}?"))
    root = settings(tmp_path / "ws", {"backend": "postgres", "dsn": "postgresql://placeholder@/x"})
    assert main(["db", "migrate", "--workspace", str(root)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first == {"backend": "postgres", "project": "ws", "applied": list(range(1, LATEST + 1)),
                     "schema_version": LATEST}
    assert main(["db", "migrate", "--workspace", str(root)]) == 0
    assert json.loads(capsys.readouterr().out)["applied"] == []


def test_migrate_reports_an_unreachable_database(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    (tmp_path / "nothing").mkdir()
    root = settings(tmp_path / "ws", {"backend": "postgres",
                                      "dsn": f"postgresql://postgres:@/postgres?host={tmp_path / 'nothing'}"})
    assert main(["db", "migrate", "--workspace", str(root)]) == 1
    assert "unreachable" in capsys.readouterr().err
    # from a subfolder the workspace is found walking up, as by every command (it read the embedded
    # default there and reported success)
    (root / "src" / "auth").mkdir(parents=True)
    monkeypatch.chdir(root / "src" / "auth")
    assert main(["db", "migrate"]) == 1
    assert "unreachable" in capsys.readouterr().err


def test_embedded_needs_no_migration(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".codebolt").mkdir()
    assert main(["db", "migrate", "--workspace", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "embedded"
    monkeypatch.chdir(tmp_path.parent)  # no .codebolt/ here or above: said so, exit 2
    assert main(["db", "migrate"]) == 2 and "no .codebolt/ folder" in capsys.readouterr().err
