"""The keyword postings saved beside the database, so that a new process starts from them.

Reading the postings from the FTS index takes seconds at 100k chunks, and each process that
searched a large index read them anew; until it had, FTS5 answered its keyword legs (~100 ms a
query holding common words at 100k chunks). A build now saves what it read in
`<database folder>/keyword-postings/postings.npz` (one file, replaced atomically); another process
loads it (~40 ms at 100k chunks, its checks included) and then catches it up from the table as after any write
(`PostingsKeeper`). The file is a cache: it is used only when

- it carries the database's token (`vector_postings` table, written with the first save: a
  recreated database has none, so it never reads another's file);
- its generation is not ahead of the database's, every chunk id up to its highest one that the
  FTS index holds is in it (chunk ids only grow, so a chunk it lacks below that id means it is not
  this database's history), and its newest chunks still in the table are in it word for word (a
  database restored from an older copy and written again reuses the ids above the copy's);
- its arrays are whole and agree with each other and with the totals it records.

Anything else, and the file is ignored: the postings are read from the FTS index as before.
"""

from __future__ import annotations

import io
import logging
import sqlite3
import uuid
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import orjson

from ...errors import StorageError
from ...workspace.atomic import write_atomic
from .database import Database
from .postings import Postings, Snapshot, indexed_ids, read_transaction, store_generation, tokenize

log = logging.getLogger(__name__)

FORMAT = 1
FOLDER = "keyword-postings"
FILE = "postings.npz"
ARRAYS = ("ids", "collections", "lengths", "offsets", "docs", "freqs", "vocab", "meta")
SAMPLE = 16  # the newest chunks a loaded file must hold word for word
SEPARATOR = b"\n"  # between vocabulary words: FTS5's unicode61 never puts one inside a token


class PostingsFiles:
    """The saved postings of one database (see the module's doc)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE

    def save(self, db: Database, snapshot: Snapshot) -> None:
        """Save a snapshot freshly read from the FTS index (no tail, nothing deleted), under the
        database's token (made now if it has none). Raises StorageError when it cannot be written."""
        if snapshot.tail.entries or not bool(snapshot.live.all()):
            raise ValueError("only a snapshot read whole from the FTS index is saved")
        token = made_token(db)
        main = snapshot.main
        words = list(main.vocab)
        meta = {"format": FORMAT, "token": token, "generation": snapshot.generation, "rows": snapshot.rows,
                "tokens": snapshot.tokens, "codes": snapshot.codes, "words": len(words)}
        buffer = io.BytesIO()
        np.savez(buffer, ids=snapshot.ids, collections=snapshot.collections, lengths=snapshot.lengths,
                 offsets=main.offsets, docs=main.docs, freqs=main.freqs,
                 vocab=np.frombuffer(SEPARATOR.join(w.encode("utf-8") for w in words), dtype=np.uint8),
                 meta=np.frombuffer(orjson.dumps(meta), dtype=np.uint8))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, buffer.getvalue())

    def load(self, conn: sqlite3.Connection) -> Snapshot | None:
        """The saved snapshot when this database may use it (see the module's doc), else None."""
        try:
            token = database_token(conn)
            if token is None or not self.path.is_file():
                return None
            loaded = np.load(self.path, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                raise ValueError("it is not an archive of arrays")
            with loaded as saved:
                arrays = {name: saved[name] for name in ARRAYS}
            snapshot = _snapshot(arrays, token)
            return snapshot if snapshot is not None and _same_history(conn, snapshot) else None
        except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                zipfile.BadZipFile, sqlite3.Error) as exc:
            log.warning("the saved keyword postings %s cannot be used (%s): they are read anew", self.path, exc)
            return None


def database_token(conn: sqlite3.Connection) -> str | None:
    """The token a file saved beside the database must carry to be trusted (keyword postings, a
    collection's matrix): made with the first such save, so a recreated database has none."""
    row = conn.execute("SELECT token FROM vector_postings WHERE id = 1").fetchone()
    return str(row[0]) if row else None


def made_token(db: Database) -> str:
    """The database's token, made now if it has none."""
    token = database_token(db.connection())
    if token is None:
        with db.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO vector_postings(id, token) VALUES (1, ?)", (uuid.uuid4().hex,))
            token = database_token(conn)
    assert token is not None
    return token


def _snapshot(arrays: dict[str, np.ndarray], token: str) -> Snapshot | None:
    """The snapshot the arrays hold, checked whole; None when they are another database's."""
    meta = orjson.loads(arrays["meta"].tobytes())
    if meta.get("format") != FORMAT or meta.get("token") != token:
        return None
    ids, collections, lengths = arrays["ids"], arrays["collections"], arrays["lengths"]
    offsets, docs, freqs = arrays["offsets"], arrays["docs"], arrays["freqs"]
    words = arrays["vocab"].tobytes().decode("utf-8").split(SEPARATOR.decode()) if meta["words"] else []
    codes = {str(name): int(code) for name, code in meta["codes"].items()}
    chunks = len(ids)
    if (len(words) != meta["words"] or len(offsets) != len(words) + 1 or len(collections) != chunks
            or len(lengths) != chunks or len(docs) != len(freqs) or int(offsets[0]) != 0
            or int(offsets[-1]) != len(docs) or bool(np.any(np.diff(offsets) < 0))
            or (chunks and bool(np.any(np.diff(ids) <= 0)))
            or (len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= chunks))
            or (chunks and (int(collections.min()) < 0 or int(collections.max()) >= len(codes)))
            or int(lengths.sum()) != int(meta["tokens"]) or chunks != int(meta["rows"])):
        raise ValueError("its arrays do not agree with each other")
    main = Postings({word: n for n, word in enumerate(words)}, offsets.astype(np.int64, copy=False),
                    docs.astype(np.int32, copy=False), freqs.astype(np.int32, copy=False))
    return Snapshot(int(meta["generation"]), ids.astype(np.int64, copy=False),
                    collections.astype(np.int32, copy=False), codes, np.ones(chunks, dtype=np.bool_),
                    lengths.astype(np.float64, copy=False), int(meta["rows"]), int(meta["tokens"]), main)


def _same_history(conn: sqlite3.Connection, snapshot: Snapshot) -> bool:
    """Whether the database can have grown out of the snapshot: its generation is not behind the
    snapshot's, the FTS index holds no chunk up to the snapshot's highest id that it lacks, and the
    newest `SAMPLE` chunks of it that the table still holds are in it word for word (a database
    restored from an older copy and written again reuses the ids above the copy's)."""
    with read_transaction(conn):
        if store_generation(conn) < snapshot.generation:
            return False
        held = indexed_ids(conn, snapshot.max_id)
        at = np.searchsorted(snapshot.ids, held)
        if not (bool(np.all(at < len(snapshot.ids))) and bool(np.array_equal(snapshot.ids[at], held))):
            return False
        newest = held[-SAMPLE:]
        rows = conn.execute(f"SELECT id, text FROM vector_chunks WHERE id IN ({','.join('?' * len(newest))})",
                            newest.tolist()).fetchall()
        tokens = tokenize(conn, [(int(i), str(text)) for i, text in rows])
    return len(tokens) == len(newest) and all(
        _holds(snapshot, int(position), tokens[int(i)]) for i, position in zip(newest, at[-SAMPLE:], strict=True))


def _holds(snapshot: Snapshot, position: int, tokens: list[str]) -> bool:
    """Whether the snapshot's postings give the chunk at `position` exactly these tokens."""
    counts = Counter(tokens)
    if len(tokens) != int(snapshot.lengths[position]):
        return False
    for token, count in counts.items():
        found = snapshot.main.of(token)
        if found is None:
            return False
        docs, freqs = found
        i = int(np.searchsorted(docs, position))  # a word's chunks are in position order
        if i >= len(docs) or int(docs[i]) != position or int(freqs[i]) != count:
            return False
    return True


def save_quietly(files: PostingsFiles, db: Database, snapshot: Snapshot) -> None:
    """`save`, a failure logged: the postings in memory serve on, the next process reads its own."""
    try:
        files.save(db, snapshot)
    except (StorageError, OSError, sqlite3.Error) as exc:
        log.warning("the keyword postings could not be saved in %s (%s)", files.path, exc)
