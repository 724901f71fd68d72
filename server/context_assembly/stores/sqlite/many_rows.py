"""Many rows in a few statements: writes, and the ids a `group_concat(id)` read gives.

`executemany` steps its statement once a row, and `sqlite3` lets go of the interpreter around every
step: beside a thread running Python, each row then waits up to its switch interval (5 ms) to get
it back. Upserting 2,000 documents into a vector collection took 0.3 s alone and 17 s beside a busy
thread that way. A statement of many rows (`VALUES (…), (…), …`) is one step, whatever SQLite does
inside it (triggers included); see also stores.sqlite.stored_embeddings, which reads the same way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROWS_PER_STATEMENT = 256  # bounded by SQLite's limit on parameters too (999 in old builds)
IN_LIST = 500  # values of one `IN (…)` list


def insert_rows(conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
    """`head VALUES (?, …), (?, …), … tail` over every row, in order, `ROWS_PER_STATEMENT` at a time."""
    if not rows:
        return
    width = len(rows[0])
    per = max(1, min(ROWS_PER_STATEMENT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    one = "(" + ", ".join("?" * width) + ")"
    for start in range(0, len(rows), per):
        part = rows[start:start + per]
        conn.execute(f"{head} VALUES {', '.join([one] * len(part))} {tail}", [v for row in part for v in row])


def in_lists(values: Sequence[Any]) -> list[tuple[str, Sequence[Any]]]:
    """(`?, ?, …`, values) per `IN_LIST` of `values`, for `… IN ({marks})` statements."""
    return [(", ".join("?" * len(part)), part)
            for part in (values[start:start + IN_LIST] for start in range(0, len(values), IN_LIST))]


def ids_of(text: str | None) -> NDArray[np.int64]:
    """The ids of a `group_concat(id)` ("1,2,3"; None: no row), parsed in C (as hex digits they
    took twice as long)."""
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)
