"""The KV store (`kv://[<instance>/][<namespace>/]<key>`): small JSON values by instance, namespace, key."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ..checks import check_kv
from ..interfaces import KVEntry
from .database import Database
from .json_docs import decode_value, encode_value
from .many_rows import insert_rows

STORE = "kv"

_INSERT = "INSERT INTO kv(instance, namespace, key, value, updated_at)"
_ON_CONFLICT = ("ON CONFLICT(instance, namespace, key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at")
_UPSERT = f"{_INSERT} VALUES (?, ?, ?, ?, ?) {_ON_CONFLICT}"


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS kv (instance TEXT NOT NULL, namespace TEXT NOT NULL, "
                 "key TEXT NOT NULL, value TEXT NOT NULL, updated_at REAL NOT NULL, "
                 "PRIMARY KEY (instance, namespace, key)) WITHOUT ROWID")


def _prefix_end(prefix: str) -> str | None:
    """The least string above every string starting with `prefix` (text compares by code point, as
    UTF-8 bytes do), or None when there is none (the prefix is all U+10FFFF)."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if last == 0xD800:  # surrogates never occur in stored text
            last = 0xE000
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


class SqliteKVStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.register("kv", _migrate)

    def get(self, instance: str, namespace: str, key: str) -> KVEntry | None:
        check_kv(instance, namespace, key)
        rows = self.db.read("SELECT value, updated_at FROM kv WHERE instance = ? AND namespace = ? AND key = ?",
                            (instance, namespace, key))
        if not rows:
            return None
        return KVEntry(instance, namespace, key, decode_value(rows[0][0]), rows[0][1])

    def set(self, instance: str, namespace: str, key: str, value: Any) -> KVEntry:
        check_kv(instance, namespace, key)
        text = encode_value(value)
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute(_UPSERT, (instance, namespace, key, text, now))
            self.db.bump(conn, STORE)
        return KVEntry(instance, namespace, key, value, now)

    def set_many(self, entries: Sequence[tuple[str, str, str, Any]]) -> int:
        rows = []
        now = time.time()
        for index, (instance, namespace, key, value) in enumerate(entries):
            check_kv(instance, namespace, key)
            rows.append((instance, namespace, key, encode_value(value, f"/value/{index}"), now))
        if not rows:
            return 0
        with self.db.transaction() as conn:
            insert_rows(conn, _INSERT, rows, _ON_CONFLICT)  # (a few statements: stores.sqlite.many_rows)
            self.db.bump(conn, STORE)
        return len(rows)

    def delete(self, instance: str, namespace: str, key: str) -> bool:
        check_kv(instance, namespace, key)
        with self.db.transaction() as conn:
            deleted = conn.execute("DELETE FROM kv WHERE instance = ? AND namespace = ? AND key = ?",
                                   (instance, namespace, key)).rowcount > 0
            if deleted:
                self.db.bump(conn, STORE)
        return deleted

    def list(self, instance: str | None = None, namespace: str | None = None, key_prefix: str = "",
             *, values: bool = True) -> list[KVEntry]:
        where = ["substr(key, 1, ?) = ?"]
        params: list[Any] = [len(key_prefix), key_prefix]
        if key_prefix:  # a range the primary key's index answers (substr alone makes SQLite read every key)
            where.append("key >= ?")
            params.append(key_prefix)
            above = _prefix_end(key_prefix)
            if above is not None:
                where.append("key < ?")
                params.append(above)
        if instance is not None:
            where.append("instance = ?")
            params.append(instance)
        if namespace is not None:
            where.append("namespace = ?")
            params.append(namespace)
        column = "value" if values else "NULL"
        rows = self.db.read(f"SELECT instance, namespace, key, {column}, updated_at FROM kv "
                            f"WHERE {' AND '.join(where)} ORDER BY instance, namespace, key", tuple(params))
        return [KVEntry(i, n, k, decode_value(v) if values else None, t) for i, n, k, v, t in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)
