"""Write generations pushed with LISTEN/NOTIFY: two real runtimes on two folders sharing one project key.

A write through one invalidates the other's cached pipeline result without the other reading the
database (the push), also after its listening connection was killed and came back; while the
listener cannot vouch for its counts the cache reads them from the database (correct first)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from context_assembly.runtime import Runtime
from context_assembly.stores.postgres.database import PgDatabase
from context_assembly.stores.postgres.listener import GenerationListener, channel
from tests.postgres import fresh_project

PREFS = {"id": "prefs", "label": "Preferences", "description": "d", "status": "active",
         "retrieval": {"pipeline": [{"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["ada"]}]},
         "contribution": {"section": "constraints", "priority": "high", "max_items": 10}}
REQUEST = {"scope_variables": {}, "input": {"text": "t"}, "explicit_memory": ["prefs"],
           "constraints": {"max_tokens": 1000}}
WAIT_S = 60.0  # a bound on waiting for a condition, never a speed claim


def make_workspace(root: Path, stores: dict[str, Any]) -> Path:
    codebolt = root / ".codebolt"
    (codebolt / "PersistentMemory").mkdir(parents=True)
    (codebolt / "context-assembly.json").write_text(json.dumps({"cache_ttl_s": 600, "stores": stores}))
    (codebolt / "PersistentMemory" / "prefs.json").write_text(json.dumps(PREFS))
    return root


def database(runtime: Runtime) -> PgDatabase:
    return runtime.memory.stores.kv.db  # type: ignore[no-any-return,attr-defined]


def listener(runtime: Runtime) -> GenerationListener:
    found = database(runtime).listener
    assert found is not None
    return found


def assemble(runtime: Runtime) -> tuple[str, str]:
    result = runtime.assemble(REQUEST)
    (call,) = result.trace.memory_calls
    return call.status, json.dumps(result.context["constraints"], default=str)


def wait(runtime: Runtime, what: str, predicate: Any) -> None:
    assert listener(runtime).wait_for(predicate, WAIT_S), f"the listener never got to: {what}"


@pytest.fixture
def pair(postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Runtime, Runtime]]:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    stores = {"backend": "postgres", "dsn": postgres_dsn, "project": fresh_project()}
    alpha, beta = (Runtime(make_workspace(tmp_path / name, stores)) for name in ("alpha", "beta"))
    yield alpha, beta
    alpha.close()
    beta.close()


def test_a_write_in_one_runtime_invalidates_the_others_cache_by_push(pair: tuple[Runtime, Runtime]) -> None:
    alpha, beta = pair
    alpha.memory.write("kv://users/ada", "answers in French")
    assert assemble(beta)[0] == "ok"  # the first use reads the database and starts the listener
    wait(beta, "vouching for its counts", lambda it: it.trusted())
    reads = database(beta).generation_reads
    status, text = assemble(beta)
    assert status == "cached" and "French" in text

    alpha.memory.write("kv://users/ada", "answers in Dutch")
    written = alpha.memory.generation("kv")
    wait(beta, "the pushed count", lambda it: it.value("kv") == written)
    status, text = assemble(beta)
    assert status == "ok" and "Dutch" in text
    assert assemble(beta)[0] == "cached"
    assert database(beta).generation_reads == reads  # the push, not a read, invalidated it


def test_after_the_listening_connection_is_killed_it_reconnects_and_the_push_works_again(
        pair: tuple[Runtime, Runtime], postgres_dsn: str) -> None:
    alpha, beta = pair
    alpha.memory.write("kv://users/ada", "one")
    assemble(beta)
    wait(beta, "vouching for its counts", lambda it: it.trusted())
    killed = listener(beta).backend_pid
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_terminate_backend(%s)", (killed,)).fetchone()
        assert row == (True,)
    wait(beta, "a new connection that vouches for its counts",
         lambda it: it.connections == 2 and it.backend_pid not in (None, killed) and it.trusted())

    alpha.memory.write("kv://users/ada", "two")
    written = alpha.memory.generation("kv")
    wait(beta, "the pushed count", lambda it: it.value("kv") == written)
    reads = database(beta).generation_reads
    status, text = assemble(beta)
    assert status == "ok" and "two" in text
    assert assemble(beta)[0] == "cached" and database(beta).generation_reads == reads


def test_while_the_listener_is_down_each_cached_use_reads_the_database(pair: tuple[Runtime, Runtime]) -> None:
    alpha, beta = pair
    alpha.memory.write("kv://users/ada", "one")
    assemble(beta)
    wait(beta, "vouching for its counts", lambda it: it.trusted())
    listener(beta).stop()
    assert not listener(beta).trusted()
    reads = database(beta).generation_reads
    assert assemble(beta)[0] == "cached" and database(beta).generation_reads == reads + 1
    alpha.memory.write("kv://users/ada", "two")  # nobody hears it: the read finds it
    status, text = assemble(beta)
    assert status == "ok" and "two" in text


def test_a_count_whose_notification_never_came_is_picked_up_by_the_resync(
        pair: tuple[Runtime, Runtime], postgres_dsn: str) -> None:
    alpha, beta = pair
    alpha.memory.write("kv://users/ada", "one")
    assemble(beta)
    wait(beta, "vouching for its counts", lambda it: it.trusted())
    before = listener(beta).value("kv")
    assert before is not None
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # a writer that died before its NOTIFY
        conn.execute("UPDATE ca_generations SET value = value + 1 WHERE project = %s AND store = 'kv'",
                     (database(beta).project,))
    wait(beta, "the re-read count", lambda it: it.value("kv") == before + 1)
    assert assemble(beta)[0] == "ok"


def test_read_mode_has_no_listener_and_reads_before_each_use(postgres_dsn: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    runtime = Runtime(make_workspace(tmp_path, {"backend": "postgres", "dsn": postgres_dsn,
                                                "project": fresh_project(), "invalidation": "read"}))
    try:
        runtime.memory.write("kv://users/ada", "one")
        assert database(runtime).listener is None
        assert [assemble(runtime)[0] for _ in range(3)] == ["ok", "cached", "cached"]
        assert database(runtime).generation_reads == 3
    finally:
        runtime.close()


def test_a_malformed_notification_is_ignored(postgres_dsn: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    runtime = Runtime(make_workspace(tmp_path, {"backend": "postgres", "dsn": postgres_dsn,
                                                "project": fresh_project()}))
    try:
        runtime.memory.write("kv://users/ada", "one")
        assemble(runtime)
        wait(runtime, "vouching for its counts", lambda it: it.trusted())
        count = listener(runtime).value("kv")
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            for payload in ("not json", "[1, 2]", '["other", "kv", 99]', f'["{database(runtime).project}", "kv", "x"]'):
                conn.execute("SELECT pg_notify(%s, %s)", (channel(database(runtime).project), payload))
        sent = time.monotonic()
        wait(runtime, "a ping sent after the junk coming back on the same connection",
             lambda it: it.connections == 1 and (it.vouched_at or 0) > sent)
        assert listener(runtime).value("kv") == count
        runtime.memory.write("kv://users/ada", "two")
        assert assemble(runtime)[0] == "ok"
    finally:
        runtime.close()


def test_a_batch_announces_its_counts_when_it_commits_and_a_rolled_back_one_nothing(
        pair: tuple[Runtime, Runtime]) -> None:
    alpha, beta = pair
    alpha.memory.write("kv://users/ada", "one")
    before = alpha.memory.generation("kv")  # starts alpha's listener too
    assemble(beta)
    for runtime in pair:
        wait(runtime, "vouching for its counts", lambda it: it.trusted())
    with pytest.raises(RuntimeError), alpha.memory.stores.batch():
        alpha.memory.write("kv://users/ada", "never")
        raise RuntimeError("the batch fails")
    assert listener(alpha).value("kv") == before and alpha.memory.read("kv://users/ada")["value"] == "one"
    with alpha.memory.stores.batch():
        alpha.memory.write("kv://users/ada", "two")
        alpha.memory.write("kv://users/bob", "three")
    assert alpha.memory.generation("kv") == before + 2
    wait(beta, "the batch's counts", lambda it: it.value("kv") == before + 2)
    status, text = assemble(beta)
    assert status == "ok" and "two" in text
