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


def test_a_thread_or_log_past_the_read_limit_is_exported_whole(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A read's limit (limits.log_limit, 10,000) bounds one request, not the export: a thread or a
    log of 10,001 entries could not be exported (exit 2, no file), so neither backed up nor moved."""
    many = 10_001
    source = tmp_path / "big.json"
    source.write_text(json.dumps({
        "threads": {"long": [{"role": "user", "content": f"turn {n}", "ts": float(n)} for n in range(many)]},
        "events": {"big": [{"event_type": "tick", "payload": {"n": n}, "ts": float(n)} for n in range(many)]}}))
    (tmp_path / "ws" / ".codebolt").mkdir(parents=True)
    workspace = ["--workspace", str(tmp_path / "ws")]
    assert main(["memory", "import", str(source), *workspace]) == 0
    target = tmp_path / "out.json"
    assert main(["memory", "export", str(target), *workspace]) == 0
    capsys.readouterr()
    exported = json.loads(target.read_text())
    assert len(exported["threads"]["long"]) == many and exported["threads"]["long"][-1]["content"] == "turn 10000"
    assert [e["payload"]["n"] for e in exported["events"]["big"]] == list(range(many))


def test_appends_during_an_export_never_push_the_oldest_out(tmp_path: Path) -> None:
    """The export counted each log and thread first and then read that many of the newest: what
    another process appended meanwhile pushed the oldest entries out of the file, silently."""
    import threading

    from context_assembly.stores.exporter import export_memory

    (tmp_path / ".codebolt").mkdir()
    exporting = Runtime(tmp_path)
    appending = Runtime(tmp_path)  # another sidecar: its own connections
    stop = threading.Event()

    def append() -> None:
        n = 0
        while not stop.is_set():
            appending.memory.write("log://audit", {"event_type": "live", "n": n})
            appending.memory.write("episodic://t0", {"role": "user", "content": f"live {n}"})
            n += 1

    try:
        for n in range(100):
            exporting.memory.write("log://audit", {"event_type": "tick", "n": n})
        exporting.memory.write("episodic://t0", {"role": "user", "content": "first"})
        for n in range(1, 600):  # threads to list and read: time for the appender to get in between
            exporting.memory.write(f"episodic://t{n}", {"role": "user", "content": "x"})
        writer = threading.Thread(target=append)
        writer.start()
        try:
            document = export_memory(exporting.memory)
        finally:
            stop.set()
            writer.join(30)
    finally:
        exporting.close()
        appending.close()
    ticks = [e["payload"]["n"] for e in document["events"]["audit"] if e["event_type"] == "tick"]
    assert ticks == list(range(100))
    assert document["threads"]["t0"][0]["content"] == "first"


def test_a_collections_chunking_travels_with_its_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only the model was exported: the target chunked with the defaults, and search changed."""
    source, target = tmp_path / "a", tmp_path / "b"
    for root in (source, target):
        (root / ".codebolt").mkdir(parents=True)
    runtime = Runtime(source)
    try:
        runtime.memory.vectors.settings("notes", "hashing-256")
        settings_file = source / ".codebolt" / "vectordb" / "notes" / "collection.json"
        settings = json.loads(settings_file.read_text())
        settings.update(chunk_size=40, chunk_overlap=0, search_mode="hybrid")
        settings_file.write_text(json.dumps(settings))
        text = " ".join(f"Sentence {n} is about topic{n} and nothing else at all." for n in range(30))
        runtime.memory.write("vector://notes/long", {"text": text})
        before = runtime.memory.vectors.get("notes", "long")
    finally:
        runtime.close()
    document = exported(source, capsys)
    assert document["collections"]["notes"] == {"embedding_model": "hashing-256", "chunk_size": 40,
                                                 "chunk_overlap": 0, "search_mode": "hybrid"}
    (tmp_path / "x.json").write_text(json.dumps(document))
    assert main(["memory", "import", str(tmp_path / "x.json"), "--workspace", str(target)]) == 0
    runtime = Runtime(target)
    try:
        after = runtime.memory.vectors.get("notes", "long")
        assert runtime.memory.vectors.settings("notes").chunk_size == 40
    finally:
        runtime.close()
    assert before is not None and after is not None and after["chunks"] == before["chunks"] > 1
