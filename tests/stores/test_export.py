"""`memory export` then `memory import` into a PostgreSQL-backed workspace gives the same stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.runtime import Runtime
from tests.lsp.support import seeded_copy
from tests.postgres import fresh_project


def exported(root: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["memory", "export", "-", "--workspace", str(root)]) == 0
    document = json.loads(capsys.readouterr().out)
    document.pop("description")
    return document


def test_export_then_import_into_postgres_gives_the_same_stores(postgres_dsn: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    source = seeded_copy(tmp_path / "embedded")
    runtime = Runtime(source)
    runtime.memory.write("log://audit", {"event_type": "login", "payload": {"user": "ann"}, "ts": 10.0})
    runtime.memory.write("json://plan", {"steps": [1, 2]})
    runtime.memory.write("blob://files/a.bin", "AAEC")
    runtime.close()
    before = exported(source, capsys)
    assert before["writes"] and before["threads"] and before["events"] == {
        "audit": [{"event_type": "login", "payload": {"user": "ann"}, "ts": 10.0}]}
    assert any(w["uri"].startswith("graph://") for w in before["writes"])
    assert any(w["uri"].startswith("vector://") for w in before["writes"])

    (tmp_path / "backup.json").write_text(json.dumps(before))
    target = tmp_path / "shared"
    (target / ".codebolt").mkdir(parents=True)
    (target / ".codebolt" / "context-assembly.json").write_text(json.dumps(
        {"stores": {"backend": "postgres", "dsn": postgres_dsn, "project": fresh_project()}}))
    for _ in range(2):  # importing twice gives the same stores
        assert main(["memory", "import", str(tmp_path / "backup.json"), "--workspace", str(target)]) == 0
        capsys.readouterr()
    after = exported(target, capsys)
    assert after == before

    query = "login timeout"
    embedded, shared = Runtime(source), Runtime(target)
    try:
        for collection in before["collections"]:
            assert [h["doc_uri"] for h in shared.vectors.search(collection, query, top_k=3)] == \
                [h["doc_uri"] for h in embedded.vectors.search(collection, query, top_k=3)]
    finally:
        embedded.close()
        shared.close()
