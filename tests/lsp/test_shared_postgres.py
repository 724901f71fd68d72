"""Two `context-assembly serve` processes, on two different workspace folders, sharing one PostgreSQL:
what one writes, the other reads, searches and assembles; a write through one invalidates the
other's cached pipeline result; the database going away is a clear error, not a dead server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from context_assembly.stores.embedding import HASHING
from context_assembly.stores.postgres.listener import channel
from tests.postgres import fresh_project

from .support import RawServer, frame

PREFS = {"id": "prefs", "label": "Preferences", "description": "The user's preferences.", "status": "active",
         "retrieval": {"pipeline": [
             {"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["${scope.user.user_id}"]},
             {"type": "format", "format": "bullet_list"}]},
         "contribution": {"section": "constraints", "priority": "high", "max_items": 10}}
HISTORY = {"id": "history", "label": "Past tasks", "description": "Similar finished tasks.", "status": "active",
           "retrieval": {"pipeline": [
               {"type": "derive_query", "from": ["input.text"], "method": "keyword_extract"},
               {"type": "vector_search", "collection": "tasks", "topK": 3, "minScore": 0.0, "mode": "hybrid"},
               {"type": "format", "format": "bullet_list"}]},
           "contribution": {"section": "suggestions", "priority": "low", "max_items": 3}}
MAX_TRIES = 3000  # a bound on waiting for a condition, never a speed claim
REQUEST = {"scope_variables": {"user": {"user_id": "u-ada"}, "thread": {"thread_id": "t-1"}},
           "input": {"text": "fix the flaky login timeout"}, "constraints": {"max_tokens": 4000},
           "explicit_memory": ["prefs", "history"]}


def workspace(root: Path, dsn: str, project: str) -> Path:
    codebolt = root / ".codebolt"
    (codebolt / "PersistentMemory").mkdir(parents=True)
    (codebolt / "vectordb" / "tasks").mkdir(parents=True)
    (codebolt / "context-assembly.json").write_text(json.dumps(
        {"cache_ttl_s": 600, "stores": {"backend": "postgres", "dsn": dsn, "project": project}}))
    (codebolt / "vectordb" / "tasks" / "collection.json").write_text(json.dumps({"embedding_model": HASHING}))
    for definition in (PREFS, HISTORY):
        (codebolt / "PersistentMemory" / f"{definition['id']}.json").write_text(json.dumps(definition))
    return root


class Server(RawServer):
    def __init__(self, root: Path, project: str = "") -> None:
        super().__init__(root)
        self.project = project
        self.next_id = 0
        self.initialize()

    def call(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send(frame({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        return self.answer(self.next_id, timeout=60)

    def result(self, method: str, params: Any) -> Any:
        answer = self.call(method, params)
        assert "result" in answer, answer
        return answer["result"]

    def assemble(self) -> dict[str, Any]:
        return dict(self.result("contextAssembly/assemble", REQUEST))


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {call["reference"]: call["status"] for call in result["trace"]["memory_calls"]}


def texts(result: dict[str, Any], section: str) -> str:
    return json.dumps(result["context"][section])


@pytest.fixture
def servers(postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Server, Server]]:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    project = fresh_project()
    alpha = Server(workspace(tmp_path / "alpha", postgres_dsn, project), project)
    beta = Server(workspace(tmp_path / "beta", postgres_dsn, project), project)
    yield alpha, beta
    for server in (alpha, beta):
        assert server.close() == 0


def test_a_write_through_one_sidecar_is_read_searched_and_assembled_by_the_other(
        servers: tuple[Server, Server]) -> None:
    alpha, beta = servers
    alpha.result("memory/write", {"uri": "kv://users/u-ada", "value": "answers in French"})
    alpha.result("memory/write", {"uri": "vector://tasks/T-1", "value": {
        "text": "Fixed the flaky login timeout by raising the session limit", "metadata": {"task": "T-1"}}})
    assert beta.result("memory/read", {"uri": "kv://users/u-ada"})["value"] == "answers in French"
    hits = beta.result("memory/read", {"uri": "vector://tasks?q=login%20timeout&mode=hybrid"})["value"]
    assert [hit["doc_uri"] for hit in hits] == ["T-1"]
    first = beta.assemble()
    assert statuses(first) == {"prefs": "ok", "history": "ok"}
    assert "answers in French" in texts(first, "constraints") and "session limit" in texts(first, "suggestions")
    assert statuses(beta.assemble()) == {"prefs": "cached", "history": "cached"}

    alpha.result("memory/write", {"uri": "kv://users/u-ada", "value": "answers in Dutch"})
    after = until_fresh(beta, "prefs")
    assert "answers in Dutch" in texts(after, "constraints")
    assert statuses(after)["history"] == "cached"  # only the store that was written is invalidated
    alpha.result("memory/write", {"uri": "vector://tasks/T-2", "value": "Login timeout came back after the deploy"})
    again = until_fresh(beta, "history")
    assert "after the deploy" in texts(again, "suggestions")


def until_fresh(server: Server, memory: str) -> dict[str, Any]:
    """Assemble until `memory` is no longer served from the cache: a write by another sidecar
    reaches this one by a pushed notification, an instant after the write's commit. (The TTL is
    600 s: without the push, the cached result would stay.)"""
    for _ in range(MAX_TRIES):
        result = server.assemble()
        if statuses(result)[memory] != "cached":
            assert statuses(result)[memory] == "ok", result["trace"]["memory_calls"]
            return result
        time.sleep(0.02)
    raise AssertionError(f"{memory} stayed cached after another sidecar's write")


def test_a_killed_listening_connection_comes_back_and_writes_invalidate_again(
        servers: tuple[Server, Server], postgres_dsn: str) -> None:
    alpha, beta = servers
    alpha.result("memory/write", {"uri": "kv://users/u-ada", "value": "one"})
    assert statuses(beta.assemble())["prefs"] == "ok"
    name = f"context-assembly {channel(alpha.project)}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        killed = listeners(conn, name, 1)
        for pid in killed:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(MAX_TRIES):  # each sidecar opens a new listening connection
            back = listeners(conn, name, 0)
            if len(back) == len(killed) and not set(back) & set(killed):
                break
            time.sleep(0.02)
        else:
            raise AssertionError(f"the listeners did not come back: {killed} -> {back}")
    for value in ("two", "three"):
        alpha.result("memory/write", {"uri": "kv://users/u-ada", "value": value})
        assert value in texts(until_fresh(beta, "prefs"), "constraints")


def listeners(conn: psycopg.Connection[Any], name: str, at_least: int) -> list[int]:
    rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s ORDER BY pid",
                        (name,)).fetchall()
    found = [int(row[0]) for row in rows]
    assert len(found) >= at_least, f"no listening connection named {name!r}"
    return found


def test_an_unreachable_database_is_a_clear_error_and_a_warning_and_the_server_keeps_serving(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    nowhere = tmp_path / "no-server"
    nowhere.mkdir()
    server = Server(workspace(tmp_path / "ws", f"postgresql://postgres:@/postgres?host={nowhere}", fresh_project()))
    for _ in range(2):
        answer = server.call("memory/read", {"uri": "kv://users/u-ada"})
        assert answer["error"]["code"] == -32006 and "unreachable" in answer["error"]["message"]
    result = server.assemble()
    assert statuses(result) == {"prefs": "failed", "history": "failed"}
    assert "unreachable" in json.dumps(result["context"]["warnings"])
    assert server.result("memory/read", {"uri": "markdown://absent"})["exists"] is False  # still serving
    assert server.close() == 0
