"""Writes of many rows in a few statements (`stores/sqlite/many_rows.py`): the same rows, ids and
values as a statement a row, and a handful of steps however many rows (each step lets go of the
interpreter, which a thread running Python may then keep for its switch interval)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.stores.embedding import HASHING
from context_assembly.stores.sqlite import many_rows
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.kv import SqliteKVStore
from context_assembly.stores.sqlite.many_rows import in_lists, insert_rows
from context_assembly.stores.sqlite.vector import SqliteVectorStore
from context_assembly.workspace.layout import WorkspaceLayout


def statements(traced: list[str]) -> list[str]:
    """The statements run, from what SQLite's trace reported: it reports a statement again for each
    trigger program it runs (or that program's own text, after "--")."""
    run = [sql for sql in traced if not sql.startswith("--")]
    return [sql for n, sql in enumerate(run) if n == 0 or sql != run[n - 1]]


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-5, 5), st.text(max_size=5)), max_size=60), per=st.integers(1, 9))
def test_insert_rows_writes_every_row_in_order(rows: list[tuple[int, str]], per: int) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY AUTOINCREMENT, a INTEGER, b TEXT)")
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 2 * per)  # `per` rows of 2 a statement at most
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    insert_rows(conn, "INSERT INTO t(a, b)", rows)
    assert len(seen) == math.ceil(len(rows) / per)
    assert conn.execute("SELECT a, b FROM t ORDER BY n").fetchall() == rows


def test_in_lists_cover_every_value_once() -> None:
    values = list(range(1234))
    lists = in_lists(values)
    assert [len(part) for _, part in lists] == [500, 500, 234]
    assert [v for _, part in lists for v in part] == values
    assert all(marks.count("?") == len(part) for marks, part in lists)
    assert in_lists([]) == []


def test_kv_set_many_is_a_few_statements_and_the_last_value_wins(tmp_path: Path) -> None:
    db = Database(tmp_path / "project.db")
    kv = SqliteKVStore(db)
    entries = [("i", "n", f"k{i % 700}", i) for i in range(1000)]  # 300 keys given twice
    seen: list[str] = []
    db.connection().set_trace_callback(seen.append)
    assert kv.set_many(entries) == 1000
    db.connection().set_trace_callback(None)
    inserts = [sql for sql in statements(seen) if sql.startswith("INSERT INTO kv")]
    assert len(inserts) == math.ceil(1000 / many_rows.ROWS_PER_STATEMENT)
    assert {e.key: e.value for e in kv.list("i", "n")} == {f"k{k}": max(i for i in range(1000) if i % 700 == k)
                                                         for k in range(700)}
    db.close()


def test_vector_upsert_many_ids_match_the_table(tmp_path: Path) -> None:
    """A batch that replaces some documents and adds others, several chunks each: the chunks the
    documents had are gone, each new chunk's id is the one this process's cached matrix gives its
    vector (a fresh read gives the same matrix), and the batch took a few statements."""
    s = SqliteVectorStore.for_workspace(WorkspaceLayout(tmp_path), default_model=HASHING)
    long = " ".join(f"word{n}" for n in range(400))
    s.upsert_many("c", [(f"d{i}", f"first text {i} {long}", {}) for i in range(600)])
    s.search("c", "first text 3")  # the matrix cached: the next batch patches it
    before = s.index._db.read("SELECT count(*) FROM vector_chunks")[0][0]
    replaced = sum(s.index._db.read("SELECT count(*) FROM vector_chunks WHERE doc_uri = ?", (f"d{i}",))[0][0]
                   for i in range(0, 600, 2))
    assert replaced > 300  # several chunks each
    seen: list[str] = []
    s.index._db.connection().set_trace_callback(seen.append)
    result = s.upsert_many("c", [(f"d{i}", f"second text {i}", {"n": i}) for i in range(0, 1200, 2)])
    s.index._db.connection().set_trace_callback(None)
    assert result["documents"] == 600 and result["chunks"] == 600
    assert len(statements(seen)) < 30  # the replaced documents' chunks found and deleted, documents and chunks inserted
    rows = s.index._db.read("SELECT doc_uri, ord, text FROM vector_chunks WHERE doc_uri = 'd2' ORDER BY ord")
    assert [tuple(r) for r in rows] == [("d2", 0, "second text 2")]
    assert s.index._db.read("SELECT count(*) FROM vector_chunks")[0][0] == before - replaced + 600
    assert s.get("c", "d4")["metadata"] == {"n": 4}  # type: ignore[index]
    patched = s.index._indexes["c"]
    fresh = SqliteVectorStore.for_workspace(WorkspaceLayout(tmp_path), default_model=HASHING)
    fresh.search("c", "x")
    loaded = fresh.index._indexes["c"]
    order = np.argsort(patched.ids)
    assert np.array_equal(patched.ids[order], loaded.ids) and np.array_equal(patched.matrix[order], loaded.matrix)
    assert s.search("c", "second text 1000", top_k=3) == fresh.search("c", "second text 1000", top_k=3)


@pytest.mark.parametrize("docs", [0, 1, 3])
def test_vector_upsert_of_a_few_documents(tmp_path: Path, docs: int) -> None:
    s = SqliteVectorStore.for_workspace(WorkspaceLayout(tmp_path), default_model=HASHING)
    s.upsert_many("c", [(f"d{i}", f"text {i}", {}) for i in range(docs)])
    s.upsert_many("c", [(f"d{i}", f"new text {i}", {}) for i in range(docs)])
    assert sorted(d["doc_uri"] for d in s.list("c")) == [f"d{i}" for i in range(docs)]
    assert [h["doc_uri"] for h in s.search("c", "new text 0", top_k=1, mode="keyword")] == (["d0"] if docs else [])

