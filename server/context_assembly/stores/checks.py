"""Input checks of the record stores (blobs, KV, working memory, event log, episodic memory).

Every backend runs these before it touches its database, so a bad key, value or limit is refused
with the same message and JSON pointer whichever backend holds the data.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..limits import LOG_LIMIT, current
from .confine import check_key, refuse

MAX_AHEAD_S = 86_400.0  # how far ahead of this machine's clock a given `ts` may be (a day: clocks, time zones)

MAX_BLOB_BYTES = 64 * 1024 * 1024
# What one write names, in UTF-8 bytes, on every backend: PostgreSQL indexes the names beside the
# project key, and an index entry holds at most 2,704 bytes
MAX_ADDRESS_BYTES = 2048
MAX_EVENTS = LOG_LIMIT  # the default; a read checks against its session's `current()` limits
MAX_TURNS = LOG_LIMIT


def check_blob(bucket: str, key: str) -> None:
    check_key(bucket, what="blob bucket")
    check_key(key, what="blob key")


def blob_bytes(data: Any) -> bytes:
    """The blob's content as bytes, refused when it is not bytes or too big."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise refuse("blob data must be bytes", "/value")
    data = bytes(data)
    if len(data) > MAX_BLOB_BYTES:
        raise refuse(f"the blob is too big ({len(data)} bytes; at most {MAX_BLOB_BYTES})", "/value")
    return data


def check_kv(instance: str, namespace: str, key: str) -> None:
    check_key(instance, what="KV instance")
    check_key(namespace, what="KV namespace")
    check_key(key, what="KV key")


def check_working(thread_id: str, key: str) -> None:
    check_key(thread_id, what="thread id")
    check_key(key, what="working-memory key")


def check_event(instance: str, event_type: str, payload: Any, ts: Any) -> float | None:
    """Refuses a malformed event; returns the time it was given, or None when it has none: the log
    then stamps it inside its write transaction (`event_time`), so that times follow commit order."""
    check_key(instance, what="event log instance")
    check_key(event_type, what="event type", pointer="/value/event_type")
    if utf8_size(instance) + utf8_size(event_type) > MAX_ADDRESS_BYTES:  # indexed together
        raise refuse(f"the event type and the log instance are more than {MAX_ADDRESS_BYTES} bytes of UTF-8 "
                     "together", "/value/event_type")
    if not isinstance(payload, dict):
        raise refuse("an event payload must be a JSON object", "/value/payload")
    if ts is None:
        return None
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        raise refuse("an event timestamp must be a finite number of epoch seconds", "/value/ts")
    return not_ahead(float(ts), "/value/ts")


def not_ahead(ts: float, pointer: str) -> float:
    """A given time at most a day ahead of now. One ahead holds the later stamped entries of its log
    or thread at that time (`event_time` never stamps before the newest) until the clock passes it:
    milliseconds given for seconds, or a wrong clock, would hold them for good."""
    ahead = ts - time.time()
    if ahead > MAX_AHEAD_S:
        raise refuse(f"the timestamp {ts:g} is {ahead:,.0f} s ahead of this machine's clock (at most a day): "
                     "a time is in epoch seconds, not milliseconds; a time planned ahead belongs in the "
                     "payload", pointer)
    return ts


def event_time(newest: float | None) -> float:
    """The time of an event appended without one, taken inside the log's write transaction (after
    any wait for it): now, but never before `newest`, the newest time already in its log instance.
    Each backend serialises the appends to one instance, so within an instance times never go
    backwards in commit order, and a reader tailing with `since=` the newest time it has seen
    misses no event committed later (it sees events of exactly that time again: keep them by id)."""
    now = time.time()
    return now if newest is None or newest < now else float(newest)


def check_turn(thread_id: str, turn: Any) -> float | None:
    """Refuses a malformed turn; returns its own `ts` when that is a finite number, else None: the
    thread stamps it inside its write transaction (`event_time`), so that turns said at once by
    two processes keep the order of their `seq` (compress_turns orders turns by time)."""
    check_key(thread_id, what="thread id")
    if not isinstance(turn, dict):
        raise refuse("a turn must be a JSON object {role, content, …}", "/value")
    if not isinstance(turn.get("role"), str) or not turn["role"]:
        raise refuse("a turn needs a 'role' string (user, assistant, tool, …)", "/value/role")
    if "content" not in turn:
        raise refuse("a turn needs 'content'", "/value/content")
    given = turn.get("ts")
    if isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given):
        return not_ahead(float(given), "/value/ts")
    return None


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_append_key(key: Any) -> None:
    """An append's idempotency key (log events, episodic turns): None, or an opaque key."""
    if key is not None:
        check_key(key, what="idempotency key", pointer="/idempotency_key")
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a command line's undecodable byte): no store takes it
            raise refuse("the idempotency key is not valid Unicode (a lone surrogate)", "/idempotency_key") from None


def check_limit(limit: Any) -> int:
    """The `limit` of an event-log or episodic read: an integer from 1 to limits.log_limit."""
    maximum = current().log_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise refuse(f"limit must be an integer between 1 and {maximum} (limits.log_limit)", "/limit")
    return limit
