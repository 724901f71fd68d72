"""What only the PostgreSQL backend has: the database's own guards, project keys, the swarm namespace,
migrations, and staying up while the database goes away and comes back."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import patch

import psycopg
import pytest

from context_assembly.errors import InvalidParamsError, StorageError
from context_assembly.stores.factory import open_stores
from context_assembly.stores.memory import MemoryRouter
from context_assembly.stores.postgres.database import PgDatabase
from context_assembly.stores.postgres.migrations import LATEST, migrate
from context_assembly.stores.store_set import StoreSet
from context_assembly.workspace.layout import WorkspaceLayout
from context_assembly.workspace.settings import StoreSettings
from tests.postgres import fresh_project, server_dsn, server_folder, start_server


def pg_stores(root: Path, dsn: str | None, project: str | None = None) -> StoreSet:
    return open_stores(WorkspaceLayout(root), StoreSettings(backend="postgres", dsn=dsn, project=project))


@pytest.fixture(autouse=True)
def _no_dsn_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)


def test_the_database_itself_keeps_the_log_append_only(postgres_dsn: str, tmp_path: Path) -> None:
    stores = pg_stores(tmp_path, postgres_dsn, fresh_project())
    event = stores.events.append("audit", "login", {"user": "ann"})
    with psycopg.connect(postgres_dsn) as conn:
        for sql in ("UPDATE ca_events SET payload = '{}' WHERE id = %s", "DELETE FROM ca_events WHERE id = %s"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql, (event["id"],))
            conn.rollback()
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("TRUNCATE ca_events")
    assert stores.events.get("audit", event["id"]) == event
    stores.close()


def test_projects_are_separate_and_the_swarm_namespace_is_shared(postgres_dsn: str, tmp_path: Path) -> None:
    one, two = pg_stores(tmp_path / "one", postgres_dsn, fresh_project()), pg_stores(tmp_path / "two", postgres_dsn,
                                                                                         fresh_project())
    one.kv.set("default", "default", "k", "one's")
    one.kv.set("swarm", "plan", "owner", "agent-7")
    assert two.kv.get("default", "default", "k") is None and two.kv.list("default") == []
    entry = two.kv.get("swarm", "plan", "owner")
    assert entry is not None and entry.value == "agent-7"
    assert [e.key for e in two.kv.list("swarm")] == ["owner"]
    assert two.kv.delete("swarm", "plan", "owner")  # shared by every project: the later tests' lists too
    one.close()
    two.close()


def test_same_project_key_shares_every_store_whatever_the_folder(postgres_dsn: str, tmp_path: Path) -> None:
    project = fresh_project()
    one, two = pg_stores(tmp_path / "a", postgres_dsn, project), pg_stores(tmp_path / "b", postgres_dsn, project)
    before = two.json_docs.generation()
    one.json_docs.put("plan", {"step": 1})
    one.episodic.append("t", {"role": "user", "content": "hi"})
    assert two.json_docs.get("plan", "/step") == (True, 1) and two.json_docs.generation() == before + 1
    assert two.episodic.count("t") == 1
    one.close()
    two.close()


def test_the_project_key_defaults_to_the_folder_name(postgres_dsn: str, tmp_path: Path) -> None:
    name = fresh_project()
    one, two = pg_stores(tmp_path / "x" / name, postgres_dsn), pg_stores(tmp_path / "y" / name, postgres_dsn)
    one.kv.set("default", "default", "k", 1)
    assert two.kv.get("default", "default", "k") is not None
    one.close()
    two.close()


def test_the_environment_dsn_overrides_the_settings(postgres_dsn: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXT_ASSEMBLY_DSN", postgres_dsn)
    stores = pg_stores(tmp_path, "postgresql://nobody@/nowhere?host=/nonexistent", fresh_project())
    stores.kv.set("default", "default", "k", 1)
    stores.close()


def test_no_dsn_is_a_clear_error_on_each_call(tmp_path: Path) -> None:
    memory = MemoryRouter(tmp_path, stores=pg_stores(tmp_path, None))
    for _ in range(2):
        with pytest.raises(StorageError, match="no DSN is set.*CONTEXT_ASSEMBLY_DSN"):
            memory.read("kv://k")
    assert memory.read("markdown://absent")["exists"] is False  # notes stay in the checkout and keep working


def test_migrations_apply_once(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        migrate(conn)  # whatever the session did first
        assert migrate(conn) == []
        row = conn.execute("SELECT max(version) FROM ca_schema_version").fetchone()
        assert row is not None and row[0] == LATEST


@pytest.fixture
def own_server() -> Iterator[tuple[object, Path]]:
    """A server of this test's own, which it stops and starts."""
    folder = server_folder()
    server = start_server(folder / "data")
    try:
        yield server, folder / "data"
    finally:
        server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(folder, ignore_errors=True)


def test_a_lost_database_fails_each_call_clearly_and_comes_back(own_server: tuple[object, Path],
                                                                tmp_path: Path) -> None:
    server, data = own_server
    dsn = server_dsn(server)
    memory = MemoryRouter(tmp_path, stores=pg_stores(tmp_path, dsn, fresh_project()))
    memory.write("kv://k", 1)
    memory.write("json://doc", {"a": 1})
    server.cleanup()  # type: ignore[attr-defined]
    for uri in ("kv://k", "json://doc", "log://audit"):
        with pytest.raises(StorageError, match="unreachable"):
            memory.read(uri)
    with pytest.raises(StorageError, match="unreachable"):
        memory.write("kv://k", 2)
    restarted = start_server(data)
    assert server_dsn(restarted) == dsn
    value = None
    for _ in range(400):  # the pool reconnects by itself; the first calls may still fail fast
        try:
            value = memory.read("kv://k")["value"]
            break
        except StorageError:
            time.sleep(0.05)
    assert value == 1  # the failed write left the previous value intact
    memory.write("kv://k", 3)
    assert memory.read("kv://k")["value"] == 3
    memory.close()


def test_an_unreachable_database_does_not_stop_a_router(tmp_path: Path) -> None:
    missing = server_folder()
    try:
        dsn = f"postgresql://postgres:@/postgres?host={missing}"
        db = PgDatabase(dsn, "p")
        with pytest.raises(StorageError, match="unreachable"):
            db.generation("kv")
        with pytest.raises(StorageError, match="unreachable"):
            db.generation("kv")  # the second call fails at once, with the same message
        db.close()
    finally:
        shutil.rmtree(missing, ignore_errors=True)


def test_check_reports_a_cypher_view_when_the_backend_is_postgres(tmp_path: Path) -> None:
    from context_assembly.workspace.lint import lint_workspace
    from context_assembly.workspace.loader import WorkspaceLoader

    layout = WorkspaceLayout(tmp_path)
    layout.graph_views_dir.mkdir(parents=True)
    (layout.graph_views_dir / "owners.json").write_text(
        '{"id": "owners", "description": "d", "cypher": "MATCH (n:Entity) RETURN n.name AS name"}')
    assert not [p for p in lint_workspace(WorkspaceLoader(tmp_path).load()) if p.code == "cypher-view-on-postgres"]
    layout.settings_path.write_text('{"stores": {"backend": "postgres", "dsn": "postgresql://x@/y"}}')
    found = [p for p in lint_workspace(WorkspaceLoader(tmp_path).load()) if p.code == "cypher-view-on-postgres"]
    assert [(p.file, p.path) for p in found] == [(".codebolt/knowledgegraph/views/owners.json", "/cypher")]
    stores = pg_stores(tmp_path, "postgresql://x@/y", "p")
    assert stores.graph is not None
    with pytest.raises(InvalidParamsError, match="embedded graph only"):
        stores.graph.run_view("owners", {})


def test_sidecars_patching_one_document_at_once_lose_nothing(postgres_dsn: str, tmp_path: Path) -> None:
    """Four processes, each with its own pool, patch members of one JSON document and append to one
    thread and one log at the same time: every write lands (row locks, not read-modify-write)."""
    import multiprocessing

    from .workers import pg_patch_one_document

    project, count, workers = fresh_project(), 25, ["w0", "w1", "w2", "w3"]
    stores = pg_stores(tmp_path, postgres_dsn, project)
    stores.json_docs.put("plan", {"seen": {}})
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Event()
    processes = [spawn.Process(target=pg_patch_one_document, args=(postgres_dsn, project, w, count, start))
                 for w in workers]
    for process in processes:
        process.start()
    start.set()
    for process in processes:
        process.join(300)
        assert process.exitcode == 0
    found, plan = stores.json_docs.get("plan")
    assert found and {w: plan[w] for w in workers} == {w: count - 1 for w in workers}
    assert set(plan["seen"]) == {f"{w}-{i}" for w in workers for i in range(count)}
    turns = stores.episodic.recent("shared", 1000)
    assert [t["seq"] for t in turns] == list(range(1, len(workers) * count + 1))
    assert len(stores.events.search("audit", limit=1000)) == len(workers) * count
    stores.close()


def test_a_small_collection_in_a_big_table_still_gets_its_k_nearest(postgres_dsn: str, tmp_path: Path) -> None:
    """HNSW filters the index's candidates by collection afterwards: with few candidates (ef_search
    10) a collection that is a tenth of the table gets a short answer, which is asked again exactly."""
    from context_assembly.stores.embedding import HASHING
    from context_assembly.stores.postgres.vector import PgVectorStore

    root = tmp_path / "ws"
    stores = open_stores(WorkspaceLayout(root), StoreSettings(backend="postgres", dsn=postgres_dsn,
                                                              project=fresh_project(), ef_search=10))
    vectors = stores.vectors
    assert isinstance(vectors, PgVectorStore)
    for name in ("big", "small"):
        vectors.settings(name, HASHING)
    vectors.upsert_many("big", [(f"b{i}", f"login timeout session {i} retry queue {i % 7}", {}) for i in range(4000)])
    vectors.upsert_many("small", [(f"s{i}", f"banana bread recipe {i}", {}) for i in range(400)])
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE ca_vector_chunks")
    hits = vectors.search("small", "login timeout session retry", top_k=5, mode="vector")
    assert len(hits) == 5 and all(h["doc_uri"].startswith("s") for h in hits)
    assert vectors.index.exact_retries >= 1  # type: ignore[attr-defined]
    stores.close()


def test_migration_3_gives_existing_hnsw_indexes_the_new_build_parameters(postgres_dsn: str) -> None:
    import uuid

    from context_assembly.stores.postgres.migrations import HNSW_EF_CONSTRUCTION, HNSW_M, MIGRATIONS, hnsw_index_sql

    name = f"m3_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(postgres_dsn.replace("/postgres?", f"/{name}?"), autocommit=True) as conn:
        conn.execute("CREATE TABLE ca_schema_version (version integer PRIMARY KEY, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        for version, sql in MIGRATIONS[:2]:  # a database as version 2 left it, with an index of its making
            conn.execute(sql.encode())
            conn.execute("INSERT INTO ca_schema_version(version) VALUES (%s)", (version,))
        conn.execute("CREATE INDEX ca_vector_chunks_hnsw_8 ON ca_vector_chunks USING hnsw "
                     "((embedding::vector(8)) vector_cosine_ops) WHERE dimension = 8")
        assert migrate(conn) == list(range(3, LATEST + 1))
        conn.execute(hnsw_index_sql(16))
        rows = conn.execute("SELECT relname, reloptions FROM pg_class WHERE relname LIKE 'ca_vector_chunks_hnsw_%' "
                            "ORDER BY relname").fetchall()
    expected = sorted([f"m={HNSW_M}", f"ef_construction={HNSW_EF_CONSTRUCTION}"])
    assert [(n, sorted(o)) for n, o in rows] == [("ca_vector_chunks_hnsw_16", expected),
                                                 ("ca_vector_chunks_hnsw_8", expected)]


def test_migration_4_gives_existing_chunks_and_other_writers_chunks_their_words(postgres_dsn: str) -> None:
    """Chunks written before migration 4 get their words (keywords.py) from it; a chunk another
    writer inserts afterwards (a sidecar of an earlier version) gets them from the trigger."""
    import uuid

    from context_assembly.stores.postgres.keywords import tsvector
    from context_assembly.stores.postgres.migrations import MIGRATIONS

    texts = ["Edit src/auth/session.py", "Le CAFÉ crème", "Привет, МИР! 東京は晴れ。"]
    name = f"m4_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(postgres_dsn.replace("/postgres?", f"/{name}?"), autocommit=True) as conn:
        conn.execute("CREATE TABLE ca_schema_version (version integer PRIMARY KEY, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        for version, sql in MIGRATIONS[:3]:  # a database as version 3 left it, with chunks
            assert isinstance(sql, str)
            conn.execute(sql.encode())
            conn.execute("INSERT INTO ca_schema_version(version) VALUES (%s)", (version,))

        def insert(ord_: int, text: str) -> None:  # as every earlier version wrote a chunk
            conn.execute("INSERT INTO ca_vector_chunks (project, collection, doc_uri, ord, text, dimension, embedding) "
                         "VALUES ('p', 'c', 'd', %s, %s, 2, '[1,0]')", (ord_, text))

        for ord_, text in enumerate(texts[:2]):
            insert(ord_, text)
        with patch("context_assembly.stores.postgres.migrations.WORDS_BATCH", 1):  # batch after batch
            assert migrate(conn) == list(range(4, LATEST + 1))
        insert(2, texts[2])
        rows = conn.execute("SELECT c.text, w.tsv = CAST(tsvector_of.value AS tsvector) FROM ca_vector_chunks c "
                            "JOIN ca_vector_words w USING (id) JOIN unnest(%s::text[], %s::text[]) "
                            "AS tsvector_of(text, value) USING (text) ORDER BY c.ord",
                            (texts, [tsvector(t) for t in texts])).fetchall()
        assert rows == [(text, True) for text in texts]
        conn.execute("DELETE FROM ca_vector_chunks WHERE ord = 0")
        assert conn.execute("SELECT count(*) FROM ca_vector_words").fetchone() == (2,)


def test_json_documents_of_an_earlier_version_read_as_its_writes_left_them(postgres_dsn: str,
                                                                           tmp_path: Path) -> None:
    """Migration 6 keeps each document's exact text beside its jsonb, valid while `text_at` is the
    row's `updated_at`. A row an earlier version wrote, or rewrote after this one (its upsert sets
    `value` and `updated_at`), is read from its jsonb, even when the jsonb did not change (U+0000
    and U+FFFD are one there)."""
    project = fresh_project()
    stores = pg_stores(tmp_path, postgres_dsn, project)
    stores.json_docs.put("doc", {"b": 1, "a": 2})
    stores.json_docs.put("nul", {"k": "a\u0000b"})
    assert list(stores.json_docs.get("doc")[1]) == ["b", "a"]  # as written
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for name, value in (("doc", '{"b": 3, "a": 4}'), ("old", '{"y": 1}'), ("nul", '{"k": "a\ufffdb"}')):
            conn.execute("INSERT INTO ca_json(project, name, value, size, updated_at) VALUES (%s, %s, %s::jsonb, "
                         "%s, %s) ON CONFLICT (project, name) DO UPDATE SET value = excluded.value, "
                         "size = excluded.size, updated_at = excluded.updated_at",  # as versions before 6 write
                         (project, name, value, len(value), time.time()))
    assert stores.json_docs.get("doc") == (True, {"a": 4, "b": 3}) and stores.json_docs.get("old", "/y") == (True, 1)
    assert stores.json_docs.get("nul", "/k") == (True, "a\ufffdb")
    stores.json_docs.put("old", {"z": 1, "y": 2})
    assert list(stores.json_docs.get("old")[1]) == ["z", "y"]
    stores.close()


def test_sidecars_rewriting_one_vector_document_at_once_all_succeed(postgres_dsn: str, tmp_path: Path) -> None:
    """Four sidecars writing the same document: each deleted the chunks, then inserted the same chunk
    numbers (a unique-key violation) or deadlocked on the document rows; most writes failed."""
    import threading

    from context_assembly.stores.embedding import HASHING

    project = fresh_project()
    sidecars = [pg_stores(tmp_path / f"s{n}", postgres_dsn, project) for n in range(4)]
    for stores in sidecars:
        assert stores.vectors is not None
        stores.vectors.settings("tasks", HASHING)
    failures: list[Exception] = []
    start = threading.Barrier(len(sidecars))

    def write(n: int) -> None:
        start.wait()
        for round_ in range(8):
            try:
                sidecars[n].vectors.upsert("tasks", "shared", f"writer {n} round {round_} " * 40, {})  # type: ignore[union-attr]
            except Exception as exc:  # noqa: BLE001 (every failure is the finding)
                failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(sidecars))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    document = sidecars[0].vectors.get("tasks", "shared")  # type: ignore[union-attr]
    assert document is not None and document["text"].startswith("writer ")
    for stores in sidecars:
        stores.close()


def test_a_failed_statement_is_that_calls_error_not_an_outage(postgres_dsn: str, tmp_path: Path) -> None:
    """A deadlock, a cancelled statement: psycopg calls them OperationalError too, and the sidecar took
    the database for unreachable, failing every call for 2 s."""
    from context_assembly.errors import StorageError

    stores = pg_stores(tmp_path, postgres_dsn, fresh_project())
    database = stores.database
    assert isinstance(database, PgDatabase)
    with pytest.raises(StorageError, match="PostgreSQL failed: canceling statement due to statement timeout"), \
            database.connection() as conn:
        conn.execute("SET LOCAL statement_timeout = 1")
        conn.execute("SELECT pg_sleep(1)")
    stores.kv.set("default", "default", "k", 1)  # at once: no outage was declared
    assert stores.kv.get("default", "default", "k") is not None
    stores.close()


def test_a_database_that_does_not_exist_is_named_not_a_passing_outage(postgres_dsn: str, tmp_path: Path) -> None:
    from context_assembly.errors import StorageError

    wrong = psycopg.conninfo.make_conninfo(postgres_dsn, dbname="nosuchdb")
    stores = pg_stores(tmp_path, wrong, fresh_project())
    with pytest.raises(StorageError) as refused:
        stores.kv.get("default", "default", "k")
    assert 'database "nosuchdb" does not exist' in refused.value.message
    stores.close()


def test_calls_queued_behind_a_failing_first_connect_fail_at_once(tmp_path: Path) -> None:
    """A server that accepts and never answers: the first call's migration waits for a connection
    while holding the lock the others queue on; each of them then waited as long again (3, 6, 9 …
    seconds). Now the failure is marked before the lock is let go, and they fail at once."""
    import socket
    import threading

    from context_assembly.errors import StorageError

    folder = tmp_path / "sock"
    folder.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / ".s.PGSQL.5432"))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # accepted, never answered
            except OSError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    stores = pg_stores(tmp_path / "ws", f"host={folder} port=5432 dbname=x user=y", fresh_project())
    errors: list[StorageError] = []

    def call() -> None:
        try:
            stores.kv.get("default", "default", "k")
        except StorageError as exc:
            errors.append(exc)

    callers = [threading.Thread(target=call) for _ in range(4)]
    try:
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(60)
    finally:
        stop.set()
        acceptor.join(5)
        for connection in held:
            connection.close()
        listener.close()
        stores.close()
    assert len(errors) == 4 and all("unreachable" in e.message for e in errors)
    # one call waited for a connection; the others were told at once (as the calls after them are)
    assert sum("retry_after_s" in e.data for e in errors) >= 3
