"""Bulk reads and writes of the embedded store alone and beside a thread running Python, on the
full-size bench workspace (100,000 chunks in `docs`) and a scratch store.

    python bench/assemble/busy_thread.py [--runs 3] [--baseline-rows 5000] [--documents 2000]

`sqlite3` lets go of the interpreter around every step of a statement, i.e. every row; a thread
running Python meanwhile then keeps it until its switch interval (5 ms) runs out, each time. In a
sidecar such threads are the first request's own work, other memories' pipelines, the compiler
in the background. Timed, alone and beside a thread counting in a loop:

- *matrix, row by row*: the collection's embeddings fetched as rows and joined (the baseline: how
  they were read before, `rows_matrix`; `--baseline-rows` of them beside the busy thread, the
  time scaled to the whole collection: the whole takes over a minute there);
- *matrix, in blocks*: `stored_embeddings.read_embeddings`, as the store reads it now;
- *keyword postings build*: `PostingsKeeper._read`, everything a build reads from the FTS index;
- *upsert, a statement a row*: `--documents` short documents written into a scratch collection
  (feature hashing) by `upsert_many` with `stores.sqlite.many_rows` set to one row a statement,
  as the store wrote them before (a tenth of them beside the busy thread, scaled);
- *upsert, many rows a statement*: the same, as the store writes them now;
- the search path's smaller reads, row by row (before) and in one statement (now): the texts of
  the 2,000 newest chunks (a keyword catch-up after another process's writes,
  `postings.chunk_rows`) and the embeddings of 100 random chunks (an ANN search re-scoring its
  candidates, `stored_embeddings.embeddings_of`).

Reported: the median milliseconds, and busy ÷ alone per row.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import workspace  # the bench's generator, beside this file (the script's folder is on the path)
from context_assembly.stores.embedding import HASHING
from context_assembly.stores.sqlite import many_rows
from context_assembly.stores.sqlite.postings import chunk_rows
from context_assembly.stores.sqlite.stored_embeddings import embeddings_of, read_embeddings, rows_matrix
from context_assembly.stores.sqlite.vector import SqliteVectorStore
from context_assembly.workspace.layout import WorkspaceLayout

HERE = Path(__file__).resolve().parent
COLLECTION = "docs"


@contextmanager
def busy_thread() -> Iterator[None]:
    stop = threading.Event()

    def count() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    thread = threading.Thread(target=count, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def timed(read: Callable[[], object], runs: int) -> float:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        read()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def measure(root: Path, runs: int, baseline_rows: int, documents: int) -> list[tuple[str, float, float]]:
    store = SqliteVectorStore.for_workspace(WorkspaceLayout(root))
    index = store.index
    dimension = int(index._db.read("SELECT dimension FROM vector_collections WHERE collection = ?",
                                   (COLLECTION,))[0][0])
    total = int(index._db.read("SELECT count(*) FROM vector_chunks WHERE collection = ?", (COLLECTION,))[0][0])
    conn = index._db.connection()

    def rows(limit: int) -> Callable[[], object]:
        return lambda: rows_matrix(conn.execute(
            "SELECT id, embedding FROM vector_chunks WHERE collection = ? ORDER BY id LIMIT ?",
            (COLLECTION, limit)).fetchall(), dimension)

    def blocks() -> object:
        with index._snapshot() as snapshot:  # (the count and the blocks see one state)
            return read_embeddings(snapshot, COLLECTION, dimension)

    build = index.postings._read
    cases = {"matrix, row by row": (rows(total), rows(min(baseline_rows, total)), total / min(baseline_rows, total)),
             "matrix, in blocks": (blocks, blocks, 1.0),
             "keyword postings build": (build, build, 1.0)}
    scratch = SqliteVectorStore.for_workspace(WorkspaceLayout(Path(tempfile.mkdtemp())), default_model=HASHING)
    batch = [(f"d{n}", f"document {n} about schema migrations in the audit handler", {}) for n in range(documents)]
    cases["upsert, a statement a row"] = (row_a_statement(scratch, batch), row_a_statement(scratch, batch[::10]), 10.0)
    cases["upsert, many rows a statement"] = ((upsert := lambda: scratch.upsert_many("c", batch)), upsert, 1.0)
    cases.update(small_reads(conn, dimension))
    out = []
    for name, (alone, beside, scale) in cases.items():
        quiet = timed(alone, runs)
        with busy_thread():
            loaded = timed(beside, 1 if scale > 1 else runs) * scale
        out.append((name, quiet, loaded))
    index._db.close()
    scratch.index._db.close()
    return out


def small_reads(conn: sqlite3.Connection, dimension: int) -> dict[str, tuple[Callable[[], object], ...]]:
    """The search path's smaller reads, row by row as before and as now: the 2,000 newest chunks'
    texts (a keyword catch-up after another process's writes) and 100 random chunks' embeddings
    (an ANN search re-scoring its candidates)."""
    highest = int(conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0])
    after = (highest - 2000, 2001)
    wanted = random.Random(7).sample(range(1, highest + 1), 100)
    marks = ",".join("?" * len(wanted))

    def texts_by_row() -> object:
        return conn.execute("SELECT id, collection, text FROM vector_chunks WHERE id > ? ORDER BY id LIMIT ?",
                            after).fetchall()

    def candidates_by_row() -> object:
        return rows_matrix(conn.execute(f"SELECT id, embedding FROM vector_chunks WHERE id IN ({marks}) "
                                        "AND collection = ?", (*wanted, COLLECTION)).fetchall(), dimension)

    def texts() -> object:
        return chunk_rows(conn, "WHERE id > ? ORDER BY id LIMIT ?", after)

    def candidates() -> object:
        return embeddings_of(conn, COLLECTION, wanted, dimension)

    return {"2,000 chunks' texts, row by row": (texts_by_row, texts_by_row, 1.0),
            "2,000 chunks' texts, one statement": (texts, texts, 1.0),
            "100 candidates' embeddings, row by row": (candidates_by_row, candidates_by_row, 1.0),
            "100 candidates' embeddings, one statement": (candidates, candidates, 1.0)}


def row_a_statement(store: SqliteVectorStore, batch: list[tuple[str, str, dict[str, object]]]) -> Callable[[], object]:
    """`store.upsert_many(batch)` with one row a statement (an IN list of one), as before."""
    def upsert() -> object:
        saved = many_rows.ROWS_PER_STATEMENT, many_rows.IN_LIST
        many_rows.ROWS_PER_STATEMENT = many_rows.IN_LIST = 1
        try:
            return store.upsert_many("c", batch)
        finally:
            many_rows.ROWS_PER_STATEMENT, many_rows.IN_LIST = saved
    return upsert


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble", help="run.py's output folder")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline-rows", type=int, default=5_000,
                    help="rows the row-by-row baseline reads beside the busy thread (scaled to the collection)")
    ap.add_argument("--documents", type=int, default=2000, help="documents a timed upsert writes")
    args = ap.parse_args()
    root = workspace.full_size(args.out)
    rows = measure(root, args.runs, args.baseline_rows, args.documents)
    print(f"bulk reads of the full-size bench workspace and writes of {args.documents} documents "
          f"(median of {args.runs}; load {os.getloadavg()[0]:.2f})\n")
    print("| what | alone ms | beside a busy thread ms | busy ÷ alone |\n| --- | ---: | ---: | ---: |")
    for name, quiet, loaded in rows:
        print(f"| {name} | {quiet * 1000:.2f} | {loaded * 1000:.2f} | {loaded / quiet:.1f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
