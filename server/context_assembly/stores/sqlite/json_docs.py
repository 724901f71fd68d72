"""JSON documents by name (`json://<doc>[#/pointer]`), and the JSON value encoding every SQLite store shares.

Values are stored as orjson text. A pointer write is a read-modify-write of the whole document
inside one `BEGIN IMMEDIATE` transaction, so two processes patching different parts both land.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import orjson

from ...documents.pointers import array_index, format_pointer, parse_pointer
from ...errors import InvalidParamsError
from ...limits import DEFAULT as DEFAULT_LIMITS
from ..confine import check_key, refuse
from ..interfaces import JsonDocument
from .database import Database

STORE = "json"
MAX_VALUE_BYTES = DEFAULT_LIMITS.write_value_bytes  # the store's own bound; memory/write applies the settings'


def encode_value(value: Any, pointer: str = "/value") -> str:
    """JSON text for `value`; InvalidParamsError when it is not JSON or is too big."""
    try:
        data = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as exc:
        if str(exc) == "Recursion limit reached":  # JSON all the same: deeper than orjson writes (254 levels)
            raise refuse("the value is nested too deeply to store (more than 254 levels)", pointer) from None
        raise refuse(f"the value is not JSON: {exc}", pointer) from None
    if len(data) > MAX_VALUE_BYTES:
        raise refuse(f"the value is too big ({len(data)} bytes of JSON; at most {MAX_VALUE_BYTES})", pointer)
    return data.decode()


def decode_value(text: str | bytes) -> Any:
    return orjson.loads(text)


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS json_docs (name TEXT PRIMARY KEY, value TEXT NOT NULL, "
                 "updated_at REAL NOT NULL) WITHOUT ROWID")


class SqliteJsonStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.register("json_docs", _migrate)

    def get(self, name: str, pointer: str = "") -> tuple[bool, Any]:
        check_key(name, what="JSON document name")
        rows = self.db.read("SELECT value FROM json_docs WHERE name = ?", (name,))
        if not rows:
            return False, None
        return resolve_pointer(decode_value(rows[0][0]), pointer)

    def put(self, name: str, value: Any, pointer: str = "") -> JsonDocument:
        check_key(name, what="JSON document name")
        now = time.time()
        if not pointer:
            text = encode_value(value)
            with self.db.transaction() as conn:
                self._store(conn, name, text, now)
            return JsonDocument(name, value, now, len(text.encode()))
        encode_value(value)  # refuse a bad value before taking the write lock
        with self.db.transaction() as conn:
            row = conn.execute("SELECT value FROM json_docs WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise refuse(f"json://{name} does not exist: write the whole document before a part of it")
            document = set_at_pointer(decode_value(row[0]), pointer, value)
            text = encode_value(document)
            self._store(conn, name, text, now)
        return JsonDocument(name, document, now, len(text.encode()))

    def _store(self, conn: sqlite3.Connection, name: str, text: str, now: float) -> None:
        conn.execute("INSERT INTO json_docs(name, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(name) "
                     "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at", (name, text, now))
        self.db.bump(conn, STORE)

    def delete(self, name: str, pointer: str = "") -> bool:
        check_key(name, what="JSON document name")
        with self.db.transaction() as conn:
            if not pointer:
                deleted = conn.execute("DELETE FROM json_docs WHERE name = ?", (name,)).rowcount > 0
            else:
                row = conn.execute("SELECT value FROM json_docs WHERE name = ?", (name,)).fetchone()
                document = decode_value(row[0]) if row else None
                deleted = row is not None and remove_at_pointer(document, pointer)
                if deleted:
                    conn.execute("UPDATE json_docs SET value = ?, updated_at = ? WHERE name = ?",
                                 (encode_value(document), time.time(), name))
            if deleted:
                self.db.bump(conn, STORE)
        return deleted

    def list(self, prefix: str = "") -> list[JsonDocument]:
        rows = self.db.read("SELECT name, updated_at, length(CAST(value AS BLOB)) FROM json_docs "
                            "WHERE substr(name, 1, ?) = ? ORDER BY name", (len(prefix), prefix))
        return [JsonDocument(name, None, updated_at, size) for name, updated_at, size in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)


# -- JSON pointers over plain values (RFC 6901 reads, RFC 6902 "add"-like writes)


def resolve_pointer(document: Any, pointer: str) -> tuple[bool, Any]:
    """(found, value) of the part `pointer` names; (False, None) when it does not resolve."""
    current = document
    for token in parse_pointer(pointer):
        if isinstance(current, dict):
            if token not in current:
                return False, None
            current = current[token]
        elif isinstance(current, list):
            index = array_index(token)
            if index is None or index >= len(current):
                return False, None
            current = current[index]
        else:
            return False, None
    return True, current


def set_at_pointer(document: Any, pointer: str, value: Any) -> Any:
    """`document` with the part at `pointer` set (parent must exist; "-" appends to an array)."""
    tokens = parse_pointer(pointer)
    if not tokens:
        return value
    found, parent = resolve_pointer(document, format_pointer(tokens[:-1]))
    last = tokens[-1]
    if found and isinstance(parent, dict):
        parent[last] = value
        return document
    if found and isinstance(parent, list):
        if last == "-":
            parent.append(value)
            return document
        index = array_index(last)
        if index is not None and index < len(parent):
            parent[index] = value
            return document
        if index == len(parent):
            parent.append(value)
            return document
    raise _bad_pointer(pointer, "its parent is not an object or array of the document")


def remove_at_pointer(document: Any, pointer: str) -> bool:
    tokens = parse_pointer(pointer)
    if not tokens:
        return False
    found, parent = resolve_pointer(document, format_pointer(tokens[:-1]))
    last = tokens[-1]
    if found and isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    if found and isinstance(parent, list):
        index = array_index(last)
        if index is not None and index < len(parent):
            del parent[index]
            return True
    return False


def _bad_pointer(pointer: str, reason: str) -> InvalidParamsError:
    return refuse(f"cannot write at JSON pointer {pointer!r}: {reason}")
