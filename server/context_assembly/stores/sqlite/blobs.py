"""The blob store (`blob://<bucket>/<key>`): raw bytes, kept inside the database (never as files)."""

from __future__ import annotations

import hashlib
import sqlite3
import time

from ..checks import blob_bytes, check_blob
from ..interfaces import BlobInfo
from .database import Database

STORE = "blob"


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS blobs (bucket TEXT NOT NULL, key TEXT NOT NULL, data BLOB NOT NULL, "
                 "size INTEGER NOT NULL, sha256 TEXT NOT NULL, updated_at REAL NOT NULL, "
                 "PRIMARY KEY (bucket, key)) WITHOUT ROWID")


class SqliteBlobStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.register("blobs", _migrate)

    def get(self, bucket: str, key: str) -> bytes | None:
        check_blob(bucket, key)
        rows = self.db.read("SELECT data FROM blobs WHERE bucket = ? AND key = ?", (bucket, key))
        return bytes(rows[0][0]) if rows else None

    def put(self, bucket: str, key: str, data: bytes) -> BlobInfo:
        check_blob(bucket, key)
        data = blob_bytes(data)
        info = BlobInfo(bucket, key, len(data), hashlib.sha256(data).hexdigest(), time.time())
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO blobs(bucket, key, data, size, sha256, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                         "ON CONFLICT(bucket, key) DO UPDATE SET data = excluded.data, size = excluded.size, "
                         "sha256 = excluded.sha256, updated_at = excluded.updated_at",
                         (bucket, key, data, info.size, info.sha256, info.updated_at))
            self.db.bump(conn, STORE)
        return info

    def delete(self, bucket: str, key: str) -> bool:
        check_blob(bucket, key)
        with self.db.transaction() as conn:
            deleted = conn.execute("DELETE FROM blobs WHERE bucket = ? AND key = ?", (bucket, key)).rowcount > 0
            if deleted:
                self.db.bump(conn, STORE)
        return deleted

    def list(self, bucket: str | None = None, key_prefix: str = "") -> list[BlobInfo]:
        sql = "SELECT bucket, key, size, sha256, updated_at FROM blobs WHERE substr(key, 1, ?) = ?"
        params: tuple[object, ...] = (len(key_prefix), key_prefix)
        if bucket is not None:
            sql += " AND bucket = ?"
            params += (bucket,)
        rows = self.db.read(sql + " ORDER BY bucket, key", params)
        return [BlobInfo(b, k, size, digest, updated) for b, k, size, digest, updated in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)
