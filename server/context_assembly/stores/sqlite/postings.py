"""The FTS5 index's postings held in memory: per word, the chunks holding it and how often.

`KeywordSearch` (stores.sqlite.keyword) answers a large index's top-k from these arrays instead of
FTS5's `bm25()`, which reads the positions of every matching chunk of every query word (50-100 ms
at 100k chunks for a query holding "the"). Scoring here is term-at-a-time over numpy arrays,
with FTS5's own formula and order of operations, so scores are bit-identical:

    score = sum over the query's phrases, in order, of idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))

with idf = ln((N - n + 0.5) / (n + 0.5)) (at least 1e-6), N and avgdl the index's own totals,
n the chunks holding the phrase, f its occurrences in the chunk, D the chunk's token count.

The arrays are read from the FTS index itself (fts5vocab: the tokens FTS5 made, whatever the
text's script), so no tokenizer is re-implemented for the bulk of the data; a chunk written since
(caught up by id, see `PostingsKeeper`) is tokenized as the index's `unicode61` does (ASCII text by
a regular expression, other text by FTS5 in a scratch table).
"""

from __future__ import annotations

import bisect
import math
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from attrs import define, field, frozen
from numpy.typing import NDArray

from .many_rows import ids_of, insert_rows

K1, B = 1.2, 0.75  # FTS5's bm25() constants
TOKENIZE = "unicode61 remove_diacritics 2"
FTS = "vector_chunks_fts"
STORE = "vector"  # the `generations` row every write to the vector store bumps

Ranked = list[tuple[int, float]]
Terms = list[str]
Ints = NDArray[np.int64]
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


def idf(rows: int, hits: int) -> float:
    # fts5_aux.c, fts5Bm25GetData: log((nRow - nHit + 0.5) / (nHit + 0.5)), at least 1e-6
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (big-endian, 7 bits a byte, the 9th byte whole), as FTS5 stores its totals."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def fts_totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """(rows, tokens) of the whole FTS index: what `bm25()` reads for N and avgdl."""
    row = conn.execute(f"SELECT block FROM {FTS}_data WHERE id = 1").fetchone()
    totals = _varints(bytes(row[0])) if row and row[0] else []
    return (totals[0], totals[1]) if len(totals) >= 2 else (0, 0)


def query_tokens(term: str) -> list[str] | None:
    """The tokens the FTS tokenizer makes of one (lower-case) query word, when it is sure: ASCII
    letters and digits, split at underscores (a separator for unicode61); None for other text."""
    if not term.isascii() or not term.replace("_", "").isalnum():
        return None
    return [part for part in term.split("_") if part]


def chunk_rows(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[tuple[int, str, str]]:
    """(id, collection, text) of the chunks `where` picks (`WHERE … [ORDER BY id] [LIMIT …]` over
    `vector_chunks`), in id order, in one statement rather than a step a row (see
    stores.sqlite.many_rows): the texts concatenated and cut by their lengths (no collection name
    holds U+001F). A text holding NUL, where `length()` stops, sends them row by row instead."""
    ids, names, lengths, texts = conn.execute(
        "SELECT group_concat(id), group_concat(collection, char(31)), group_concat(length(text)), "
        f"group_concat(text, '') FROM (SELECT id, collection, text FROM vector_chunks {where})", params).fetchone()
    if ids is None:
        return []
    sizes = [int(n) for n in str(lengths).split(",")]
    joined, collections = str(texts or ""), str(names).split("\x1f")
    if sum(sizes) != len(joined) or len(collections) != len(sizes):
        return sorted((int(r[0]), str(r[1]), str(r[2])) for r in conn.execute(
            f"SELECT id, collection, text FROM vector_chunks {where}", params))
    out, at = [], 0
    for chunk_id, collection, size in zip(str(ids).split(","), collections, sizes, strict=True):
        out.append((int(chunk_id), collection, joined[at:at + size]))
        at += size
    if any(out[n][0] >= out[n + 1][0] for n in range(len(out) - 1)):  # (an aggregate's order is SQLite's)
        out.sort()
    return out


def tokenize(conn: sqlite3.Connection, rows: Iterable[tuple[int, str]]) -> dict[int, list[str]]:
    """Each chunk's tokens in order, as the index's tokenizer makes them: for ASCII text, runs of
    letters and digits, lower-cased (what unicode61 does); other text through FTS5 itself, in a
    scratch table in temp."""
    out: dict[int, list[str]] = {}
    other: list[tuple[int, str]] = []
    for chunk_id, text in rows:
        if text.isascii():
            out[chunk_id] = _ASCII_TOKEN.findall(text.lower())
        else:
            other.append((chunk_id, text))
    if other:
        out.update(_tokenize_by_fts(conn, other))
    return out


def _tokenize_by_fts(conn: sqlite3.Connection, rows: list[tuple[int, str]]) -> dict[int, list[str]]:
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.keyword_scratch USING fts5(text, tokenize='{TOKENIZE}')")
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.keyword_scratch_instances "
                 "USING fts5vocab(temp, keyword_scratch, instance)")
    placed: dict[int, list[tuple[int, str]]] = {i: [] for i, _ in rows}
    savepoint = not conn.in_transaction
    if savepoint:
        conn.execute("BEGIN")
    try:
        # A few statements, not a step a row or a token (see stores.sqlite.many_rows); the three
        # aggregates see the instances in one order, and no token holds U+001F.
        conn.execute("DELETE FROM temp.keyword_scratch")
        insert_rows(conn, "INSERT INTO temp.keyword_scratch(rowid, text)", rows)
        docs, offsets, terms = conn.execute(
            "SELECT group_concat(doc), group_concat(offset), group_concat(term, char(31)) "
            "FROM temp.keyword_scratch_instances").fetchone()
        conn.execute("DELETE FROM temp.keyword_scratch")
    finally:
        if savepoint:
            conn.execute("COMMIT")
    if terms is not None:
        for doc, offset, term in zip(str(docs).split(","), str(offsets).split(","), str(terms).split("\x1f"),
                                     strict=True):
            placed[int(doc)].append((int(offset), term))
    return {doc: [term for _, term in sorted(tokens)] for doc, tokens in placed.items()}


def occurrences(tokens: list[str], phrase: list[str]) -> int:
    """How often `phrase` occurs in `tokens` (overlapping, as FTS5 counts phrase instances)."""
    n = len(phrase)
    if n == 1:
        return tokens.count(phrase[0])
    return sum(1 for i in range(len(tokens) - n + 1) if tokens[i:i + n] == phrase)


class SavedWords(Mapping[str, int]):
    """A saved vocabulary as mapped from its file (postings_files.py): word n is the UTF-8 bytes
    `blob[starts[n]:starts[n + 1]]`, and `order` lists the word numbers in byte order of the words,
    so a word's number is found by binary search. No dict of every word in each process (~13 MB
    and ~30 ms to make at 100k chunks' 109k words); a query looks up a few words (~17 steps each)."""

    __slots__ = ("_blob", "_order", "_starts")

    def __init__(self, blob: memoryview, starts: memoryview, order: memoryview) -> None:
        self._blob, self._starts, self._order = blob, starts, order

    def _word(self, n: int) -> bytes:
        return bytes(self._blob[self._starts[n]:self._starts[n + 1]])

    def __getitem__(self, word: str) -> int:
        try:
            key = word.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no token of the index
            raise KeyError(word) from None
        order = self._order
        at = bisect.bisect_left(order, key, key=self._word)
        if at < len(order) and self._word(order[at]) == key:
            return int(order[at])
        raise KeyError(word)

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        """The words in number order."""
        return (self._word(n).decode("utf-8") for n in range(len(self._order)))


@frozen
class Postings:
    """Per word (by `vocab` number t): chunk positions `docs[offsets[t]:offsets[t+1]]` with the
    word's count in each, `freqs` (same slice). `vocab`: a dict, or the `SavedWords` of a mapped file."""

    vocab: Mapping[str, int]
    offsets: Ints
    docs: NDArray[np.int32]
    freqs: NDArray[np.int32]
    file: str | None = None  # the saved file they are mapped from (None: read into this process)

    def of(self, term: str) -> tuple[NDArray[np.int32], NDArray[np.int32]] | None:
        t = self.vocab.get(term)
        if t is None:
            return None
        start, end = int(self.offsets[t]), int(self.offsets[t + 1])
        return self.docs[start:end], self.freqs[start:end]

    @property
    def entries(self) -> int:
        return len(self.docs)


def postings_of(terms: list[str], term_of: Ints, positions: Ints) -> Postings:
    """Postings from one entry per token occurrence, (word number, chunk position), in any order
    (read from FTS5 they come ordered, and are not sorted again)."""
    n = len(term_of)
    same = term_of[1:] == term_of[:-1]
    if not bool(np.all((term_of[1:] > term_of[:-1]) | (same & (positions[1:] >= positions[:-1])))):
        order = np.lexsort((positions, term_of))
        term_of, positions = term_of[order], positions[order]
        same = term_of[1:] == term_of[:-1]
    starts = np.flatnonzero(np.concatenate(([True], ~same | (positions[1:] != positions[:-1])))) if n else np.zeros(
        0, dtype=np.int64)
    freqs = np.diff(np.append(starts, n)).astype(np.int32)
    offsets = np.searchsorted(term_of[starts], np.arange(len(terms) + 1)).astype(np.int64)
    return Postings({t: i for i, t in enumerate(terms)}, offsets, positions[starts].astype(np.int32), freqs)


EMPTY = postings_of([], np.zeros(0, np.int64), np.zeros(0, np.int64))


@define
class Snapshot:
    """The FTS index as of write generation `generation` of the vector store, position by position
    (positions follow chunk ids, which only grow)."""

    generation: int
    ids: Ints  # position -> chunk id, ascending
    collections: NDArray[np.int32]  # position -> number in `codes`
    codes: dict[str, int]
    live: NDArray[np.bool_]  # False once the chunk is deleted (its postings stay until a rebuild)
    lengths: NDArray[np.float64]  # tokens per chunk (D)
    rows: int  # N, from the FTS index's totals
    tokens: int
    main: Postings  # read from the FTS index at the last build
    tail: Postings = EMPTY  # the chunks written since, tokenized here
    tail_rows: list[tuple[int, list[str]]] = field(factory=list)  # (position, tokens) behind `tail`
    _norm: NDArray[np.float64] | None = None
    _eligible: dict[str, NDArray[np.bool_] | None] = field(factory=dict)

    @property
    def max_id(self) -> int:
        return int(self.ids[-1]) if len(self.ids) else 0

    @property
    def live_count(self) -> int:
        return int(np.count_nonzero(self.live))

    def norm(self) -> NDArray[np.float64]:
        """k1 * (1 - b + b * D / avgdl) per chunk, as fts5Bm25Function computes it."""
        if self._norm is None:
            avgdl = float(self.tokens) / float(self.rows) if self.rows else 1.0
            self._norm = K1 * (1 - B + B * self.lengths / avgdl)
        return self._norm

    def eligible(self, collection: str) -> NDArray[np.bool_] | None:
        """Which positions may be returned for `collection`; None when all may (one collection, no deletes)."""
        if collection not in self._eligible:
            code = self.codes.get(collection, -1)
            if len(self.codes) == 1 and code == 0 and bool(self.live.all()):
                self._eligible[collection] = None
            else:
                self._eligible[collection] = self.live & (self.collections == code)
        return self._eligible[collection]

    def word(self, token: str) -> list[tuple[NDArray[np.int32], NDArray[np.int32]]]:
        return [p for p in (self.main.of(token), self.tail.of(token)) if p is not None]

    def hits(self, parts: list[tuple[NDArray[np.int32], NDArray[np.int32]]]) -> int:
        if bool(self.live.all()):
            return sum(len(docs) for docs, _ in parts)
        return sum(int(np.count_nonzero(self.live[docs])) for docs, _ in parts)

    def top(self, collection: str, phrases: list[tuple[NDArray[np.int32], NDArray[np.float64], int]],
            limit: int) -> Ranked:
        """The top `limit` of `collection` over the phrases given as (positions, frequencies, hits)
        in query order, ties by chunk id: the rows of `ORDER BY -bm25() DESC, rowid`."""
        if collection not in self.codes or limit <= 0:
            return []
        scores = np.zeros(len(self.ids), dtype=np.float64)
        norm = self.norm()
        for docs, freqs, hits in phrases:
            if len(docs):
                weight = idf(self.rows, hits)
                scores[docs] += weight * ((freqs * (K1 + 1.0)) / (freqs + norm[docs]))
        found = np.flatnonzero(scores)
        eligible = self.eligible(collection)
        if eligible is not None:
            found = found[eligible[found]]
        if len(found) > limit:
            values = scores[found]
            kth = np.partition(values, len(found) - limit)[len(found) - limit]
            found = found[values >= kth]
        order = found[np.lexsort((self.ids[found], -scores[found]))][:limit]
        return [(int(self.ids[p]), float(scores[p])) for p in order]


def indexed_ids(conn: sqlite3.Connection, max_id: int) -> Ints:
    """The chunk ids up to `max_id` that the FTS index holds (its small per-chunk size rows, read
    as one string: ~10 ms for 100k ids where fetching them as rows took 200)."""
    return ids_of(conn.execute(f"SELECT group_concat(id) FROM {FTS}_docsize WHERE id <= ?", (max_id,)).fetchone()[0])


def store_generation(conn: sqlite3.Connection, store: str = STORE) -> int:
    """A `generations` row's count of writes (by default the vector store's, any collection)."""
    row = conn.execute("SELECT value FROM generations WHERE store = ?", (store,)).fetchone()
    return int(row[0]) if row else 0


@contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """Every SELECT inside sees one committed state."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")
