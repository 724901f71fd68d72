"""The event log and episodic turns on PostgreSQL.

The log is append-only in the database itself: triggers refuse UPDATE, DELETE and TRUNCATE on
`ca_events`, whoever connects. Appends to one log instance take turns (a per-instance advisory lock
held to their commit), so an event without a time is stamped in commit order, never before the
instance's newest time, as on the embedded log. Episodic sequence numbers are allocated under a per-thread
advisory lock, so concurrent appends to one thread never collide. An append's idempotency key is
looked up under the same lock: a retried append answers the first one and appends nothing.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import check_append_key, check_event, check_limit, check_turn, event_time
from ..confine import check_key, refuse
from ..event import payload_matches
from ..interfaces import ThreadInfo
from ..sqlite.json_docs import decode_value, encode_value
from .database import PgDatabase, jsonb_text

_COLUMNS = "id, instance, event_type, payload_text, ts"
_EVENT_KEYED = ("SELECT e.id, e.instance, e.event_type, e.payload_text, e.ts FROM ca_event_keys k "
                "JOIN ca_events e ON e.id = k.id WHERE k.project = %s AND k.instance = %s AND k.key = %s")
_TURN_KEYED = ("SELECT t.seq, t.turn, t.ts FROM ca_episodic_keys k JOIN ca_episodic t ON t.project = k.project "
               "AND t.thread_id = k.thread_id AND t.seq = k.seq WHERE k.project = %s AND k.thread_id = %s "
               "AND k.key = %s")


class PgEventLog:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def append(self, instance: str, event_type: str, payload: dict[str, Any], ts: float | None = None,
               *, key: str | None = None) -> dict[str, Any]:
        given = check_event(instance, event_type, payload, ts)
        check_append_key(key)
        text = encode_value(payload, "/value/payload")
        project = self.db.project
        with self.db.connection() as conn:
            # Appends to one instance one at a time, each until its commit: the time taken after the
            # wait follows commit order, as on the embedded log (`event_time`); ids too.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"log:{project}:{instance}",))
            if key is not None:
                seen = conn.execute(_EVENT_KEYED, (project, instance, key)).fetchone()
                if seen is not None:
                    return {**_event(seen), "duplicate": True}
            if given is None:
                newest = conn.execute("SELECT max(ts) FROM ca_events WHERE project = %s AND instance = %s",
                                      (project, instance)).fetchone()
                ts = event_time(None if newest is None or newest[0] is None else float(newest[0]))
            else:
                ts = given
            row = conn.execute("INSERT INTO ca_events(project, instance, event_type, payload, payload_text, ts) "
                               "VALUES (%s, %s, %s, %s::jsonb, %s, %s) RETURNING id",
                               (project, instance, event_type, jsonb_text(text), text, float(ts))).fetchone()
            if key is not None and row:
                conn.execute("INSERT INTO ca_event_keys VALUES (%s, %s, %s, %s)", (project, instance, key, row[0]))
            self.db.bump(conn, "log")
        return {"id": int(row[0]) if row else 0, "instance": instance, "event_type": event_type,
                "payload": payload, "ts": float(ts)}

    def get(self, instance: str, event_id: int) -> dict[str, Any] | None:
        rows = self.db.read(f"SELECT {_COLUMNS} FROM ca_events WHERE project = %s AND instance = %s AND id = %s",
                            (self.db.project, instance, int(event_id)))
        return _event(rows[0]) if rows else None

    def search(self, instance: str, event_type: str | Sequence[str] | None = None, since: float | None = None,
               fields: Sequence[str] | Mapping[str, Any] | None = None, limit: int = 20,
               before: int | None = None) -> builtins.list[dict[str, Any]]:
        check_key(instance, what="event log instance")
        check_limit(limit)
        where = ["project = %s", "instance = %s"]
        params: builtins.list[Any] = [self.db.project, instance]
        if before is not None:  # older than that event in the newest-first order: (ts, id) below its own
            found = self.db.read("SELECT ts FROM ca_events WHERE project = %s AND instance = %s AND id = %s",
                                 (self.db.project, instance, int(before)))
            if not found:
                raise refuse(f"before={before}: log://{instance} has no event {before}")
            where.append("(ts < %s OR (ts = %s AND id < %s))")
            params += [found[0][0], found[0][0], int(before)]
        types = [event_type] if isinstance(event_type, str) else list(event_type or [])
        if types:
            where.append("event_type = ANY(%s)")
            params.append(types)
        if since is not None:
            where.append("ts >= %s")
            params.append(since)
        equal = fields if isinstance(fields, Mapping) else None
        keep = list(fields) if fields is not None and not isinstance(fields, Mapping) else None
        wanted = encode_value(dict(equal), "/fields") if equal else ""
        if equal and jsonb_text(wanted) == wanted and "\ufffd" not in wanted:
            # jsonb containment narrows in the database; exact JSON equality is checked below. Not
            # for a U+0000 or U+FFFD (the jsonb copy holds both as U+FFFD: two keys may be one there)
            where.append("payload @> %s::jsonb")
            params.append(wanted)
        rows = self.db.read(f"SELECT {_COLUMNS} FROM ca_events WHERE {' AND '.join(where)} "
                            "ORDER BY ts DESC, id DESC" + ("" if equal else " LIMIT %s"),
                            tuple(params) if equal else (*params, limit))
        events = [_event(row) for row in rows]
        if equal is not None:
            events = [e for e in events if payload_matches(e, equal)][:limit]
        if keep is not None:
            for event in events:
                event["payload"] = {k: event["payload"][k] for k in keep if k in event["payload"]}
        return events

    def keyed(self, instance: str, key: str) -> dict[str, Any] | None:
        """The event appended with this idempotency key, if any."""
        check_append_key(key)
        rows = self.db.read(_EVENT_KEYED, (self.db.project, instance, key))
        return _event(rows[0]) if rows else None

    def instances(self) -> builtins.list[ThreadInfo]:
        rows = self.db.read("SELECT instance, count(*), max(ts) FROM ca_events WHERE project = %s "
                            "GROUP BY instance ORDER BY instance COLLATE \"C\"", (self.db.project,))
        return [ThreadInfo(name, int(count), last) for name, count, last in rows]

    def generation(self) -> int:
        return self.db.generation("log")


def _event(row: tuple[Any, ...]) -> dict[str, Any]:
    event_id, instance, event_type, payload, ts = row
    return {"id": int(event_id), "instance": instance, "event_type": event_type, "payload": decode_value(payload),
            "ts": ts}


def _turn(row: tuple[Any, ...]) -> dict[str, Any]:
    seq, turn, ts = row
    return {**decode_value(turn), "seq": int(seq), "ts": ts}


class PgEpisodicStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def append(self, thread_id: str, turn: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        given = check_turn(thread_id, turn)
        check_append_key(key)
        text = encode_value(turn)
        with self.db.connection() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"episodic:{self.db.project}:{thread_id}",))
            if key is not None:
                seen = conn.execute(_TURN_KEYED, (self.db.project, thread_id, key)).fetchone()
                if seen is not None:
                    return {**_turn(seen), "duplicate": True}
            last = conn.execute("SELECT ts FROM ca_episodic WHERE project = %s AND thread_id = %s "
                                "ORDER BY seq DESC LIMIT 1", (self.db.project, thread_id)).fetchone()
            ts = given if given is not None else event_time(float(last[0]) if last else None)
            row = conn.execute("INSERT INTO ca_episodic(project, thread_id, seq, turn, ts) SELECT %s, %s, "
                               "coalesce(max(seq), 0) + 1, %s, %s FROM ca_episodic WHERE project = %s "
                               "AND thread_id = %s RETURNING seq",
                               (self.db.project, thread_id, text, ts, self.db.project, thread_id)).fetchone()
            if key is not None and row:
                conn.execute("INSERT INTO ca_episodic_keys VALUES (%s, %s, %s, %s)",
                             (self.db.project, thread_id, key, row[0]))
            self.db.bump(conn, "episodic")
        return {**turn, "seq": int(row[0]) if row else 0, "ts": ts}

    def recent(self, thread_id: str, limit: int = 10, before: int | None = None) -> builtins.list[dict[str, Any]]:
        check_key(thread_id, what="thread id")
        check_limit(limit)
        below = 2**31 - 1 if before is None else min(int(before), 2**31 - 1)  # seq is a 32-bit integer here
        rows = self.db.read("SELECT seq, turn, ts FROM ca_episodic WHERE project = %s AND thread_id = %s "
                            "AND seq < %s ORDER BY seq DESC LIMIT %s", (self.db.project, thread_id, below, limit))
        return [_turn(row) for row in reversed(rows)]

    def keyed(self, thread_id: str, key: str) -> dict[str, Any] | None:
        """The turn appended with this idempotency key, if any."""
        check_append_key(key)
        rows = self.db.read(_TURN_KEYED, (self.db.project, thread_id, key))
        return _turn(rows[0]) if rows else None

    def count(self, thread_id: str) -> int:
        rows = self.db.read("SELECT count(*) FROM ca_episodic WHERE project = %s AND thread_id = %s",
                            (self.db.project, thread_id))
        return int(rows[0][0])

    def clear(self, thread_id: str) -> int:
        check_key(thread_id, what="thread id")
        with self.db.connection() as conn:
            removed = conn.execute("DELETE FROM ca_episodic WHERE project = %s AND thread_id = %s",
                                   (self.db.project, thread_id)).rowcount
            conn.execute("DELETE FROM ca_episodic_keys WHERE project = %s AND thread_id = %s",
                         (self.db.project, thread_id))
            if removed:
                self.db.bump(conn, "episodic")
        return int(removed)

    def threads(self) -> builtins.list[ThreadInfo]:
        rows = self.db.read("SELECT thread_id, count(*), max(ts) FROM ca_episodic WHERE project = %s "
                            "GROUP BY thread_id ORDER BY thread_id COLLATE \"C\"", (self.db.project,))
        return [ThreadInfo(name, int(count), last) for name, count, last in rows]

    def generation(self) -> int:
        return self.db.generation("episodic")
