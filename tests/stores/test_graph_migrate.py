"""A graph written by Kuzu 0.11 (before the switch to LadybugDB) is converted on first open."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from context_assembly.errors import StorageError
from context_assembly.stores.kuzu import KuzuGraph, SessionSettings
from context_assembly.stores.kuzu.migrate import BACKUP_SUFFIX, written_by_kuzu
from context_assembly.stores.kuzu.session import DATABASE_FILE
from context_assembly.workspace.layout import WorkspaceLayout

FAST = SessionSettings(hold_s=0.0, lock_timeout_s=20.0)

# Written by the real Kuzu 0.11.3 in a child process, with the store's schema and two nodes and an edge.
_WRITE_KUZU = """
import sys, kuzu
conn = kuzu.Connection(kuzu.Database(sys.argv[1]))
conn.execute("CREATE NODE TABLE Entity(key STRING, instance STRING, id STRING, kind STRING, name STRING, "
             "attributes STRING, PRIMARY KEY(key))")
conn.execute("CREATE REL TABLE Relates(FROM Entity TO Entity, key STRING, instance STRING, id STRING, "
             "kind STRING, from_id STRING, to_id STRING, attributes STRING)")
for node_id in ("auth", "db"):
    conn.execute("CREATE (:Entity {key: $k, instance: 'default', id: $i, kind: 'module', name: $i, "
                 "attributes: '{\\"tier\\": 1}'})", {"k": "default/" + node_id, "i": node_id})
conn.execute("MATCH (a:Entity {key: 'default/auth'}), (b:Entity {key: 'default/db'}) "
             "CREATE (a)-[:Relates {key: 'default/e1', instance: 'default', id: 'e1', kind: 'DEPENDS_ON', "
             "from_id: 'auth', to_id: 'db', attributes: '{}'}]->(b)")
"""


def kuzu_graph(layout: WorkspaceLayout) -> Path:
    path = layout.kuzu_dir / DATABASE_FILE
    path.parent.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", _WRITE_KUZU, str(path)], check=True)
    assert written_by_kuzu(path)
    return path


def test_a_kuzu_graph_is_converted_on_first_open_and_kept_as_a_backup(tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path)
    path = kuzu_graph(layout)
    with KuzuGraph(layout, settings=FAST) as graph:
        assert graph.get_node("default", "auth")["attributes"] == {"tier": 1}
        hits = graph.neighbors("default", ["auth"], depth=1)
        assert [(hit["id"], hit["path"][0]["kind"]) for hit in hits] == [("db", "DEPENDS_ON")]
        graph.upsert_node("default", "web", "module", "web", {})  # the converted graph takes writes
    assert not written_by_kuzu(path)
    assert written_by_kuzu(path.with_name(path.name + BACKUP_SUFFIX))
    with KuzuGraph(layout, settings=FAST) as graph:  # a second open converts nothing
        assert sorted(node["id"] for node in graph.list_nodes("default")) == ["auth", "db", "web"]


def test_without_kuzu_installed_the_error_says_how_to_convert(tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path)
    path = kuzu_graph(layout)
    hidden = tmp_path / "no-kuzu"
    hidden.mkdir()
    (hidden / "kuzu.py").write_text("raise ModuleNotFoundError(\"No module named 'kuzu'\")\n")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    try:
        with KuzuGraph(layout, settings=FAST) as graph, pytest.raises(StorageError) as caught:
            graph.get_node("default", "auth")
    finally:
        monkeypatch.undo()
    assert "pip install 'kuzu==0.11.3'" in caught.value.message
    assert written_by_kuzu(path)  # nothing was changed: the next try, with Kuzu, converts it
