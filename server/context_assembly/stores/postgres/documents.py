"""JSON documents on PostgreSQL: the exact text (read back as written, key order and U+0000
included, as embedded) beside a jsonb copy for the database's own use; pointer writes under a row lock.

A pointer write locks the document's row (`SELECT … FOR UPDATE`) for its transaction, so two
sidecars patching different parts of one document both land: no read-modify-write race. A row a
sidecar of an earlier version wrote last (its `text_at` is not its `updated_at`) is read from its jsonb.
"""

from __future__ import annotations

import builtins
import time
from typing import Any

from ...documents.pointers import parse_pointer
from ..confine import check_key, refuse
from ..interfaces import JsonDocument
from ..sqlite.json_docs import decode_value, encode_value, remove_at_pointer, resolve_pointer, set_at_pointer
from .database import PgDatabase, jsonb_text

STORE = "json"
# the exact text when this version wrote the row last, else (an earlier version's write) the jsonb
_TEXT = ("SELECT CASE WHEN text_at = updated_at THEN text ELSE value::text END FROM ca_json "
         "WHERE project = %s AND name = %s")


class PgJsonStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, name: str, pointer: str = "") -> tuple[bool, Any]:
        check_key(name, what="JSON document name")
        parse_pointer(pointer)  # a malformed pointer is refused, whether or not the document exists
        rows = self.db.read(_TEXT, (self.db.project, name))
        # the pointer is resolved here (RFC 6901, on the exact text), not with jsonb's #>
        return resolve_pointer(decode_value(rows[0][0]), pointer) if rows else (False, None)

    def put(self, name: str, value: Any, pointer: str = "") -> JsonDocument:
        check_key(name, what="JSON document name")
        now = time.time()
        text = encode_value(value)  # refuse a bad value before touching the database
        with self.db.connection() as conn:
            if pointer:
                row = conn.execute(_TEXT + " FOR UPDATE", (self.db.project, name)).fetchone()
                if row is None:
                    raise refuse(f"json://{name} does not exist: write the whole document before a part of it")
                value = set_at_pointer(decode_value(row[0]), pointer, value)
                text = encode_value(value)
            self._store(conn, name, text, now)
        return JsonDocument(name, value, now, len(text.encode()))

    def _store(self, conn: Any, name: str, text: str, now: float) -> None:
        conn.execute("INSERT INTO ca_json(project, name, value, text, size, updated_at, text_at) "
                     "VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s) ON CONFLICT (project, name) DO UPDATE SET "
                     "value = excluded.value, text = excluded.text, size = excluded.size, "
                     "updated_at = excluded.updated_at, text_at = excluded.text_at",
                     (self.db.project, name, jsonb_text(text), text, len(text.encode()), now, now))
        self.db.bump(conn, STORE)

    def delete(self, name: str, pointer: str = "") -> bool:
        check_key(name, what="JSON document name")
        with self.db.connection() as conn:
            if not pointer:
                deleted = conn.execute("DELETE FROM ca_json WHERE project = %s AND name = %s",
                                       (self.db.project, name)).rowcount > 0
            else:
                row = conn.execute(_TEXT + " FOR UPDATE", (self.db.project, name)).fetchone()
                document = decode_value(row[0]) if row else None
                deleted = row is not None and remove_at_pointer(document, pointer)
                if deleted:
                    self._store(conn, name, encode_value(document), time.time())
                    return True
            if deleted:
                self.db.bump(conn, STORE)
        return deleted

    def list(self, prefix: str = "") -> builtins.list[JsonDocument]:
        rows = self.db.read("SELECT name, updated_at, size FROM ca_json WHERE project = %s AND left(name, %s) = %s "
                            "ORDER BY name COLLATE \"C\"", (self.db.project, len(prefix), prefix))
        return [JsonDocument(name, None, updated_at, size) for name, updated_at, size in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)
