"""The embedded vector store's keyword leg: the exact FTS5 BM25 top-k without scoring every match.

FTS5's `bm25()` is the reference ranking, but it costs time in proportion to the matches of every
query word: it counts each word's documents on every query and scores every matching chunk, so a
query holding "the" or "value" walks most of a 100k-chunk index (50-100 ms). `KeywordSearch.top`
answers the same top-k (same scores, same order, ties by chunk id) in one of two ways:

- an index of `POSTINGS_MIN_CHUNKS` chunks or more is answered from its postings held in memory
  (stores.sqlite.postings: numpy arrays read from the FTS index, scored with `bm25()`'s formula;
  a phrase, a query word the tokenizer splits such as `foo_bar`, is looked up in FTS5 when few
  chunks hold it). Inside a batch, while the postings are (re)built, and for non-ASCII query
  words, FTS5 answers as below;
- otherwise by max-score pruning over FTS5:

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

import sqlite3
from collections import Counter

import numpy as np
from attrs import define, field

from ..vector_index import Ranked
from .database import Database
from .many_rows import ids_of, in_lists
from .postings import (
    FTS,
    K1,
    STORE,
    B,
    Snapshot,
    chunk_rows,
    fts_totals,
    idf,
    occurrences,
    query_tokens,
    read_transaction,
    store_generation,
    tokenize,
)
from .postings_keeper import POSTINGS_MIN_CHUNKS, PostingsKeeper

__all__ = ["KeywordSearch", "fts_query", "idf"]

MIN_CHUNKS_TO_SPLIT = 1000  # below this, plain BM25 over every match is cheap enough
MAX_RARE_SHARE = 0.05  # R: the rarest words, together in at most this share of all chunks
MAX_CANDIDATES = 1000  # at most this many chunks re-scored over every word (~20 us each)
PHRASE_MAX = 2_000  # a phrase held by more chunks sends the query to FTS5

Terms = list[str]
Phrase = tuple[np.ndarray, np.ndarray, int]  # positions, frequencies (float64), chunks holding it


def fts_query(terms: Terms) -> str:
    """An FTS5 MATCH expression: the words, each quoted (operators become plain words), OR-ed."""
    return " OR ".join(f'"{term}"' for term in terms)


def as_token(term: str) -> str | None:
    """The one token the FTS tokenizer makes of a (lower-case) query word, when it is sure."""
    tokens = query_tokens(term)
    return tokens[0] if tokens is not None and len(tokens) == 1 else None


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
    def __init__(self, db: Database, postings_min_chunks: int = POSTINGS_MIN_CHUNKS) -> None:
        self._db = db
        self._stats: IndexStats | None = None
        self.postings = PostingsKeeper(db, postings_min_chunks)

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
        snapshot = self.postings.current()
        if snapshot is not None:
            ranked = self._from_postings(snapshot, collection, terms, limit)
            if ranked is not None:
                return ranked
        stats = self.stats()
        if stats.rows >= MIN_CHUNKS_TO_SPLIT and len(terms) > 1:
            ranked = self._pruned(collection, terms, limit, stats)
            if ranked is not None:
                return ranked
        return self.bm25(collection, fts_query(terms), limit)

    def _from_postings(self, snapshot: Snapshot, collection: str, terms: Terms, limit: int) -> Ranked | None:
        """The top-k from the postings; None when a query word needs FTS5 (see the module's doc)."""
        phrases: list[Phrase | None] = []
        split: dict[int, str] = {}
        for n, term in enumerate(terms):
            tokens = query_tokens(term)
            if not tokens:
                return None
            if len(tokens) > 1:
                split[n] = term
                phrases.append(None)
                continue
            parts = snapshot.word(tokens[0])
            docs = np.concatenate([d for d, _ in parts]) if len(parts) > 1 else (
                parts[0][0] if parts else np.zeros(0, np.int32))
            freqs = np.concatenate([f for _, f in parts]) if len(parts) > 1 else (
                parts[0][1] if parts else np.zeros(0, np.int32))
            phrases.append((docs, freqs.astype(np.float64), snapshot.hits(parts)))
        if split:
            found = self._phrases(snapshot, split)
            if found is None:
                return None
            for n, phrase in found.items():
                phrases[n] = phrase
        return snapshot.top(collection, [p for p in phrases if p is not None], limit)

    def _phrases(self, snapshot: Snapshot, split: dict[int, str]) -> dict[int, Phrase] | None:
        """Query words the tokenizer splits (`foo_bar`: the phrase "foo bar"), looked up in FTS5 in
        the snapshot's own state and counted in the few chunks holding them; None when many do."""
        conn = self._db.connection()
        out: dict[int, Phrase] = {}
        with read_transaction(conn):
            if store_generation(conn) != snapshot.generation:
                return None  # written since the snapshot was taken: FTS5 answers this one
            for n, term in split.items():
                text = conn.execute(f"SELECT group_concat(rowid) FROM (SELECT rowid FROM {FTS} WHERE {FTS} MATCH ? "
                                    "LIMIT ?)", (fts_query([term]), PHRASE_MAX + 1)).fetchone()[0]
                found = sorted(ids_of(text or "").tolist())  # (one statement, not a step a chunk)
                if len(found) > PHRASE_MAX:
                    return None
                ids = np.asarray(found, dtype=np.int64)
                positions = np.searchsorted(snapshot.ids, ids)
                if len(ids) and (int(positions.max()) >= len(snapshot.ids) or
                                 not np.array_equal(snapshot.ids[positions], ids)):
                    return None
                texts = self._tokenize_lists(conn, found)
                phrase = query_tokens(term) or []
                freqs = np.fromiter((occurrences(texts.get(i, []), phrase) for i in found), dtype=np.float64,
                                    count=len(found))
                if len(freqs) and float(freqs.min()) < 1.0:
                    return None  # not counted as FTS5 matched it: FTS5 answers
                out[n] = (positions.astype(np.int32), freqs, len(found))
        return out

    def stats(self) -> IndexStats:
        generation = self._db.generation(STORE)
        stats = self._stats
        if stats is None or stats.generation != generation:
            rows, tokens = fts_totals(self._db.connection())
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
        """Each chunk's token counts, as the index's tokenizer counts them."""
        return {chunk_id: Counter(tokens) for chunk_id, tokens in self._tokenize_lists(conn, ids).items()}

    def _tokenize_lists(self, conn: sqlite3.Connection, ids: list[int]) -> dict[int, list[str]]:
        rows: list[tuple[int, str]] = []
        for marks, batch in in_lists(ids):
            rows += [(chunk_id, text) for chunk_id, _, text in chunk_rows(conn, f"WHERE id IN ({marks})", batch)]
        return tokenize(conn, rows)
