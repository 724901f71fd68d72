"""KV entries and working memory on PostgreSQL (values as exact JSON text, as embedded).

KV instance `swarm` is the swarm-level namespace: its entries live under a project key every
project shares, on purpose, so agents of different projects can coordinate through it.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Sequence
from typing import Any

from ..checks import check_kv, check_working
from ..confine import check_key
from ..interfaces import KVEntry, WorkingEntry
from ..sqlite.json_docs import decode_value, encode_value
from .database import SWARM_PROJECT, PgDatabase

SWARM_INSTANCE = "swarm"

_UPSERT = ("INSERT INTO ca_kv(project, instance, namespace, key, value, updated_at) VALUES (%s, %s, %s, %s, %s, %s) "
           "ON CONFLICT (project, instance, namespace, key) DO UPDATE SET value = excluded.value, "
           "updated_at = excluded.updated_at")


class PgKVStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def _project(self, instance: str) -> str:
        return SWARM_PROJECT if instance == SWARM_INSTANCE else self.db.project

    def get(self, instance: str, namespace: str, key: str) -> KVEntry | None:
        check_kv(instance, namespace, key)
        rows = self.db.read("SELECT value, updated_at FROM ca_kv WHERE project = %s AND instance = %s "
                            "AND namespace = %s AND key = %s", (self._project(instance), instance, namespace, key))
        return KVEntry(instance, namespace, key, decode_value(rows[0][0]), rows[0][1]) if rows else None

    def set(self, instance: str, namespace: str, key: str, value: Any) -> KVEntry:
        now = time.time()
        self._write([(instance, namespace, key, value)], now)
        return KVEntry(instance, namespace, key, value, now)

    def set_many(self, entries: Sequence[tuple[str, str, str, Any]]) -> int:
        return self._write(entries, time.time())

    def _write(self, entries: Sequence[tuple[str, str, str, Any]], now: float) -> int:
        rows = []
        for index, (instance, namespace, key, value) in enumerate(entries):
            check_kv(instance, namespace, key)
            pointer = "/value" if len(entries) == 1 else f"/value/{index}"
            rows.append((self._project(instance), instance, namespace, key, encode_value(value, pointer), now))
        if not rows:
            return 0
        with self.db.connection() as conn:
            with conn.cursor() as cursor:
                cursor.executemany(_UPSERT, rows)
            for project in {row[0] for row in rows}:
                self.db.bump(conn, "kv", project)
        return len(rows)

    def delete(self, instance: str, namespace: str, key: str) -> bool:
        check_kv(instance, namespace, key)
        project = self._project(instance)
        with self.db.connection() as conn:
            deleted = conn.execute("DELETE FROM ca_kv WHERE project = %s AND instance = %s AND namespace = %s "
                                   "AND key = %s", (project, instance, namespace, key)).rowcount > 0
            if deleted:
                self.db.bump(conn, "kv", project)
        return deleted

    def list(self, instance: str | None = None, namespace: str | None = None, key_prefix: str = "",
             *, values: bool = True) -> builtins.list[KVEntry]:
        where = ["(project = %s OR (project = %s AND instance = %s))", "left(key, %s) = %s"]
        params: builtins.list[Any] = [self.db.project, SWARM_PROJECT, SWARM_INSTANCE, len(key_prefix), key_prefix]
        if instance is not None:
            where.append("instance = %s")
            params.append(instance)
        if namespace is not None:
            where.append("namespace = %s")
            params.append(namespace)
        column = "value" if values else "NULL"
        rows = self.db.read(f"SELECT instance, namespace, key, {column}, updated_at FROM ca_kv "
                            f"WHERE {' AND '.join(where)} ORDER BY instance COLLATE \"C\", namespace COLLATE \"C\", "
                            "key COLLATE \"C\"", tuple(params))
        return [KVEntry(i, n, k, decode_value(v) if values else None, t) for i, n, k, v, t in rows]

    def generation(self) -> int:
        return self.db.generation("kv")


class PgWorkingMemory:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, thread_id: str, key: str) -> WorkingEntry | None:
        check_working(thread_id, key)
        rows = self.db.read("SELECT value, updated_at FROM ca_working WHERE project = %s AND thread_id = %s "
                            "AND key = %s", (self.db.project, thread_id, key))
        return WorkingEntry(thread_id, key, decode_value(rows[0][0]), rows[0][1]) if rows else None

    def set(self, thread_id: str, key: str, value: Any) -> WorkingEntry:
        check_working(thread_id, key)
        text = encode_value(value)
        now = time.time()
        with self.db.connection() as conn:
            conn.execute("INSERT INTO ca_working(project, thread_id, key, value, updated_at) "
                         "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (project, thread_id, key) DO UPDATE "
                         "SET value = excluded.value, updated_at = excluded.updated_at",
                         (self.db.project, thread_id, key, text, now))
            self.db.bump(conn, "working")
        return WorkingEntry(thread_id, key, value, now)

    def delete(self, thread_id: str, key: str) -> bool:
        check_working(thread_id, key)
        with self.db.connection() as conn:
            deleted = conn.execute("DELETE FROM ca_working WHERE project = %s AND thread_id = %s AND key = %s",
                                   (self.db.project, thread_id, key)).rowcount > 0
            if deleted:
                self.db.bump(conn, "working")
        return deleted

    def list(self, thread_id: str) -> dict[str, Any]:
        check_key(thread_id, what="thread id")
        rows = self.db.read("SELECT key, value FROM ca_working WHERE project = %s AND thread_id = %s "
                            "ORDER BY key COLLATE \"C\"", (self.db.project, thread_id))
        return {key: decode_value(value) for key, value in rows}

    def entries(self, thread_id: str | None = None) -> builtins.list[WorkingEntry]:
        sql = "SELECT thread_id, key, updated_at FROM ca_working WHERE project = %s"
        params: tuple[Any, ...] = (self.db.project,)
        if thread_id is not None:
            sql += " AND thread_id = %s"
            params += (thread_id,)
        rows = self.db.read(sql + " ORDER BY thread_id COLLATE \"C\", key COLLATE \"C\"", params)
        return [WorkingEntry(t, k, None, u) for t, k, u in rows]

    def clear(self, thread_id: str) -> int:
        check_key(thread_id, what="thread id")
        with self.db.connection() as conn:
            removed = conn.execute("DELETE FROM ca_working WHERE project = %s AND thread_id = %s",
                                   (self.db.project, thread_id)).rowcount
            if removed:
                self.db.bump(conn, "working")
        return int(removed)

    def generation(self) -> int:
        return self.db.generation("working")
