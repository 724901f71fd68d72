"""Working memory (`working://<thread_id>/<key>`): a thread's scratchpad, cleared when its turn ends."""

from __future__ import annotations

import builtins
import sqlite3
import time
from typing import Any

from ..checks import check_working
from ..confine import check_key
from ..interfaces import WorkingEntry
from .database import Database
from .json_docs import decode_value, encode_value

STORE = "working"


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS working (thread_id TEXT NOT NULL, key TEXT NOT NULL, "
                 "value TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (thread_id, key)) WITHOUT ROWID")


class SqliteWorkingMemory:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.register("working", _migrate)

    def get(self, thread_id: str, key: str) -> WorkingEntry | None:
        check_working(thread_id, key)
        rows = self.db.read("SELECT value, updated_at FROM working WHERE thread_id = ? AND key = ?", (thread_id, key))
        return WorkingEntry(thread_id, key, decode_value(rows[0][0]), rows[0][1]) if rows else None

    def set(self, thread_id: str, key: str, value: Any) -> WorkingEntry:
        check_working(thread_id, key)
        text = encode_value(value)
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO working(thread_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT(thread_id, key) DO UPDATE SET value = excluded.value, "
                         "updated_at = excluded.updated_at", (thread_id, key, text, now))
            self.db.bump(conn, STORE)
        return WorkingEntry(thread_id, key, value, now)

    def delete(self, thread_id: str, key: str) -> bool:
        check_working(thread_id, key)
        with self.db.transaction() as conn:
            deleted = conn.execute("DELETE FROM working WHERE thread_id = ? AND key = ?",
                                   (thread_id, key)).rowcount > 0
            if deleted:
                self.db.bump(conn, STORE)
        return deleted

    def list(self, thread_id: str) -> dict[str, Any]:
        check_key(thread_id, what="thread id")
        rows = self.db.read("SELECT key, value FROM working WHERE thread_id = ? ORDER BY key", (thread_id,))
        return {key: decode_value(value) for key, value in rows}

    def entries(self, thread_id: str | None = None) -> builtins.list[WorkingEntry]:
        if thread_id is None:
            rows = self.db.read("SELECT thread_id, key, updated_at FROM working ORDER BY thread_id, key")
        else:
            rows = self.db.read("SELECT thread_id, key, updated_at FROM working WHERE thread_id = ? ORDER BY key",
                                (thread_id,))
        return [WorkingEntry(t, k, None, u) for t, k, u in rows]

    def clear(self, thread_id: str) -> int:
        check_key(thread_id, what="thread id")
        with self.db.transaction() as conn:
            removed = conn.execute("DELETE FROM working WHERE thread_id = ?", (thread_id,)).rowcount
            if removed:
                self.db.bump(conn, STORE)
        return int(removed)

    def generation(self) -> int:
        return self.db.generation(STORE)
