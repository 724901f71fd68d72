"""The embedded vector store's keyword leg: the exact FTS5 BM25 top-k without scoring every match.

FTS5's `bm25()` is the reference ranking, but it costs time in proportion to the matches of every
query word: it counts each word's documents on every query and scores every matching chunk, so a
query holding "the" or "value" walks most of a 100k-chunk index (50-100 ms). `KeywordSearch.top`
answers the same top-k (same scores, same order, ties by chunk id) by max-score pruning:

1. the query's words, rarest first, are split into a rare prefix R and the rest C, R growing
   until it proves enough; a chunk's score is the sum of its words' terms, and a C word adds
   less than `idf * (k1 + 1)` whatever the chunk, so `U` (that bound summed over C) caps what C
   can add to any chunk;
2. FTS5 scores the chunks holding an R word over R alone (cheap: R is rare); if the k-th of those
   partial scores reaches `U`, no chunk without an R word can enter the top k, and only chunks
   whose partial score is within `U` of that k-th one can;
3. those few candidates are scored over every word, exactly as `bm25()` does (same formula, same
   order of operations, the index's own statistics and its tokenizer run over their text).

When no split proves it (a query of common words only, or too few chunks hold a rare word), the
plain FTS5 query runs.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter

from attrs import define, field

from ..vector_index import Ranked
from .database import Database

STORE = "vector"
MIN_CHUNKS_TO_SPLIT = 1000  # below this, plain BM25 over every match is cheap enough
MAX_RARE_SHARE = 0.05  # R: the rarest words, together in at most this share of all chunks
MAX_CANDIDATES = 1000  # at most this many chunks re-scored over every word (~20 us each)
K1, B = 1.2, 0.75  # FTS5's bm25() constants
TOKENIZE = "unicode61 remove_diacritics 2"
FTS = "vector_chunks_fts"

Terms = list[str]
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


def fts_query(terms: Terms) -> str:
    """An FTS5 MATCH expression: the words, each quoted (operators become plain words), OR-ed."""
    return " OR ".join(f'"{term}"' for term in terms)


def idf(rows: int, hits: int) -> float:
    # fts5_aux.c, fts5Bm25GetData: log((nRow - nHit + 0.5) / (nHit + 0.5)), at least 1e-6
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


def as_token(term: str) -> str | None:
    """The one token the FTS tokenizer makes of a (lower-case) query word, when it is sure: ASCII
    letters and digits, around or after underscores (a separator for unicode61); else None."""
    parts = [part for part in term.split("_") if part]
    return parts[0] if term.isascii() and len(parts) == 1 and parts[0].isalnum() else None


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


@define
class IndexStats:
    """The FTS index's row count, average chunk length and per-word chunk counts at one generation."""

    generation: int
    rows: int
    avgdl: float
    df: dict[str, int]
    chunks: dict[str, int] = field(factory=dict)  # per collection

    def holds_all(self, conn: sqlite3.Connection, collection: str) -> bool:
        """Whether every chunk of the index belongs to `collection`."""
        count = self.chunks.get(collection)
        if count is None:
            count = self.chunks[collection] = int(conn.execute(
                "SELECT count(*) FROM vector_chunks WHERE collection = ?", (collection,)).fetchone()[0])
        return count == self.rows

    def doc_count(self, conn: sqlite3.Connection, term: str) -> int:
        """Chunks holding `term`; 0 for a term the index tokenizes differently."""
        count = self.df.get(term)
        if count is None:
            if len(self.df) > 100_000:
                self.df.clear()
            row = conn.execute("SELECT doc FROM vector_chunks_vocab WHERE term = ?", (term,)).fetchone()
            count = self.df[term] = int(row[0]) if row else 0
        return count


class KeywordSearch:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._stats: IndexStats | None = None

    def bm25(self, collection: str, match: str, limit: int | None) -> Ranked:
        """(chunk id, BM25) of the collection's chunks matching `match`, best first (all when no limit)."""
        conn = self._db.connection()
        if self.stats().holds_all(conn, collection):  # the only collection: no per-match membership test
            sql = f"SELECT rowid, -bm25({FTS}) AS s FROM {FTS} WHERE {FTS} MATCH ? ORDER BY s DESC, rowid"
            params: tuple[object, ...] = (match,)
        else:
            # Ranked first, then tested for membership in that order until `limit` are found.
            sql = (f"SELECT id, s FROM (SELECT rowid AS id, -bm25({FTS}) AS s FROM {FTS} WHERE {FTS} MATCH ? "
                   "ORDER BY s DESC, rowid) AS m WHERE EXISTS (SELECT 1 FROM vector_chunks c INDEXED BY "
                   "vector_chunks_by_collection WHERE c.collection = ? AND c.id = m.id)")
            params = (match, collection)
        if limit is not None:
            sql, params = sql + " LIMIT ?", (*params, limit)
        return [(int(i), float(s)) for i, s in conn.execute(sql, params).fetchall()]

    def top(self, collection: str, terms: Terms, limit: int) -> Ranked:
        """Exactly `bm25(collection, fts_query(terms), limit)`, usually without scoring every match."""
        stats = self.stats()
        if stats.rows >= MIN_CHUNKS_TO_SPLIT and len(terms) > 1:
            ranked = self._pruned(collection, terms, limit, stats)
            if ranked is not None:
                return ranked
        return self.bm25(collection, fts_query(terms), limit)

    def stats(self) -> IndexStats:
        generation = self._db.generation(STORE)
        stats = self._stats
        if stats is None or stats.generation != generation:
            conn = self._db.connection()
            row = conn.execute(f"SELECT block FROM {FTS}_data WHERE id = 1").fetchone()
            totals = _varints(bytes(row[0])) if row and row[0] else []
            rows, tokens = (totals[0], totals[1]) if len(totals) >= 2 else (0, 0)
            stats = self._stats = IndexStats(generation, rows, tokens / rows if rows else 0.0, {})
        return stats

    def _pruned(self, collection: str, terms: Terms, limit: int, stats: IndexStats) -> Ranked | None:
        tokens = [as_token(t) for t in terms]
        if None in tokens or len(set(tokens)) != len(tokens):
            return None  # a word the tokenizer splits (a phrase) or that repeats another: plain query
        terms = [t for t in tokens if t is not None]
        conn = self._db.connection()
        counts = {t: stats.doc_count(conn, t) for t in terms}
        order = sorted((t for t in terms if counts[t]), key=lambda t: counts[t])
        cut, covered = 0, 0
        while cut < len(order) - 1 and covered + counts[order[cut]] <= MAX_RARE_SHARE * stats.rows:
            covered += counts[order[cut]]
            cut += 1
        if not cut:
            return None
        # U: the most the other words can add to any chunk (each adds less than idf * (k1 + 1))
        rest = sum(idf(stats.rows, counts[t]) * (K1 + 1.0) for t in order[cut:])
        if sum(idf(stats.rows, counts[t]) * (K1 + 1.0) for t in order[:cut]) <= rest:
            return None  # no partial score can reach U: the attempt cannot prove anything
        partial = self.bm25(collection, fts_query(order[:cut]), None)
        if len(partial) < limit or partial[limit - 1][1] < rest:
            return None  # chunks without a rare word could still rank: the full query decides
        candidates = [i for i, s in partial if s > partial[limit - 1][1] - rest]
        if len(candidates) > MAX_CANDIDATES:
            return None
        scores = self._full_scores(conn, candidates, terms, stats)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]

    def _full_scores(self, conn: sqlite3.Connection, ids: list[int], terms: Terms,
                     stats: IndexStats) -> dict[int, float]:
        """BM25 of chunks over all `terms`, computed as fts5_aux.c's fts5Bm25Function does."""
        freqs = self._tokenize(conn, ids)
        weights = [idf(stats.rows, stats.doc_count(conn, t)) for t in terms]
        scores = {}
        for chunk_id, tokens in freqs.items():
            length = float(sum(tokens.values()))
            score = 0.0
            for term, weight in zip(terms, weights, strict=True):
                freq = float(tokens.get(term, 0))
                score += weight * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * length / stats.avgdl)))
            scores[chunk_id] = score  # bm25() returns -1.0 * score, which the SQL negates back
        return scores

    def _tokenize(self, conn: sqlite3.Connection, ids: list[int]) -> dict[int, Counter[str]]:
        """Each chunk's token counts, as the index's tokenizer counts them: for ASCII text, runs of
        letters and digits, lower-cased (what unicode61 does); other text through the tokenizer
        itself, in a scratch FTS5 table in temp."""
        out: dict[int, Counter[str]] = {}
        other = []
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            for chunk_id, text in conn.execute(
                    f"SELECT id, text FROM vector_chunks WHERE id IN ({','.join('?' * len(batch))})", batch):
                if text.isascii():
                    out[chunk_id] = Counter(_ASCII_TOKEN.findall(text.lower()))
                else:
                    other.append(chunk_id)
        if other:
            out.update(self._tokenize_by_fts(conn, other))
        return out

    def _tokenize_by_fts(self, conn: sqlite3.Connection, ids: list[int]) -> dict[int, Counter[str]]:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.keyword_scratch USING fts5(text, tokenize='{TOKENIZE}')")
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.keyword_scratch_vocab "
                     "USING fts5vocab(temp, keyword_scratch, instance)")
        out: dict[int, Counter[str]] = {i: Counter() for i in ids}
        savepoint = not conn.in_transaction
        if savepoint:
            conn.execute("BEGIN")
        try:
            conn.execute("DELETE FROM temp.keyword_scratch")
            for start in range(0, len(ids), 500):
                batch = ids[start:start + 500]
                conn.execute("INSERT INTO temp.keyword_scratch(rowid, text) SELECT id, text FROM vector_chunks "
                             f"WHERE id IN ({','.join('?' * len(batch))})", batch)
            for doc, term in conn.execute("SELECT doc, term FROM temp.keyword_scratch_vocab"):
                out[doc][term] += 1
            conn.execute("DELETE FROM temp.keyword_scratch")
        finally:
            if savepoint:
                conn.execute("COMMIT")
        return out
