"""A graph of tens of megabytes moves in and out of the embedded store: the database's sort filled
its 64 MiB buffer pool on export, and an import's one transaction did not fit in it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.runtime import Runtime
from context_assembly.stores.kuzu.session import BUFFER_ENV

# 2 x 4,000 nodes of ~4 KB: the database's own sort of them fills a sidecar's 64 MiB pool (checked
# five times out of five), a plain read leaves room (at 6,000 it failed once in CI: too little)
NODES = 4_000


def _graph(prefix: str) -> dict[str, object]:
    body = "".join(chr(0x4E00 + (n * 7919) % 20_000) for n in range(1_400))  # ~4 KB a node, hard to compress
    return {"nodes": [{"id": f"{prefix}{n}", "kind": "doc", "name": f"doc {n}",
                       "attributes": {"body": body[n % 97:]}} for n in range(NODES)]}


def test_a_big_graph_is_imported_and_exported(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BUFFER_ENV, raising=False)
    (tmp_path / "ws" / ".codebolt").mkdir(parents=True)
    workspace = ["--workspace", str(tmp_path / "ws")]
    for part in ("a", "b"):
        source = tmp_path / f"{part}.json"
        source.write_text(json.dumps({"graph": _graph(part)}))
        assert main(["memory", "import", str(source), *workspace]) == 0, capsys.readouterr().err
    assert BUFFER_ENV not in os.environ  # the command's own room, given back
    runtime = Runtime(tmp_path / "ws")  # a sidecar's default pool: the export's read still fits
    try:
        assert runtime.memory.graph is not None
        dumped = runtime.memory.graph.dump()
    finally:
        runtime.close()
    assert len(dumped["nodes"]) == 2 * NODES
    assert dumped["nodes"] == sorted(dumped["nodes"], key=lambda n: (n["instance"], n["id"]))
    capsys.readouterr()
    target = tmp_path / "out.json"
    assert main(["memory", "export", str(target), *workspace]) == 0, capsys.readouterr().err
    exported = json.loads(target.read_text())
    assert sum(1 for w in exported["writes"] if w["uri"].startswith("graph://")) == 2 * NODES
