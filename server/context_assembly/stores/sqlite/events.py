"""The event log (`log://<instance>`): append-only structured events, searched newest first.

There is deliberately no update or delete: the log is the audit trail and the source of the
ingestion `onAction` trigger. Ids come from an AUTOINCREMENT key, so they are never reused even
across processes.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import StorageError
from ...limits import LOG_LIMIT
from ..confine import check_key, refuse
from ..interfaces import ThreadInfo
from .database import Database
from .json_docs import decode_value, encode_value

STORE = "log"
MAX_LIMIT = LOG_LIMIT


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                 "instance TEXT NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL, ts REAL NOT NULL)")
    conn.execute("CREATE INDEX IF NOT EXISTS events_by_time ON events(instance, ts, id)")
    conn.execute("CREATE INDEX IF NOT EXISTS events_by_type ON events(instance, event_type, ts, id)")


class SqliteEventLog:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.register("events", _migrate)

    def append(self, instance: str, event_type: str, payload: dict[str, Any], ts: float | None = None
               ) -> dict[str, Any]:
        check_key(instance, what="event log instance")
        check_key(event_type, what="event type", pointer="/value/event_type")
        if not isinstance(payload, dict):
            raise refuse("an event payload must be a JSON object", "/value/payload")
        if ts is None:
            ts = time.time()
        elif isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise refuse("an event timestamp must be a finite number of epoch seconds", "/value/ts")
        text = encode_value(payload, "/value/payload")
        with self.db.transaction() as conn:
            cursor = conn.execute("INSERT INTO events(instance, event_type, payload, ts) VALUES (?, ?, ?, ?)",
                                  (instance, event_type, text, float(ts)))
            self.db.bump(conn, STORE)
        return {"id": cursor.lastrowid, "instance": instance, "event_type": event_type, "payload": payload,
                "ts": float(ts)}

    def get(self, instance: str, event_id: int) -> dict[str, Any] | None:
        rows = self.db.read("SELECT id, instance, event_type, payload, ts FROM events WHERE instance = ? AND id = ?",
                            (instance, int(event_id)))
        return _event(rows[0]) if rows else None

    def search(self, instance: str, event_type: str | Sequence[str] | None = None, since: float | None = None,
               fields: Sequence[str] | Mapping[str, Any] | None = None, limit: int = 20) -> list[dict[str, Any]]:
        check_key(instance, what="event log instance")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise refuse(f"limit must be an integer between 1 and {MAX_LIMIT}", "/limit")
        where = ["instance = ?"]
        params: list[Any] = [instance]
        types = [event_type] if isinstance(event_type, str) else list(event_type or [])
        if types:
            where.append(f"event_type IN ({', '.join('?' * len(types))})")
            params += types
        if since is not None:
            where.append("ts >= ?")
            params.append(since)
        equal = fields if isinstance(fields, Mapping) else None
        keep = list(fields) if fields is not None and not isinstance(fields, Mapping) else None
        sql = (f"SELECT id, instance, event_type, payload, ts FROM events WHERE {' AND '.join(where)} "
               "ORDER BY ts DESC, id DESC")
        if equal is None:
            rows = self.db.read(sql + " LIMIT ?", (*params, limit))
            events = [_event(row) for row in rows]
        else:
            # Payload equality is tested in Python (exact JSON semantics), streaming until `limit` match.
            events = []
            try:
                cursor = self.db.connection().execute(sql, params)
                try:
                    for row in cursor:
                        event = _event(row)
                        if all(k in event["payload"] and event["payload"][k] == v for k, v in equal.items()):
                            events.append(event)
                            if len(events) >= limit:
                                break
                finally:
                    cursor.close()
            except sqlite3.Error as exc:
                raise StorageError(f"event log search failed: {exc}") from exc
        if keep is not None:
            for event in events:
                event["payload"] = {k: event["payload"][k] for k in keep if k in event["payload"]}
        return events

    def instances(self) -> list[ThreadInfo]:
        rows = self.db.read("SELECT instance, count(*), max(ts) FROM events GROUP BY instance ORDER BY instance")
        return [ThreadInfo(name, count, last) for name, count, last in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)


def _event(row: sqlite3.Row | tuple[Any, ...]) -> dict[str, Any]:
    event_id, instance, event_type, payload, ts = row
    return {"id": event_id, "instance": instance, "event_type": event_type, "payload": decode_value(payload),
            "ts": ts}
