"""Blobs on PostgreSQL (bytea), with the embedded store's limits and checks."""

from __future__ import annotations

import builtins
import hashlib
import time

from ..checks import blob_bytes, check_blob
from ..interfaces import BlobInfo
from .database import PgDatabase

STORE = "blob"


class PgBlobStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, bucket: str, key: str) -> bytes | None:
        check_blob(bucket, key)
        rows = self.db.read("SELECT data FROM ca_blobs WHERE project = %s AND bucket = %s AND key = %s",
                            (self.db.project, bucket, key))
        return bytes(rows[0][0]) if rows else None

    def put(self, bucket: str, key: str, data: bytes) -> BlobInfo:
        check_blob(bucket, key)
        data = blob_bytes(data)
        info = BlobInfo(bucket, key, len(data), hashlib.sha256(data).hexdigest(), time.time())
        with self.db.connection() as conn:
            conn.execute("INSERT INTO ca_blobs(project, bucket, key, data, size, sha256, updated_at) "
                         "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (project, bucket, key) DO UPDATE SET "
                         "data = excluded.data, size = excluded.size, sha256 = excluded.sha256, "
                         "updated_at = excluded.updated_at",
                         (self.db.project, bucket, key, data, info.size, info.sha256, info.updated_at))
            self.db.bump(conn, STORE)
        return info

    def delete(self, bucket: str, key: str) -> bool:
        check_blob(bucket, key)
        with self.db.connection() as conn:
            deleted = conn.execute("DELETE FROM ca_blobs WHERE project = %s AND bucket = %s AND key = %s",
                                   (self.db.project, bucket, key)).rowcount > 0
            if deleted:
                self.db.bump(conn, STORE)
        return deleted

    def list(self, bucket: str | None = None, key_prefix: str = "") -> builtins.list[BlobInfo]:
        sql = ("SELECT bucket, key, size, sha256, updated_at FROM ca_blobs WHERE project = %s "
               "AND left(key, %s) = %s")
        params: tuple[object, ...] = (self.db.project, len(key_prefix), key_prefix)
        if bucket is not None:
            sql += " AND bucket = %s"
            params += (bucket,)
        rows = self.db.read(sql + " ORDER BY bucket COLLATE \"C\", key COLLATE \"C\"", params)
        return [BlobInfo(b, k, size, digest, updated) for b, k, size, digest, updated in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)
