"""Episodic memory (`episodic://<thread_id>`): the turns of a thread, in order.

An append may carry an idempotency key: a second append with the key of a turn already in its
thread appends nothing and answers that turn (checked in the write transaction). Clearing a thread
forgets its keys with its turns.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..checks import check_append_key, check_limit, check_turn, event_time
from ..confine import check_key
from ..interfaces import ThreadInfo
from .database import Database
from .json_docs import decode_value, encode_value

STORE = "episodic"


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS episodic (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, "
                 "turn TEXT NOT NULL, ts REAL NOT NULL, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID")
    conn.execute("CREATE TABLE IF NOT EXISTS episodic_keys (thread_id TEXT NOT NULL, key TEXT NOT NULL, "
                 "seq INTEGER NOT NULL, PRIMARY KEY (thread_id, key)) WITHOUT ROWID")


_KEYED = ("SELECT t.seq, t.turn, t.ts FROM episodic_keys k JOIN episodic t ON t.thread_id = k.thread_id "
          "AND t.seq = k.seq WHERE k.thread_id = ? AND k.key = ?")


def _turn(row: Any) -> dict[str, Any]:
    seq, turn, ts = row
    return {**decode_value(turn), "seq": seq, "ts": ts}


class SqliteEpisodicStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.register("episodic", _migrate)

    def append(self, thread_id: str, turn: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        given = check_turn(thread_id, turn)
        check_append_key(key)
        text = encode_value(turn)
        with self.db.transaction() as conn:
            if key is not None:
                seen = conn.execute(_KEYED, (thread_id, key)).fetchone()
                if seen is not None:
                    return {**_turn(seen), "duplicate": True}
            # BEGIN IMMEDIATE serialises writers, so max+1 cannot collide across processes.
            # the last turn (by the key: one row), whose time the new one's never precedes
            row = conn.execute("SELECT seq, ts FROM episodic WHERE thread_id = ? ORDER BY seq DESC LIMIT 1",
                               (thread_id,)).fetchone()
            seq = (int(row[0]) if row else 0) + 1
            ts = given if given is not None else event_time(float(row[1]) if row else None)
            conn.execute("INSERT INTO episodic(thread_id, seq, turn, ts) VALUES (?, ?, ?, ?)",
                         (thread_id, seq, text, ts))
            if key is not None:
                conn.execute("INSERT INTO episodic_keys VALUES (?, ?, ?)", (thread_id, key, seq))
            self.db.bump(conn, STORE)
        return {**turn, "seq": seq, "ts": ts}

    def recent(self, thread_id: str, limit: int = 10, before: int | None = None) -> list[dict[str, Any]]:
        check_key(thread_id, what="thread id")
        check_limit(limit)
        rows = self.db.read("SELECT seq, turn, ts FROM episodic WHERE thread_id = ? AND seq < ? ORDER BY seq DESC "
                            "LIMIT ?", (thread_id, 2**63 - 1 if before is None else int(before), limit))
        return [_turn(row) for row in reversed(rows)]

    def keyed(self, thread_id: str, key: str) -> dict[str, Any] | None:
        """The turn appended with this idempotency key, if any."""
        check_append_key(key)
        rows = self.db.read(_KEYED, (thread_id, key))
        return _turn(rows[0]) if rows else None

    def count(self, thread_id: str) -> int:
        rows = self.db.read("SELECT count(*) FROM episodic WHERE thread_id = ?", (thread_id,))
        return int(rows[0][0])

    def clear(self, thread_id: str) -> int:
        check_key(thread_id, what="thread id")
        with self.db.transaction() as conn:
            removed = conn.execute("DELETE FROM episodic WHERE thread_id = ?", (thread_id,)).rowcount
            conn.execute("DELETE FROM episodic_keys WHERE thread_id = ?", (thread_id,))
            if removed:
                self.db.bump(conn, STORE)
        return int(removed)

    def threads(self) -> list[ThreadInfo]:
        rows = self.db.read("SELECT thread_id, count(*), max(ts) FROM episodic GROUP BY thread_id ORDER BY thread_id")
        return [ThreadInfo(name, count, last) for name, count, last in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)
