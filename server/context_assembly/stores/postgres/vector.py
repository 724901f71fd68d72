"""The vector index on PostgreSQL: pgvector HNSW (cosine) for nearest-k, tsvector ranks for full-text-k.

`VectorCollections` above it chunks, embeds and fuses exactly as embedded, so hits and scores mean
the same. Embeddings are sent as pgvector text literals (no type registration, so a connection
works before the extension exists). pgvector indexes need a fixed dimension: each dimension in use
gets its own partial HNSW index over `embedding::vector(d)`, created when a collection of that
dimension is first written, and nearest-k queries that same expression so the planner uses it.
HNSW is approximate: each search sets `hnsw.ef_search` for its own transaction (`SET LOCAL`) to
`stores.ef_search` (default 100, see bench/stores for recall against exact search), raised to 2 x k
for a large k. The project and collection filter applies to the index's candidates (pgvector before
0.8 has no iterative scan), so a collection that is a small share of a big shared table could get
fewer than k hits from the index: such a short answer is asked again without the index (an exact
scan of that collection's rows, which is small exactly when this happens).
"""

from __future__ import annotations

import builtins
import math
import time
from pathlib import Path
from typing import Any

import orjson

from ...errors import ConflictError
from ..embedding import Matrix
from ..vector_collections import VectorCollections
from ..vector_index import ChunkRow, IndexedDoc, Ranked
from .database import PgDatabase
from .keywords import tsquery, tsvector
from .migrations import hnsw_index_sql

STORE = "vector"
EF_SEARCH = 100  # the default of stores.ef_search
MAX_EF_SEARCH = 1000  # pgvector's limit


def vector_literal(row: Matrix) -> str:
    return "[" + ",".join(map(repr, row.astype(float).tolist())) + "]"


def _write_words(cursor: Any, project: str, collection: str, docs: builtins.list[IndexedDoc]) -> None:
    """The words of the chunks just copied, tokenised here as the embedded index tokenises them."""
    uris, ords, vectors = [], [], []
    for doc in docs:
        for ord_, text in enumerate(doc.chunks):
            uris.append(doc.doc_uri)
            ords.append(ord_)
            vectors.append(tsvector(text))
    cursor.execute(
        "INSERT INTO ca_vector_words (id, project, collection, tsv) SELECT c.id, c.project, c.collection, "
        "w.tsv::tsvector FROM unnest(%s::text[], %s::int[], %s::text[]) AS w(doc_uri, ord, tsv) "
        "JOIN ca_vector_chunks c ON c.project = %s AND c.collection = %s AND c.doc_uri = w.doc_uri AND c.ord = w.ord",
        (uris, ords, vectors, project, collection))


class PgVectorIndex:
    def __init__(self, db: PgDatabase, ef_search: int = EF_SEARCH) -> None:
        self.db = db
        self.ef_search = ef_search
        self.exact_retries = 0  # short index answers asked again without the index
        self._claims: dict[str, tuple[str, int]] = {}  # a claim never changes once made: cached

    def claimed_model(self, collection: str) -> tuple[str, int] | None:
        claim = self._claims.get(collection)
        if claim is None:
            rows = self.db.read("SELECT embedding_model, dimension FROM ca_vector_collections WHERE project = %s "
                                "AND collection = %s", (self.db.project, collection))
            if rows:
                claim = (str(rows[0][0]), int(rows[0][1]))
                if not self.db.in_batch():  # a batch's claim may still roll back
                    self._claims[collection] = claim
        return claim

    def upsert(self, collection: str, model: str, dimension: int, docs: builtins.list[IndexedDoc]) -> None:
        now = time.time()
        project = self.db.project
        with self.db.connection() as conn:
            created = conn.execute(
                "INSERT INTO ca_vector_collections(project, collection, embedding_model, dimension) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (project, collection, model, dimension)).fetchone()
            row = conn.execute("SELECT embedding_model, dimension FROM ca_vector_collections WHERE project = %s "
                               "AND collection = %s FOR SHARE", (project, collection)).fetchone()
            if row is not None and (row[0], row[1]) != (model, dimension):
                raise ConflictError(f"collection {collection!r} holds {row[0]} embeddings ({row[1]} dimensions), "
                                    f"not {model} ({dimension}); re-create the collection to change its model",
                                    {"collection": collection, "stored_model": row[0], "settings_model": model})
            if created:  # a new collection: make sure its dimension has an index (taken once, not per write)
                conn.execute(hnsw_index_sql(int(dimension)))
            uris = [doc.doc_uri for doc in docs]
            # One writer per document at a time, the locks taken in one order: sidecars rewriting the
            # same document each deleted its chunks, then inserted the same chunk numbers (a unique
            # key violation) or deadlocked on the document rows; most of such writes failed.
            for key in sorted({orjson.dumps([project, collection, uri]).decode() for uri in uris}):
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            conn.execute("DELETE FROM ca_vector_chunks WHERE project = %s AND collection = %s AND doc_uri = ANY(%s)",
                         (project, collection, uris))
            conn.execute("SELECT set_config('ca.words_given', 'on', true)")  # the words come below, not by trigger
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO ca_vector_documents(project, collection, doc_uri, text, metadata, updated) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (project, collection, doc_uri) DO UPDATE SET "
                    "text = excluded.text, metadata = excluded.metadata, updated = excluded.updated",
                    [(project, collection, doc.doc_uri, doc.text, doc.metadata_json, now) for doc in docs])
                with cursor.copy("COPY ca_vector_chunks(project, collection, doc_uri, ord, text, dimension, "
                                 "embedding) FROM STDIN") as copy:
                    for doc in docs:
                        for ord_, (text, vector) in enumerate(zip(doc.chunks, doc.vectors, strict=True)):
                            copy.write_row((project, collection, doc.doc_uri, ord_, text, dimension,
                                            vector_literal(vector)))
                _write_words(cursor, project, collection, docs)
            self.db.bump(conn, STORE)

    def delete(self, collection: str, doc_uri: str) -> bool:
        with self.db.connection() as conn:
            chunks = conn.execute("DELETE FROM ca_vector_chunks WHERE project = %s AND collection = %s "
                                  "AND doc_uri = %s", (self.db.project, collection, doc_uri)).rowcount
            docs = conn.execute("DELETE FROM ca_vector_documents WHERE project = %s AND collection = %s "
                                "AND doc_uri = %s", (self.db.project, collection, doc_uri)).rowcount
            if not chunks and not docs:
                return False
            self.db.bump(conn, STORE)
        return True

    def nearest(self, collection: str, query: Matrix, k: int, min_score: float) -> Ranked:
        claimed = self.claimed_model(collection)
        if claimed is None:
            return []
        dimension = int(claimed[1])
        column = f"embedding::vector({dimension})"
        sql = (f"SELECT id, 1 - ({column} <=> %s::vector({dimension})) AS score FROM ca_vector_chunks "
               f"WHERE project = %s AND collection = %s AND dimension = {dimension} "
               f"ORDER BY {column} <=> %s::vector({dimension}) LIMIT %s")  # distance only: the index orders it
        literal = vector_literal(query)
        params = (literal, self.db.project, collection, literal, k)
        with self.db.connection() as conn:
            conn.execute(f"SET LOCAL hnsw.ef_search = {min(MAX_EF_SEARCH, max(int(self.ef_search), 2 * k))}")
            rows = conn.execute(sql, params).fetchall()
            if len(rows) < k and self._has_more(conn, collection, len(rows)):
                self.exact_retries += 1
                conn.execute("SET LOCAL enable_indexscan = off")  # the collection's own rows, exactly
                rows = conn.execute(sql, params).fetchall()
        # a chunk without words (all-zero embedding) has no cosine distance (NaN): it scores 0, as embedded
        scored = [(int(i), 0.0 if s is None or math.isnan(s) else float(s)) for i, s in rows]
        ranked = [(i, s) for i, s in scored if s >= min_score]
        ranked.sort(key=lambda item: (-item[1], item[0]))
        return ranked

    def _has_more(self, conn: Any, collection: str, found: int) -> bool:
        """Whether the collection holds more chunks than the index answered (LIMIT: counts at most that)."""
        row = conn.execute("SELECT count(*) FROM (SELECT 1 FROM ca_vector_chunks WHERE project = %s "
                           "AND collection = %s LIMIT %s) c", (self.db.project, collection, found + 1)).fetchone()
        return bool(row and int(row[0]) > found)

    def full_text(self, collection: str, terms: builtins.list[str], k: int) -> Ranked:
        query = tsquery(terms)  # the words as the embedded index reads them (keywords.py)
        if not query:
            return []
        rows = self.db.read(
            "SELECT id, ts_rank(tsv, q) AS s FROM ca_vector_words, CAST(%s AS tsquery) q "
            "WHERE project = %s AND collection = %s AND tsv @@ q ORDER BY s DESC, id LIMIT %s",
            (query, self.db.project, collection, k))
        return [(int(i), float(s)) for i, s in rows]

    def chunks(self, ids: builtins.list[int], *, text: bool = True) -> dict[int, ChunkRow]:
        column = "c.text" if text else "''"
        rows = self.db.read(
            f"SELECT c.id, c.collection, c.doc_uri, c.ord, {column}, d.metadata FROM ca_vector_chunks c "
            "JOIN ca_vector_documents d ON d.project = c.project AND d.collection = c.collection "
            "AND d.doc_uri = c.doc_uri WHERE c.id = ANY(%s) AND c.project = %s", (ids, self.db.project))
        return {int(r[0]): ChunkRow(r[1], r[2], int(r[3]), r[4], orjson.loads(r[5])) for r in rows}

    def document(self, collection: str, doc_uri: str) -> dict[str, Any] | None:
        rows = self.db.read(
            "SELECT text, metadata, updated, (SELECT count(*) FROM ca_vector_chunks c WHERE c.project = d.project "
            "AND c.collection = d.collection AND c.doc_uri = d.doc_uri) FROM ca_vector_documents d "
            "WHERE project = %s AND collection = %s AND doc_uri = %s", (self.db.project, collection, doc_uri))
        if not rows:
            return None
        text, metadata, updated, chunks = rows[0]
        return {"collection": collection, "doc_uri": doc_uri, "text": text, "metadata": orjson.loads(metadata),
                "updated": updated, "chunks": int(chunks)}

    def documents(self, collection: str) -> builtins.list[dict[str, Any]]:
        rows = self.db.read(
            "SELECT d.doc_uri, d.metadata, d.updated, length(d.text), (SELECT count(*) FROM ca_vector_chunks c "
            "WHERE c.project = d.project AND c.collection = d.collection AND c.doc_uri = d.doc_uri) "
            "FROM ca_vector_documents d WHERE d.project = %s AND d.collection = %s ORDER BY d.doc_uri COLLATE \"C\"",
            (self.db.project, collection))
        return [{"doc_uri": uri, "metadata": orjson.loads(meta), "updated": updated, "chars": int(chars),
                 "chunks": int(n)} for uri, meta, updated, chars, n in rows]

    def collections(self) -> builtins.list[dict[str, Any]]:
        rows = self.db.read(
            "SELECT v.collection, v.embedding_model, v.dimension, "
            "(SELECT count(*) FROM ca_vector_documents d WHERE d.project = v.project AND d.collection = v.collection), "
            "(SELECT count(*) FROM ca_vector_chunks c WHERE c.project = v.project AND c.collection = v.collection) "
            "FROM ca_vector_collections v WHERE v.project = %s ORDER BY v.collection COLLATE \"C\"",
            (self.db.project,))
        return [{"collection": name, "embedding_model": model, "dimension": int(dim), "documents": int(docs),
                 "chunks": int(chunks)} for name, model, dim, docs, chunks in rows]

    def generation(self) -> int:
        return self.db.generation(STORE)

    def prepare(self, collection: str, keyword: bool) -> None:
        """Nothing: PostgreSQL keeps the vectors and the text index, this process nothing of them."""


class PgVectorStore(VectorCollections):
    def __init__(self, db: PgDatabase, vectordb_dir: Path | str, default_model: str | None = None,
                 ef_search: int = EF_SEARCH) -> None:
        super().__init__(PgVectorIndex(db, ef_search), vectordb_dir, default_model)

