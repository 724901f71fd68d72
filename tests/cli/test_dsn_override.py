"""`CONTEXT_ASSEMBLY_DSN` overrides `stores.dsn` for `serve` and every CLI command that opens the
stores: the settings file names a database that does not exist, the variable the real one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.runtime import Runtime
from tests.lsp.support import RawServer, frame
from tests.postgres import fresh_project

PREFS = {"id": "prefs", "label": "Preferences", "description": "d", "status": "active",
         "retrieval": {"pipeline": [{"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["ada"]}]},
         "contribution": {"section": "constraints", "priority": "high", "max_items": 10}}
REQUEST = {"scope_variables": {}, "input": {"text": "t"}, "explicit_memory": ["prefs"]}


@pytest.fixture
def root(tmp_path: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    nowhere = tmp_path / "no-server"
    nowhere.mkdir()
    codebolt = tmp_path / "ws" / ".codebolt"
    (codebolt / "PersistentMemory").mkdir(parents=True)
    (codebolt / "context-assembly.json").write_text(json.dumps({"stores": {
        "backend": "postgres", "dsn": f"postgresql://postgres:@/postgres?host={nowhere}", "project": fresh_project()}}))
    (codebolt / "PersistentMemory" / "prefs.json").write_text(json.dumps(PREFS))
    (tmp_path / "request.json").write_text(json.dumps(REQUEST))
    monkeypatch.setenv("CONTEXT_ASSEMBLY_DSN", postgres_dsn)
    return tmp_path / "ws"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_every_store_command_uses_the_variable(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(root)
    assert json.loads(run(capsys, "db", "migrate", "--workspace", ws))["backend"] == "postgres"
    run(capsys, "memory", "write", "kv://users/ada", '"answers in French"', "--workspace", ws)
    assert json.loads(run(capsys, "memory", "read", "kv://users/ada", "--workspace", ws))["value"] == \
        "answers in French"
    assert "ada" in run(capsys, "memory", "list", "kv://users", "--workspace", ws)
    exported = json.loads(run(capsys, "memory", "export", "-", "--workspace", ws))
    assert "answers in French" in json.dumps(exported)
    assembled = json.loads(run(capsys, "assemble", "--request", str(root.parent / "request.json"), "--json",
                               "--workspace", ws))
    assert "answers in French" in json.dumps(assembled["context"]["constraints"])
    run(capsys, "memory", "delete", "kv://users/ada", "--workspace", ws)
    (root.parent / "seed.json").write_text(json.dumps(exported))
    run(capsys, "memory", "import", str(root.parent / "seed.json"), "--workspace", ws)
    runtime = Runtime(root)  # what the commands wrote is in the variable's database
    try:
        assert runtime.memory.read("kv://users/ada")["value"] == "answers in French"
    finally:
        runtime.close()


def test_serve_uses_the_variable(root: Path) -> None:
    server = RawServer(root)
    server.initialize()
    for n, (method, params) in enumerate([("memory/write", {"uri": "kv://users/ada", "value": 1}),
                                          ("memory/read", {"uri": "kv://users/ada"})], start=1):
        server.send(frame({"jsonrpc": "2.0", "id": n, "method": method, "params": params}))
        answer = server.answer(n, timeout=60)
        assert "result" in answer, answer
    assert answer["result"]["value"] == 1
    assert server.close() == 0
