"""The keyword postings saved beside the database, so that a new process starts from them, and
maps them rather than holding a copy.

Reading the postings from the FTS index takes seconds at 100k chunks, and each process that
searched a large index read them anew; until it had, FTS5 answered its keyword legs (~100 ms a
query holding common words at 100k chunks). A build now saves what it read in
`<database folder>/keyword-postings/`: `postings~<random>.bin` holds the arrays one after the
other, little-endian (`LAYOUT`), and `postings.json` names it and records the database's token,
the generation, the FTS totals, the collections' codes and the arrays' lengths. A file is written
once under a new name and never changed; the description is replaced atomically, under a lock
that every save holds, and never names a generation older than the one it names unless that one is
not of the database's history (below). Another process
maps the file read-only (the pages are shared between a swarm's processes: ~40 MB at 100k chunks
held once, not once per process), its words looked up by binary search (`SavedWords`, no dict per
process), and then catches it up from the table as after any write (`PostingsKeeper`); the
process that saved it maps it too, instead of its own copy. The file is a cache: it is used only
when

- it carries the database's token (`vector_postings` table, written with the first save: a
  recreated database has none, so it never reads another's file);
- its generation is not ahead of the database's, every chunk id up to its highest one that the
  FTS index holds is in it (chunk ids only grow, so a chunk it lacks below that id means it is not
  this database's history), and its newest chunks still in the table (a sample: `SAMPLE`) are in
  it word for word (a database restored from an older copy and written again reuses the ids above
  the copy's);
- its arrays are whole and agree with each other and with the totals it records.

Anything else, and the file is ignored: the postings are read from the FTS index as before.
(`postings.npz`, the one-file copy earlier versions saved, is no longer read: the next save removes it.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import StorageError
from .database import Database
from .postings import Postings, SavedWords, Snapshot, indexed_ids, read_transaction, store_generation, tokenize
from .saved_files import (
    CollectionLocks,
    current_meta,
    name_file,
    stale_temps,
    write_arrays,
)

if TYPE_CHECKING:
    from filelock import FileLock

log = logging.getLogger(__name__)

FORMAT = 2
FOLDER = "keyword-postings"
META = "postings.json"
EARLIER = "postings.npz"  # format 1: one archive, loaded as a copy by each process
SAVE_WAIT_S = 10.0  # another process saving: its save (~0.1 s at 100k chunks) is waited for
SAMPLE = 16  # the newest chunks a loaded file must hold word for word
# what a description or file that cannot be used raises as it is read and checked (a cache: logged, read anew)
UNUSABLE = (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError)
# (array, dtype, its length's key in the description): 8-byte items first, so each array starts aligned
LAYOUT = (("ids", "<i8", "chunks"), ("lengths", "<f8", "chunks"), ("offsets", "<i8", "words+1"),
          ("starts", "<i8", "words+1"), ("docs", "<i4", "entries"), ("freqs", "<i4", "entries"),
          ("collections", "<i4", "chunks"), ("order", "<i4", "words"), ("vocab", "u1", "vocab_bytes"))


class PostingsFiles:
    """The saved postings of one database (see the module's doc)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / META
        self._locks = CollectionLocks(folder, ".lock")

    def build_lock(self) -> FileLock:
        """The lock a build holds from its read of the FTS index to its save, across processes: a
        swarm's sidecars needing the postings at once read them once (seconds of CPU at 100k
        chunks), not once each; the others' keyword legs go to FTS5 until the file is saved."""
        return self._locks("build")

    def version(self) -> tuple[int, int] | None:
        """Which description is there (each save replaces it: a new file, a new inode); None: none."""
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_ino, stat.st_mtime_ns

    def save(self, db: Database, snapshot: Snapshot) -> Postings | None:
        """Save a snapshot freshly read from the FTS index (no tail, nothing deleted), under the
        database's token (made now if it has none); its postings as mapped from the file named
        once this returns, for the caller to use instead of its own copy: the new file, or one
        another process named meanwhile holding exactly what this one would. None when one of a
        later generation of this database's history is named (or another process held the lock
        past `SAVE_WAIT_S`). Raises OSError when it cannot be written."""
        from filelock import Timeout

        if snapshot.tail.entries or not bool(snapshot.live.all()):
            raise ValueError("only a snapshot read whole from the FTS index is saved")
        token = made_token(db)
        arrays = _arrays(snapshot)
        meta = {"format": FORMAT, "token": token, "generation": snapshot.generation, "rows": snapshot.rows,
                "tokens": snapshot.tokens, "codes": snapshot.codes, "chunks": len(snapshot.ids),
                "words": len(arrays["order"]), "entries": len(arrays["docs"]), "vocab_bytes": len(arrays["vocab"])}
        try:
            with self._locks("postings").acquire(timeout=SAVE_WAIT_S):
                named = self._named(token)
                if named is not None and int(named[0]["generation"]) >= snapshot.generation:
                    if {**named[0], "file": None} == {**meta, "file": None} and all(
                            np.array_equal(arrays[name], named[1][name]) for name, _, _ in LAYOUT):
                        return named[2].main
                    if int(named[0]["generation"]) > snapshot.generation and _same_history(db.connection(), named[2]):
                        return None  # newer, and of this database: kept
                    # the same generation with other postings, or a newer one not of this database's
                    # history: a database restored from an older copy and written again reuses ids
                del named  # its mapping let go: on Windows a mapped file cannot be tidied away
                return self._write(arrays, meta)
        except Timeout:
            return None

    def _named(self, token: str) -> tuple[dict[str, Any], dict[str, np.ndarray], Snapshot] | None:
        """The description, arrays and snapshot of the file named, when it is this database's and
        can be read."""
        try:
            meta = current_meta(self.path)
            if meta.get("format") != FORMAT or meta.get("token") != token:
                return None
            arrays = _file_arrays(self.folder / str(meta["file"]), meta)
            return meta, arrays, _snapshot(arrays, meta, str(meta["file"]))
        except UNUSABLE:
            return None

    def _write(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Postings:
        name = f"postings~{uuid.uuid4().hex[:12]}.bin"
        write_arrays(self.folder / name, [arrays[key].astype(dtype, copy=False) for key, dtype, _ in LAYOUT])
        meta = {**meta, "file": name}
        name_file(self.path, meta)
        self._tidy(name)
        return _snapshot(_file_arrays(self.folder / name, meta), meta, name).main

    def _tidy(self, kept: str) -> None:
        leftovers = [old for old in self.folder.glob("postings~*.bin") if old.name != kept]
        leftovers += stale_temps(self.folder)
        for old in [*leftovers, self.folder / EARLIER]:
            with contextlib.suppress(OSError):  # a file mapped elsewhere on Windows: a later save
                old.unlink(missing_ok=True)

    def load(self, conn: sqlite3.Connection, tries: int = 3) -> Snapshot | None:
        """The saved snapshot, mapped, when this database may use it (see the module's doc), else
        None. A file named but gone by the time it is opened (saves replaced the description and
        tidied it away meanwhile) sends it back to the description, `tries` times in all."""
        for _ in range(tries):
            try:
                token = database_token(conn)
                if token is None:
                    return None
                snapshot = _mapped(self.folder, current_meta(self.path), token)
                return snapshot if snapshot is not None and _same_history(conn, snapshot) else None
            except FileNotFoundError:
                continue
            except (*UNUSABLE, sqlite3.Error) as exc:
                log.warning("the saved keyword postings %s cannot be used (%s): they are read anew", self.path, exc)
                return None
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


def _arrays(snapshot: Snapshot) -> dict[str, np.ndarray]:
    """What the file holds (`LAYOUT`): the snapshot's arrays, and its words as bytes with their
    starts and the word numbers in byte order of the words (`SavedWords`)."""
    main = snapshot.main
    words: list[bytes] = [b""] * len(main.vocab)
    for word, number in main.vocab.items():
        words[number] = word.encode("utf-8")
    starts = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum([len(word) for word in words], out=starts[1:])
    order = np.array(sorted(range(len(words)), key=words.__getitem__), dtype=np.int32)
    return {"ids": snapshot.ids, "lengths": snapshot.lengths, "offsets": main.offsets, "starts": starts,
            "docs": main.docs, "freqs": main.freqs, "collections": snapshot.collections, "order": order,
            "vocab": np.frombuffer(b"".join(words), dtype=np.uint8)}


def _mapped(folder: Path, meta: dict[str, Any], token: str) -> Snapshot | None:
    """The snapshot the description names, its file mapped read-only and checked whole; None when
    it is another database's or another format. ValueError when the file does not agree with it."""
    if meta.get("format") != FORMAT or meta.get("token") != token:
        return None
    return _snapshot(_file_arrays(folder / str(meta["file"]), meta), meta, str(meta["file"]))


def _file_arrays(path: Path, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """The arrays of the file, mapped read-only (`LAYOUT`, their lengths from the description)."""
    lengths = {key: int(meta[key.removesuffix("+1")]) + key.endswith("+1") for _, _, key in LAYOUT}
    sizes = [np.dtype(dtype).itemsize * lengths[key] for _, dtype, key in LAYOUT]
    with path.open("rb") as file:  # sized and mapped through one handle: the same file
        size = os.fstat(file.fileno()).st_size
        if size != sum(sizes):
            raise ValueError(f"{path.name} holds {size} bytes, not the {sum(sizes)} its description gives")
        # plain arrays over the mapping: a memmap's slices and results each pass through Python
        # code (numpy's __array_finalize__ / __array_wrap__)
        raw = np.memmap(file, dtype=np.uint8, mode="r").view(np.ndarray) if size else np.zeros(0, dtype=np.uint8)
    arrays, at = {}, 0
    for (name, dtype, _), size in zip(LAYOUT, sizes, strict=True):
        arrays[name] = raw[at:at + size].view(dtype)
        at += size
    return arrays


def _snapshot(arrays: dict[str, np.ndarray], meta: dict[str, Any], file: str) -> Snapshot:
    """The snapshot the arrays hold, checked whole (ValueError when they disagree)."""
    ids, collections, lengths = (arrays[name] for name in ("ids", "collections", "lengths"))
    offsets, docs, freqs, starts, order = (arrays[name] for name in ("offsets", "docs", "freqs", "starts", "order"))
    if not isinstance(meta["codes"], dict):
        raise ValueError("its collections' codes are not an object")
    codes = {str(name): int(code) for name, code in meta["codes"].items()}
    chunks, words = len(ids), len(order)
    # (not checked: that `order` sorts the words, and each word's chunks ascend; only this module
    # writes these files, whole or not at all, and a sample of them is checked against the table)
    if (int(offsets[0]) != 0 or int(offsets[-1]) != len(docs) or bool(np.any(np.diff(offsets) < 0))
            or int(starts[0]) != 0 or int(starts[-1]) != len(arrays["vocab"]) or bool(np.any(np.diff(starts) < 0))
            or not np.array_equal(np.sort(order), np.arange(words))
            or (chunks and bool(np.any(np.diff(ids) <= 0)))
            or (len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= chunks))
            or (chunks and (int(collections.min()) < 0 or int(collections.max()) >= len(codes)))
            or int(lengths.sum()) != int(meta["tokens"]) or chunks != int(meta["rows"])):
        raise ValueError("its arrays do not agree with each other")
    vocab = SavedWords(_buffer(arrays["vocab"]), _buffer(starts.astype(np.int64, copy=False)),  # native
                       _buffer(order.astype(np.int32, copy=False)))  # (a copy only on a big-endian machine)
    main = Postings(vocab, offsets.astype(np.int64, copy=False), docs.astype(np.int32, copy=False),
                    freqs.astype(np.int32, copy=False), file)
    return Snapshot(int(meta["generation"]), ids.astype(np.int64, copy=False),
                    collections.astype(np.int32, copy=False), codes, np.ones(chunks, dtype=np.bool_),
                    lengths.astype(np.float64, copy=False), int(meta["rows"]), int(meta["tokens"]), main)


def _buffer(array: np.ndarray) -> memoryview:
    return memoryview(array)  # type: ignore[arg-type]  # (numpy's stubs do not say ndarray is a buffer)


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


def save_quietly(files: PostingsFiles, db: Database, snapshot: Snapshot) -> Postings | None:
    """`save`, a failure logged (None): the postings in memory serve on, the next process reads its own."""
    try:
        return files.save(db, snapshot)
    except (StorageError, OSError, sqlite3.Error) as exc:  # (the token's write: the database busy)
        log.warning("the keyword postings could not be saved in %s (%s)", files.folder, exc)
        return None
