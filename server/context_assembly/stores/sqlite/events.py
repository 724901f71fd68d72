"""The event log (`log://<instance>`): append-only structured events, searched newest first.

There is deliberately no update or delete: the log is the audit trail and the source of the
ingestion `onAction` trigger. Ids come from an AUTOINCREMENT key, so they are never reused even
across processes. An event appended without a time is stamped inside the write transaction (which
one process at a time holds), never before the newest time of its instance (`event_time`), so
newest first is commit order and a `since=` tail misses nothing; a time the caller gives is kept.

An append may carry an idempotency key: a second append with the key of an event already in its
instance appends nothing and answers that event (`event_keys`, checked in the same write
transaction, so two processes retrying at once still append one event).
"""

from __future__ import annotations

import hashlib
import math
import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import StorageError
from ..checks import check_append_key, check_event, check_limit, event_time
from ..confine import check_key, refuse
from ..event import payload_matches
from ..interfaces import ThreadInfo
from .database import Database
from .json_docs import decode_value, encode_value

STORE = "log"


# A payload field an index can be built on: its name goes into SQL text (an index expression
# cannot take a parameter), so only plain names qualify; others are searched by scanning.
_INDEXABLE = re.compile(r"[A-Za-z0-9_\-.:@/ ]{1,64}")


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                 "instance TEXT NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL, ts REAL NOT NULL)")
    conn.execute("CREATE INDEX IF NOT EXISTS events_by_time ON events(instance, ts, id)")
    conn.execute("CREATE INDEX IF NOT EXISTS events_by_type ON events(instance, event_type, ts, id)")
    # Per instance: how many events and the newest time, kept by `append`, so `instances` reads one
    # row per instance instead of counting every event. Filled from the events when it is new.
    new = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'event_instances'"
                       ).fetchone() is None
    conn.execute("CREATE TABLE IF NOT EXISTS event_instances (instance TEXT PRIMARY KEY, count INTEGER NOT NULL, "
                 "last_ts REAL NOT NULL) WITHOUT ROWID")
    if new:
        conn.execute("INSERT INTO event_instances SELECT instance, count(*), max(ts) FROM events GROUP BY instance")
    conn.execute("CREATE TABLE IF NOT EXISTS event_keys (instance TEXT NOT NULL, key TEXT NOT NULL, "
                 "id INTEGER NOT NULL, PRIMARY KEY (instance, key)) WITHOUT ROWID")


def _field_sql(name: str) -> str | None:
    """`json_extract(payload, '$."name"')`, the expression of the field's index; None when not indexable."""
    return f"""json_extract(payload, '$."{name}"')""" if _INDEXABLE.fullmatch(name) else None


def _field_test(name: str, value: Any) -> tuple[str, tuple[Any, ...]] | None:
    """An SQL test every event whose payload has `name` equal to `value` passes (a superset: the
    exact JSON comparison follows in Python), or None when SQL cannot narrow it."""
    expression = _field_sql(name)
    if expression is None or isinstance(value, list | dict):
        return None
    if value is None:
        return f"{expression} IS NULL", ()
    if isinstance(value, float) and not math.isfinite(value) or \
            isinstance(value, int) and not -(2**63) <= value < 2**63:  # beyond what SQLite binds
        return None
    if isinstance(value, str) and "\x00" in value:  # json_extract's text ends at a U+0000: never equal
        return None
    return f"{expression} = ?", (int(value) if isinstance(value, bool) else value,)


_KEYED = ("SELECT e.id, e.instance, e.event_type, e.payload, e.ts FROM event_keys k JOIN events e ON e.id = k.id "
          "WHERE k.instance = ? AND k.key = ?")  # the event appended with a key


class SqliteEventLog:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._indexed: set[str] = set()  # payload fields known to have their index
        db.register("events", _migrate)

    def append(self, instance: str, event_type: str, payload: dict[str, Any], ts: float | None = None,
               *, key: str | None = None) -> dict[str, Any]:
        given = check_event(instance, event_type, payload, ts)
        check_append_key(key)
        text = encode_value(payload, "/value/payload")
        with self.db.transaction() as conn:  # one writer at a time: the time is taken in commit order
            if key is not None:
                seen = conn.execute(_KEYED, (instance, key)).fetchone()
                if seen is not None:
                    return {**_event(seen), "duplicate": True}
            if given is None:
                newest = conn.execute("SELECT last_ts FROM event_instances WHERE instance = ?", (instance,)).fetchone()
                ts = event_time(None if newest is None else float(newest[0]))
            else:
                ts = given
            cursor = conn.execute("INSERT INTO events(instance, event_type, payload, ts) VALUES (?, ?, ?, ?)",
                                  (instance, event_type, text, float(ts)))
            conn.execute("INSERT INTO event_instances VALUES (?, 1, ?) ON CONFLICT(instance) DO UPDATE SET "
                         "count = count + 1, last_ts = max(last_ts, excluded.last_ts)", (instance, float(ts)))
            if key is not None:
                conn.execute("INSERT INTO event_keys VALUES (?, ?, ?)", (instance, key, cursor.lastrowid))
            self.db.bump(conn, STORE)
        return {"id": cursor.lastrowid, "instance": instance, "event_type": event_type, "payload": payload,
                "ts": float(ts)}

    def get(self, instance: str, event_id: int) -> dict[str, Any] | None:
        rows = self.db.read("SELECT id, instance, event_type, payload, ts FROM events WHERE instance = ? AND id = ?",
                            (instance, int(event_id)))
        return _event(rows[0]) if rows else None

    def search(self, instance: str, event_type: str | Sequence[str] | None = None, since: float | None = None,
               fields: Sequence[str] | Mapping[str, Any] | None = None, limit: int = 20,
               before: int | None = None) -> list[dict[str, Any]]:
        check_key(instance, what="event log instance")
        check_limit(limit)
        where = ["instance = ?"]
        params: list[Any] = [instance]
        if before is not None:  # older than that event in the newest-first order: (ts, id) below its own
            rows = self.db.read("SELECT ts FROM events WHERE instance = ? AND id = ?", (instance, int(before)))
            if not rows:
                raise refuse(f"before={before}: log://{instance} has no event {before}")
            where.append("(ts < ? OR (ts = ? AND id < ?))")
            params += [rows[0][0], rows[0][0], int(before)]
        types = [event_type] if isinstance(event_type, str) else list(event_type or [])
        if types:
            where.append(f"event_type IN ({', '.join('?' * len(types))})")
            params += types
        if since is not None:
            where.append("ts >= ?")
            params.append(since)
        equal = fields if isinstance(fields, Mapping) else None
        keep = list(fields) if fields is not None and not isinstance(fields, Mapping) else None
        for name, value in (equal or {}).items():
            test = _field_test(name, value) if isinstance(name, str) else None
            if test is not None:
                where.append(test[0])
                params += test[1]
        if equal:
            self._index_field(next((n for n in equal if isinstance(n, str) and _field_test(n, equal[n])), None))
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
                        if payload_matches(event, equal):
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

    def _index_field(self, name: str | None) -> None:
        """The index on one payload field, built by the first search by that field (seconds on a
        million events, once; every process then shares it)."""
        if name is None or name in self._indexed:
            return
        expression = _field_sql(name)
        if expression is None:
            return
        index = "events_field_" + hashlib.blake2b(name.encode(), digest_size=8).hexdigest()
        with self.db.transaction() as conn:
            conn.execute(f"CREATE INDEX IF NOT EXISTS {index} ON events(instance, {expression}, ts, id)")
        self._indexed.add(name)

    def keyed(self, instance: str, key: str) -> dict[str, Any] | None:
        """The event appended with this idempotency key, if any."""
        check_append_key(key)
        rows = self.db.read(_KEYED, (instance, key))
        return _event(rows[0]) if rows else None

    def instances(self) -> list[ThreadInfo]:
        rows = self.db.read("SELECT instance, count, last_ts FROM event_instances ORDER BY instance")
        return [ThreadInfo(name, count, last) for name, count, last in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)


def _event(row: sqlite3.Row | tuple[Any, ...]) -> dict[str, Any]:
    event_id, instance, event_type, payload, ts = row
    return {"id": event_id, "instance": instance, "event_type": event_type, "payload": decode_value(payload),
            "ts": ts}
