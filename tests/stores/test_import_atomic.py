"""`memory import` is all or nothing: a write the stores refuse part-way leaves every store as it was.

Each failure is a real one, made by the database or the store (a trigger refusing a key, a
deferred check failing the commit, an edge whose node does not exist, a JSON pointer into a missing
document), on the embedded stores and on PostgreSQL; "as it was" is `memory export` before and after.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.cli.main import main
from context_assembly.stores.embedding import HASHING
from context_assembly.workspace.atomic import TEMP_NAME, workspace_lock
from context_assembly.workspace.layout import WorkspaceLayout
from tests.postgres import fresh_project
from tests.stores.refusals import fail_commit_on_kv_key, refuse_kv_key

SEED = {
    "collections": {"docs": {"embedding_model": HASHING}},
    "writes": [{"uri": "kv://users/ann", "value": {"theme": "dark"}},
               {"uri": "markdown://decisions", "value": "We use SQLite."},
               {"uri": "vector://docs/a.md", "value": {"text": "login fails with a timeout", "metadata": {}}},
               {"uri": "graph://default/node/svc", "value": {"kind": "Service", "name": "svc"}}],
    "threads": {"t-1": [{"role": "user", "content": "hello"}]},
    "events": {"audit": [{"event_type": "login", "payload": {"user": "ann"}, "ts": 10.0}]},
}


def import_document(bad: dict[str, Any]) -> dict[str, Any]:
    """Something in every store, the notes and a new collection included, then `bad` as the Nth write."""
    return {
        "collections": {"fresh": {"embedding_model": HASHING}},
        "writes": [{"uri": "kv://users/bob", "value": {"theme": "light"}},
                   {"uri": "kv://users/ann", "value": {"theme": "light"}},
                   {"uri": "json://plan", "value": {"steps": [1, 2]}},
                   {"uri": "working://t-1/scratch", "value": "x"},
                   {"uri": "blob://files/a.bin", "value": "AAEC"},
                   {"uri": "markdown://decisions", "value": "We use PostgreSQL."},
                   {"uri": "markdown://new/note", "value": "fresh"},
                   {"uri": "vector://fresh/b.md", "value": {"text": "deploying to production", "metadata": {}}},
                   {"uri": "vector://docs/a.md", "value": {"text": "replaced text", "metadata": {}}},
                   {"uri": "graph://default/node/db", "value": {"kind": "Database", "name": "db"}},
                   bad,
                   {"uri": "kv://users/zed", "value": 1}],
        "threads": {"t-1": [{"role": "user", "content": "replaced", "ts": 12.0}],
                    "t-2": [{"role": "user", "content": "new", "ts": 13.0}]},
        "events": {"deploys": [{"event_type": "deploy", "ts": 11.0}]},
        "graph": {"nodes": [{"id": "api", "kind": "Service"}], "edges": [{"kind": "CALLS", "from": "api", "to": "db"}]},
    }


BAD_INDEX = 10  # where `bad` sits in the writes


class Workspace:
    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str], dsn: str | None, project: str | None) -> None:
        self.root, self.capsys, self.dsn, self.project = root, capsys, dsn, project
        self.layout = WorkspaceLayout(root)

    def run(self, *argv: str) -> tuple[int, str, str]:
        status = main([*argv, "--workspace", str(self.root)])
        out = self.capsys.readouterr()
        return status, out.out, out.err

    def import_(self, document: dict[str, Any]) -> tuple[int, Any, str]:
        path = self.root.parent / "import.json"
        path.write_text(json.dumps(document))
        status, out, err = self.run("memory", "import", str(path))
        return status, json.loads(out) if out.strip() else None, err

    def export(self) -> dict[str, Any]:
        status, out, _ = self.run("memory", "export", "-")
        assert status == 0
        document = json.loads(out)
        document.pop("description")
        return document

    def files(self) -> list[str]:
        """Every file under .codebolt/ but the databases: notes, collection settings, temp files."""
        codebolt = self.root / ".codebolt"
        skip = ("db", "kuzu", ".locks")
        return sorted(str(p.relative_to(codebolt)) for p in codebolt.rglob("*")
                      if p.is_file() and p.relative_to(codebolt).parts[0] not in skip)

    def install(self, how: Callable[..., Callable[[], None]], key: str) -> Callable[[], None]:
        return how(key, layout=self.layout, dsn=self.dsn, project=self.project)


@pytest.fixture(params=["embedded", "postgres"])
def workspace(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str],
              monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    root = tmp_path / "ws"
    (root / ".codebolt").mkdir(parents=True)
    dsn = project = None
    if request.param == "postgres":
        dsn, project = request.getfixturevalue("postgres_dsn"), fresh_project()
        (root / ".codebolt" / "context-assembly.json").write_text(json.dumps(
            {"stores": {"backend": "postgres", "dsn": dsn, "project": project}}))
    ws = Workspace(root, capsys, dsn, project)
    status, _, err = ws.import_(SEED)
    assert status == 0, err
    yield ws


def test_a_write_the_database_refuses_leaves_every_store_as_it_was(workspace: Workspace) -> None:
    before, files = workspace.export(), workspace.files()
    undo = workspace.install(refuse_kv_key, "bad")
    try:
        status, out, err = workspace.import_(import_document({"uri": "kv://bad", "value": 1}))
    finally:
        undo()
    assert (status, out) == (1, None)
    assert f"import failed in database at /writes/{BAD_INDEX}" in err and "key bad is refused" in err
    assert "Rolled back: database (" in err and "Nothing was written." in err
    assert workspace.export() == before
    assert workspace.files() == files  # no note, no temp file, no settings file of the new collection


def test_a_graph_the_store_refuses_rolls_back_everything(workspace: Workspace) -> None:
    before, files = workspace.export(), workspace.files()
    document = import_document({"uri": "kv://users/fine", "value": 1})
    document["graph"]["edges"].append({"kind": "CALLS", "from": "api", "to": "nowhere"})  # no such node
    status, out, err = workspace.import_(document)
    assert (status, out) == (1, None)
    assert "'nowhere'" in err and "Nothing was written." in err
    unit = "graph" if workspace.dsn is None else "database"
    assert f"import failed in {unit} at /graph" in err
    assert workspace.export() == before and workspace.files() == files


def test_a_value_refused_at_write_time_is_bad_input_and_writes_nothing(workspace: Workspace) -> None:
    before, files = workspace.export(), workspace.files()
    status, out, err = workspace.import_(import_document({"uri": "json://missing#/a", "value": 1}))
    assert (status, out) == (2, None)  # a JSON pointer into a document that does not exist
    assert f"/writes/{BAD_INDEX}" in err and "Nothing was written." in err
    assert workspace.export() == before and workspace.files() == files


def test_a_failing_commit_says_what_committed(workspace: Workspace) -> None:
    before = workspace.export()
    undo = workspace.install(fail_commit_on_kv_key, "late")
    try:
        status, _, err = workspace.import_(import_document({"uri": "kv://late", "value": 1}))
    finally:
        undo()
    assert status == 1 and "import failed in database:" in err
    after = workspace.export()
    kv = [w for w in after["writes"] if w["uri"].startswith("kv://")]
    assert kv == [w for w in before["writes"] if w["uri"].startswith("kv://")]
    assert after["threads"] == before["threads"] and after["events"] == before["events"]
    if workspace.dsn is None:  # the embedded graph is its own database: it committed just before
        assert "Already committed: graph." in err and "Rolled back: database (" in err
        assert {w["uri"] for w in after["writes"]} - {w["uri"] for w in before["writes"]} == {
            "graph://default/node/api", "graph://default/node/db",
            next(w["uri"] for w in after["writes"] if w["uri"].startswith("graph://default/edge/"))}
    else:  # PostgreSQL holds the graph too: nothing committed
        assert "Nothing was written." in err and after == before


def test_an_import_reports_each_store_and_importing_again_changes_nothing(workspace: Workspace) -> None:
    document = import_document({"uri": "kv://users/fine", "value": 1})
    status, out, err = workspace.import_(document)
    assert status == 0, err
    imported = out["imported"]
    assert imported["written"] == {"blob": 1, "episodic": 2, "graph": 3, "json": 1, "kv": 4, "log": 1,
                                   "markdown": 2, "vector": 2, "working": 1}
    assert imported["stores"] == {"kv": 4, "json": 1, "working": 1, "blob": 1, "markdown": 2, "vector": 2,
                                  "graph": 1}
    database = ["blob", "episodic", "json", "kv", "log", "vector", "working"]
    if workspace.dsn is None:
        assert imported["units"] == [{"unit": "graph", "schemes": ["graph"], "state": "committed"},
                                     {"unit": "database", "schemes": database, "state": "committed"},
                                     {"unit": "notes", "schemes": ["markdown"], "state": "committed"}]
    else:
        assert imported["units"] == [{"unit": "database", "schemes": sorted([*database, "graph"]),
                                      "state": "committed"},
                                     {"unit": "notes", "schemes": ["markdown"], "state": "committed"}]
    once = workspace.export()
    status, out, _ = workspace.import_(document)
    assert status == 0 and workspace.export() == once
    assert out["imported"]["skipped"] == {"events": {"deploys": 1}} and out["imported"]["events"] == 0


def test_every_bad_value_is_named_before_anything_is_written(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    ws = Workspace(tmp_path / "ws", capsys, None, None)
    (ws.root / ".codebolt").mkdir(parents=True)
    status, _, err = ws.import_({
        "writes": [{"uri": "kv://fine", "value": 1},
                   {"uri": "blob://b/k", "value": "not base64!"},
                   {"uri": "markdown://note", "value": 5},
                   {"uri": "file://README.md", "value": "x"},
                   {"uri": "graph://a-view", "value": {}},
                   {"uri": "graph://default/edge/e", "value": {"kind": "R", "from": "a"}},
                   {"uri": "vector://docs/d", "value": {"metadata": {}}},
                   {"uri": "working://t-1", "value": 1}],
        "threads": {"t-1": [{"role": "user"}]},
        "events": {"audit": [{"payload": {}}]}})
    assert status == 2
    for path in ("/writes/1/value", "/writes/2/value", "/writes/3/uri", "/writes/4/uri", "/writes/5/value/to",
                 "/writes/6/value", "/writes/7/uri", "/threads/t-1/0/content", "/events/audit/0/event_type"):
        assert path in err, path
    assert "/writes/0" not in err
    assert ws.export() == {"collections": {}, "writes": [], "threads": {}, "events": {}}


KEYS = st.text(alphabet="abcdefgh", min_size=1, max_size=4)
INTEGERS = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what JSON here holds exactly (json_numbers.py)
WRITES = st.lists(st.one_of(
    st.builds(lambda k, v: {"uri": f"kv://ns/{k}", "value": v}, KEYS, INTEGERS | st.text(max_size=5)),
    st.builds(lambda k, v: {"uri": f"json://{k}", "value": {"v": v}}, KEYS, INTEGERS),
    st.builds(lambda k, v: {"uri": f"markdown://{k}", "value": v}, KEYS, st.text(max_size=20)),
    st.builds(lambda k, v: {"uri": f"working://t/{k}", "value": v}, KEYS, st.booleans())), max_size=12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=WRITES, second=WRITES, position=st.integers(min_value=0, max_value=12),
       turns=st.lists(st.text(max_size=8), max_size=4))
def test_wherever_the_refused_write_sits_nothing_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         first: list, second: list, position: int,
                                                         turns: list) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    ws = Workspace(root / "ws", capsys, None, None)
    (ws.root / ".codebolt").mkdir(parents=True)
    assert ws.import_({"writes": first})[0] == 0
    before, files = ws.export(), ws.files()
    writes = list(second)
    writes.insert(min(position, len(writes)), {"uri": "kv://ns/refused", "value": 1})
    undo = ws.install(refuse_kv_key, "refused")
    try:
        status, _, err = ws.import_({"writes": writes, "threads": {"t": [{"role": "user", "content": c, "ts": 1.0}
                                                                          for c in turns]}})
    finally:
        undo()
    assert status == 1 and f"at /writes/{min(position, len(second))}:" in err
    assert ws.export() == before and ws.files() == files


def test_a_crash_in_the_middle_of_an_import_leaves_every_store_as_it_was(workspace: Workspace) -> None:
    """The import process is killed (SIGKILL) while its database transaction is open: the writes
    before that point are gone, and what is left of the notes is hidden temp files only."""
    before, files = workspace.export(), workspace.files()
    path = workspace.root.parent / "crash.json"
    path.write_text(json.dumps(import_document({"uri": "kv://users/fine", "value": 1})))
    with _blocked_mid_import(workspace) as is_waiting:
        process = subprocess.Popen([sys.executable, "-m", "context_assembly", "memory", "import", str(path),
                                    "--workspace", str(workspace.root)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            for _ in range(1200):  # until the import waits, its transaction open (or it ended: a failure)
                if is_waiting() or process.poll() is not None:
                    break
                time.sleep(0.05)
            assert process.poll() is None, "the import ended before it could be killed"
            process.kill()
        finally:
            process.wait()
    assert workspace.export() == before
    left = sorted(set(workspace.files()) - set(files))
    assert all(TEMP_NAME.fullmatch(Path(name).name) for name in left), left


@contextlib.contextmanager
def _blocked_mid_import(workspace: Workspace) -> Iterator[Callable[[], bool]]:
    """Hold what the import needs after its database writes began: the graph's lock (embedded; the
    graph loads last, inside the database transaction) or the advisory lock of thread t-2's
    appends (PostgreSQL). Yields a test of whether the import is waiting for it."""
    if workspace.dsn is None:
        with workspace_lock(workspace.layout, "kuzu", timeout=-1):
            yield lambda: _sqlite_write_locked(workspace.layout.db_path)
        return
    import psycopg

    with psycopg.connect(workspace.dsn) as holder, psycopg.connect(workspace.dsn, autocommit=True) as watcher:
        holder.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"episodic:{workspace.project}:t-2",))
        yield lambda: bool(watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'context-assembly' "
            "AND wait_event_type = 'Lock'").fetchone()[0])  # type: ignore[index]
        holder.rollback()


def _sqlite_write_locked(database: Path) -> bool:
    with contextlib.closing(sqlite3.connect(database, timeout=0, isolation_level=None)) as conn:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return True
        conn.execute("ROLLBACK")
        return False


def test_a_vector_store_outside_the_database_is_reported_as_written_as_it_goes(tmp_path: Path) -> None:
    from context_assembly.errors import StorageError
    from context_assembly.stores.importer import import_memory
    from context_assembly.stores.memory import MemoryRouter
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorStore

    layout = WorkspaceLayout(tmp_path / "ws")
    layout.codebolt.mkdir(parents=True)
    outside = SqliteVectorStore(Database(tmp_path / "vectors.db"), layout.vectordb_dir)  # a database of its own
    memory = MemoryRouter(layout, vectors=outside)
    undo = refuse_kv_key("bad", layout=layout)
    try:
        document = {"collections": {"docs": {"embedding_model": HASHING}},
                    "writes": [{"uri": "vector://docs/a", "value": "text"}, {"uri": "kv://bad", "value": 1}]}
        with pytest.raises(StorageError) as failed:
            import_memory(memory, document, layout.codebolt)
        assert "Partly written (not transactional): vector." in failed.value.message
        assert failed.value.data["import"]["units"] == [
            {"unit": "vector", "schemes": ["vector"], "state": "partly written"},
            {"unit": "database", "schemes": ["kv"], "state": "rolled back"}]
        assert memory.kv.list() == [] and [d["doc_uri"] for d in outside.list("docs")] == ["a"]
    finally:
        undo()
        memory.close()
