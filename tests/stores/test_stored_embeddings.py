"""Reading stored embeddings as one matrix (`stores/sqlite/stored_embeddings.py`): block by block
through SQLite's own concatenation, equal to reading them row by row, whatever the ids."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from context_assembly.errors import StorageError
from context_assembly.stores.sqlite import stored_embeddings
from context_assembly.stores.sqlite.stored_embeddings import (
    HIGHEST,
    LOWEST,
    embeddings_of,
    read_embeddings,
    rows_matrix,
    stored_ids,
)
from context_assembly.stores.sqlite.vector import SqliteVectorStore
from context_assembly.workspace.layout import WorkspaceLayout

IDS = st.integers(LOWEST, HIGHEST)


def open_table(root: Path, encoding: str = "UTF-8") -> sqlite3.Connection:
    """A connection to the store's own database (its schema as migrated), created in `encoding`."""
    layout = WorkspaceLayout(root)
    layout.db_path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(layout.db_path) as conn:
        conn.execute(f"PRAGMA encoding = '{encoding}'")
        conn.execute("CREATE TABLE made_here (x)")  # the encoding is fixed once something is written
    store = SqliteVectorStore.for_workspace(layout)
    store.index._db.read("SELECT 1")  # opened: migrated
    store.index._db.close()
    conn = sqlite3.connect(layout.db_path, isolation_level=None)
    conn.execute("BEGIN")  # as the callers read: inside one read transaction
    return conn


def insert(conn: sqlite3.Connection, rows: dict[int, str], dimension: int, seed: int = 0) -> dict[int, np.ndarray]:
    """Chunks under the given ids (id -> collection) with random vectors, as another writer might."""
    vectors = np.random.default_rng(seed).standard_normal((len(rows), dimension)).astype("<f4")
    conn.executemany("INSERT INTO vector_chunks (id, collection, doc_uri, ord, text, embedding) "
                     "VALUES (?, ?, ?, 0, ?, ?)", [(i, c, f"doc-{i}", f"text {i}", v.tobytes())
                                                   for (i, c), v in zip(rows.items(), vectors, strict=True)])
    return dict(zip(rows, vectors, strict=True))


def row_by_row(conn: sqlite3.Connection, collection: str, dimension: int, after: int | None = None,
               limit: int = -1) -> tuple[np.ndarray, np.ndarray]:
    return rows_matrix(conn.execute(
        "SELECT id, embedding FROM vector_chunks WHERE collection = ? AND id > ? ORDER BY id LIMIT ?",
        (collection, after, limit)).fetchall(), dimension) if after is not None else rows_matrix(conn.execute(
        "SELECT id, embedding FROM vector_chunks WHERE collection = ? ORDER BY id LIMIT ?",
        (collection, limit)).fetchall(), dimension)


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(stored_embeddings, "BLOCK_BYTES", 3 * 8 * 4)  # 3 rows of 8 a statement
    yield


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.dictionaries(IDS, st.sampled_from(["a", "b"]), max_size=40),
       after=st.none() | IDS, limit=st.none() | st.integers(0, 50))
def test_equals_reading_row_by_row(tmp_path_factory: pytest.TempPathFactory, tiny_blocks: None,
                                   rows: dict[int, str], after: int | None, limit: int | None) -> None:
    """Any ids (negative ones, the extremes, gaps, two collections interleaved), any `after` and
    `limit`, many blocks: the same ids in ascending order, each with its own vector."""
    conn = open_table(tmp_path_factory.mktemp("db"))
    insert(conn, rows, 8)
    ids, matrix = read_embeddings(conn, "a", 8, after=after, limit=limit)
    want_ids, want = row_by_row(conn, "a", 8, after, -1 if limit is None else limit)
    assert ids.dtype == np.int64 and matrix.dtype == np.float32 and matrix.shape == (len(want_ids), 8)
    assert np.array_equal(ids, want_ids) and np.array_equal(matrix, want)
    assert np.array_equal(stored_ids(conn, "a"), row_by_row(conn, "a", 8)[0])


def test_a_collection_of_many_blocks(tmp_path: Path) -> None:
    conn = open_table(tmp_path)
    vectors = insert(conn, {i: "docs" for i in range(1, 30_001, 3)}, 384, seed=1)  # 15 MB: two blocks of 8 MB
    ids, matrix = read_embeddings(conn, "docs", 384)
    assert ids.tolist() == sorted(vectors)
    assert np.array_equal(matrix, np.stack([vectors[i] for i in sorted(vectors)]))
    assert np.array_equal(stored_ids(conn, "docs", up_to=300), np.arange(1, 301, 3))


def test_blocks_stay_within_sqlites_limit_on_a_value(tmp_path: Path) -> None:
    """A connection whose values may hold 4 KB at most (SQLite's limit, which a build or an
    application may lower): blocks of fewer rows, the same matrix."""
    conn = open_table(tmp_path)
    vectors = insert(conn, {i: "docs" for i in range(1, 101)}, 64, seed=3)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 4096)
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    ids, matrix = read_embeddings(conn, "docs", 64)
    assert ids.tolist() == sorted(vectors)
    assert np.array_equal(matrix, np.stack([vectors[i] for i in sorted(vectors)]))
    assert sum("group_concat" in sql for sql in seen) == 13  # 8 rows of 256 bytes a block (half the limit)


def test_an_empty_collection(tmp_path: Path) -> None:
    conn = open_table(tmp_path)
    ids, matrix = read_embeddings(conn, "nothing", 256)
    assert ids.shape == (0,) and matrix.shape == (0, 256)
    assert stored_ids(conn, "nothing").shape == (0,)


def test_a_utf16_database_is_read_row_by_row(tmp_path: Path, tiny_blocks: None) -> None:
    """SQLite's concatenation would take each BLOB for UTF-16 text there: the rows are read one by
    one instead, and give the same matrix."""
    conn = open_table(tmp_path, "UTF-16le")
    assert conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-16le"
    vectors = insert(conn, {i: "docs" for i in range(1, 40)}, 8, seed=2)
    ids, matrix = read_embeddings(conn, "docs", 8)
    assert ids.tolist() == sorted(vectors)
    assert np.array_equal(matrix, np.stack([vectors[i] for i in sorted(vectors)]))


@pytest.mark.parametrize("blocks", [True, False])
def test_a_vector_of_another_size_is_a_storage_error(tmp_path: Path, blocks: bool) -> None:
    conn = open_table(tmp_path, "UTF-8" if blocks else "UTF-16le")
    insert(conn, {1: "docs", 2: "docs"}, 8)
    conn.execute("UPDATE vector_chunks SET embedding = zeroblob(12) WHERE id = 2")
    with pytest.raises(StorageError, match="do not have 8 dimensions"):
        read_embeddings(conn, "docs", 8)


@pytest.mark.parametrize("rows, statements", [(3_000, 1), (20_000, 3)])
def test_a_few_statements_not_a_step_a_row(tmp_path: Path, rows: int, statements: int) -> None:
    """The reason for the blocks: `sqlite3` lets go of the interpreter at every step, and a thread
    running Python meanwhile may keep it for its switch interval each time (a row-by-row read of
    100k chunks beside a busy thread took over a minute). Blocks of 8 MB: one step each."""
    conn = open_table(tmp_path)
    insert(conn, {i: "docs" for i in range(1, rows + 1)}, 256)
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    ids, _ = read_embeddings(conn, "docs", 256)
    assert len(ids) == rows
    assert sum("group_concat" in sql for sql in seen) == statements and len(seen) == statements + 2


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(rows={7: "a", 8: "b"}, wanted=[7] + list(range(100, 599)) + [7, 8], encoding="UTF-8")
@given(rows=st.dictionaries(st.integers(-50, 1200), st.sampled_from(["a", "b"]), max_size=40),
       wanted=st.lists(st.integers(-50, 1200), max_size=1200), encoding=st.sampled_from(["UTF-8", "UTF-16le"]))
def test_embeddings_of_the_ids_asked_for(tmp_path_factory: pytest.TempPathFactory, rows: dict[int, str],
                                         wanted: list[int], encoding: str) -> None:
    """An ANN search's candidates re-scored: the chunks among the ids asked for (repeated, absent,
    of another collection; over 500 of them: several statements) that collection `a` holds, each
    with its own vector."""
    conn = open_table(tmp_path_factory.mktemp("db"), encoding)
    vectors = insert(conn, rows, 8)
    ids, matrix = embeddings_of(conn, "a", wanted, 8)
    expected = sorted({i for i in wanted if rows.get(i) == "a"})
    assert sorted(ids.tolist()) == expected and len(ids) == len(expected)
    assert matrix.shape == (len(ids), 8) and matrix.dtype == np.float32
    for i, vector in zip(ids.tolist(), matrix, strict=True):
        assert np.array_equal(vector, vectors[i])
