"""Real write-time failures, made by the database itself: no mocks.

`refuse_kv_key` installs a trigger that refuses one KV key (as a CHECK constraint or a policy
would); `fail_commit_on_kv_key` makes the transaction that writes that key fail at COMMIT (a
deferred foreign key), so the writes before it succeed and only the commit fails. Both work on the
embedded SQLite database and on PostgreSQL (there limited to one project key, since the test
server is shared); the returned function removes what they installed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing

from context_assembly.stores.factory import open_stores
from context_assembly.workspace.layout import WorkspaceLayout


def _sqlite(layout: WorkspaceLayout, script: str) -> None:
    layout.db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(layout.db_path)) as conn:
        conn.executescript(script)


def _postgres(dsn: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)


def _kv_table(layout: WorkspaceLayout) -> None:
    """The KV store creates its table on first use; the trigger needs it now."""
    stores = open_stores(layout)
    try:
        stores.kv.list()
    finally:
        stores.close()


def refuse_kv_key(key: str, *, layout: WorkspaceLayout, dsn: str | None = None, project: str | None = None
                  ) -> Callable[[], None]:
    """Every write of KV key `key` is refused by the database ('key <key> is refused')."""
    name = f"refuse_{abs(hash((key, project))) % 10**9}"
    if dsn is None:
        _kv_table(layout)
        _sqlite(layout, f"CREATE TRIGGER {name} BEFORE INSERT ON kv WHEN NEW.key = '{key}' "
                        f"BEGIN SELECT RAISE(ABORT, 'key {key} is refused'); END;")
        return lambda: _sqlite(layout, f"DROP TRIGGER IF EXISTS {name}")
    _postgres(dsn, f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                   f"RAISE EXCEPTION 'key {key} is refused'; END $$;"
                   f"CREATE TRIGGER {name} BEFORE INSERT OR UPDATE ON ca_kv FOR EACH ROW "
                   f"WHEN (NEW.key = '{key}' AND NEW.project = '{project}') EXECUTE FUNCTION {name}()")
    return lambda: _postgres(dsn, f"DROP TRIGGER IF EXISTS {name} ON ca_kv; DROP FUNCTION IF EXISTS {name}()")


def fail_commit_on_kv_key(key: str, *, layout: WorkspaceLayout, dsn: str | None = None,
                          project: str | None = None) -> Callable[[], None]:
    """A transaction that writes KV key `key` fails when it commits (a deferred check), not before."""
    name = f"late_{abs(hash((key, project))) % 10**9}"
    if dsn is None:
        _kv_table(layout)
        _sqlite(layout, f"CREATE TABLE {name}_parent (id INTEGER PRIMARY KEY);"
                        f"CREATE TABLE {name}_child (pid INTEGER REFERENCES {name}_parent(id) "
                        f"DEFERRABLE INITIALLY DEFERRED);"
                        f"CREATE TRIGGER {name} AFTER INSERT ON kv WHEN NEW.key = '{key}' "
                        f"BEGIN INSERT INTO {name}_child VALUES (42); END;")
        return lambda: _sqlite(layout, f"DROP TRIGGER IF EXISTS {name}")
    _postgres(dsn, f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                   f"RAISE EXCEPTION 'key {key} fails at commit'; END $$;"
                   f"CREATE CONSTRAINT TRIGGER {name} AFTER INSERT OR UPDATE ON ca_kv "
                   f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                   f"WHEN (NEW.key = '{key}' AND NEW.project = '{project}') EXECUTE FUNCTION {name}()")
    return lambda: _postgres(dsn, f"DROP TRIGGER IF EXISTS {name} ON ca_kv; DROP FUNCTION IF EXISTS {name}()")
