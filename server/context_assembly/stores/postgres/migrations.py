"""Versioned schema migrations, applied on first connect (or by `context-assembly db migrate`).

Each migration runs once, in order, in one transaction with the version it brings recorded in
`ca_schema_version`; an advisory lock makes concurrent sidecars apply them one at a time. Never
edit a released migration: add the next one. A migration is SQL, or a function of the connection
where the sidecar's own code must compute what it writes (migration 4's words of each chunk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from .keywords import function_sql, tsvector

LOCK_KEY = 0x43_41_5F_4D  # "CA_M": the advisory lock every migrating sidecar takes

Migration = str | Callable[[psycopg.Connection[Any]], None]
WORDS_BATCH = 2_000  # chunks read, tokenised and copied at a time by migration 4


def _keyword_words(conn: psycopg.Connection[Any]) -> None:
    """Migration 4: each chunk's words as the embedded index makes them (keywords.py), in a table of
    their own so that the chunk table (and its HNSW indexes) is not rewritten. The sidecar writes
    the words of its chunks; a chunk some other writer inserts (a sidecar of an earlier version)
    gets them from the trigger, through the SQL fold. The old index on `tsv` stays for sidecars of
    earlier versions (`DROP INDEX ca_vector_chunks_fts` once none is left)."""
    conn.execute(function_sql().encode())
    conn.execute(b"""
CREATE TABLE ca_vector_words (id bigint PRIMARY KEY REFERENCES ca_vector_chunks (id) ON DELETE CASCADE,
    project text NOT NULL, collection text NOT NULL, tsv tsvector NOT NULL);
CREATE FUNCTION ca_vector_words_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('ca.words_given', true) IS DISTINCT FROM 'on' THEN
        INSERT INTO ca_vector_words VALUES (NEW.id, NEW.project, NEW.collection,
            ca_keyword_tsvector(NEW.text));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER ca_vector_words_of_others AFTER INSERT ON ca_vector_chunks
    FOR EACH ROW EXECUTE FUNCTION ca_vector_words_kept();""")
    with conn.cursor(name="ca_words_backfill") as chunks, conn.cursor() as writer:
        chunks.execute("SELECT id, project, collection, text FROM ca_vector_chunks ORDER BY id")
        while rows := chunks.fetchmany(WORDS_BATCH):
            with writer.copy("COPY ca_vector_words (id, project, collection, tsv) FROM STDIN") as copy:
                for chunk_id, project, collection, text in rows:
                    copy.write_row((chunk_id, project, collection, tsvector(text)))
    conn.execute("CREATE INDEX ca_vector_words_fts ON ca_vector_words USING gin (tsv)")


MIGRATIONS: tuple[tuple[int, Migration], ...] = (
    (1, """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE ca_generations (project text NOT NULL, store text NOT NULL, value bigint NOT NULL,
    PRIMARY KEY (project, store));
CREATE TABLE ca_kv (project text NOT NULL, instance text NOT NULL, namespace text NOT NULL, key text NOT NULL,
    value text NOT NULL, updated_at double precision NOT NULL, PRIMARY KEY (project, instance, namespace, key));
CREATE TABLE ca_json (project text NOT NULL, name text NOT NULL, value jsonb NOT NULL, size integer NOT NULL,
    updated_at double precision NOT NULL, PRIMARY KEY (project, name));
CREATE TABLE ca_events (id bigserial PRIMARY KEY, project text NOT NULL, instance text NOT NULL,
    event_type text NOT NULL, payload jsonb NOT NULL, payload_text text NOT NULL, ts double precision NOT NULL);
CREATE INDEX ca_events_by_time ON ca_events (project, instance, ts DESC, id DESC);
CREATE INDEX ca_events_by_type ON ca_events (project, instance, event_type, ts DESC, id DESC);
CREATE FUNCTION ca_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only: events are never updated or deleted';
END $$;
CREATE TRIGGER ca_events_no_update BEFORE UPDATE OR DELETE ON ca_events
    FOR EACH ROW EXECUTE FUNCTION ca_events_append_only();
CREATE TRIGGER ca_events_no_truncate BEFORE TRUNCATE ON ca_events
    FOR EACH STATEMENT EXECUTE FUNCTION ca_events_append_only();
CREATE TABLE ca_episodic (project text NOT NULL, thread_id text NOT NULL, seq integer NOT NULL,
    turn text NOT NULL, ts double precision NOT NULL, PRIMARY KEY (project, thread_id, seq));
CREATE TABLE ca_working (project text NOT NULL, thread_id text NOT NULL, key text NOT NULL, value text NOT NULL,
    updated_at double precision NOT NULL, PRIMARY KEY (project, thread_id, key));
CREATE TABLE ca_blobs (project text NOT NULL, bucket text NOT NULL, key text NOT NULL, data bytea NOT NULL,
    size integer NOT NULL, sha256 text NOT NULL, updated_at double precision NOT NULL,
    PRIMARY KEY (project, bucket, key));
CREATE TABLE ca_vector_collections (project text NOT NULL, collection text NOT NULL,
    embedding_model text NOT NULL, dimension integer NOT NULL, PRIMARY KEY (project, collection));
CREATE TABLE ca_vector_documents (project text NOT NULL, collection text NOT NULL, doc_uri text NOT NULL,
    text text NOT NULL, metadata text NOT NULL, updated double precision NOT NULL,
    PRIMARY KEY (project, collection, doc_uri));
CREATE TABLE ca_vector_chunks (id bigserial PRIMARY KEY, project text NOT NULL, collection text NOT NULL,
    doc_uri text NOT NULL, ord integer NOT NULL, text text NOT NULL, dimension integer NOT NULL,
    embedding vector NOT NULL, tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
    UNIQUE (project, collection, doc_uri, ord));
CREATE INDEX ca_vector_chunks_fts ON ca_vector_chunks USING gin (tsv);
CREATE INDEX ca_vector_chunks_by_collection ON ca_vector_chunks (project, collection);
"""),
    (2, """
CREATE TABLE ca_graph_nodes (project text NOT NULL, instance text NOT NULL, id text NOT NULL, kind text NOT NULL,
    name text NOT NULL, attributes text NOT NULL, PRIMARY KEY (project, instance, id));
CREATE INDEX ca_graph_nodes_by_kind ON ca_graph_nodes (project, instance, kind, id);
CREATE INDEX ca_graph_nodes_by_name ON ca_graph_nodes (project, instance, name);
CREATE TABLE ca_graph_edges (project text NOT NULL, instance text NOT NULL, id text NOT NULL, kind text NOT NULL,
    from_id text NOT NULL, to_id text NOT NULL, attributes text NOT NULL, PRIMARY KEY (project, instance, id),
    FOREIGN KEY (project, instance, from_id) REFERENCES ca_graph_nodes ON DELETE CASCADE,
    FOREIGN KEY (project, instance, to_id) REFERENCES ca_graph_nodes ON DELETE CASCADE);
CREATE INDEX ca_graph_edges_from ON ca_graph_edges (project, instance, from_id);
CREATE INDEX ca_graph_edges_to ON ca_graph_edges (project, instance, to_id);
"""),
    # The HNSW indexes made before: the new build parameters, without rebuilding them here (that takes
    # minutes on a big table, under the lock every sidecar waits on); `REINDEX INDEX CONCURRENTLY`
    # applies them when the operator chooses.
    (3, """
DO $$
DECLARE index_name text;
BEGIN
    FOR index_name IN SELECT indexname FROM pg_indexes
            WHERE tablename = 'ca_vector_chunks' AND indexname LIKE 'ca\\_vector\\_chunks\\_hnsw\\_%'
                AND schemaname = current_schema() LOOP
        EXECUTE format('ALTER INDEX %I SET (m = 24, ef_construction = 128)', index_name);
    END LOOP;
END $$;
"""),
    (4, _keyword_words),
    # Idempotency keys of appends (events, turns): a retried append answers the first one.
    (5, """
CREATE TABLE ca_event_keys (project text NOT NULL, instance text NOT NULL, key text NOT NULL, id bigint NOT NULL,
    PRIMARY KEY (project, instance, key));
CREATE TABLE ca_episodic_keys (project text NOT NULL, thread_id text NOT NULL, key text NOT NULL,
    seq integer NOT NULL, PRIMARY KEY (project, thread_id, key));
"""),
    # A JSON document's exact text (jsonb sorts keys and cannot hold U+0000), valid while `text_at`
    # is the row's `updated_at`: a sidecar of an earlier version writes `value` and `updated_at` alone.
    (6, """
ALTER TABLE ca_json ADD COLUMN text text;
ALTER TABLE ca_json ADD COLUMN text_at double precision;
"""),
)

# HNSW build parameters (pgvector's defaults are m 16, ef_construction 64): a denser graph finds
# more of the exact nearest chunks at the same ef_search (bench/stores, 100k chunks).
HNSW_M = 24
HNSW_EF_CONSTRUCTION = 128

LATEST = MIGRATIONS[-1][0]


def hnsw_index_sql(dimension: int) -> str:
    """The HNSW cosine index for chunks of one dimension (pgvector indexes need a fixed dimension)."""
    return (f"CREATE INDEX IF NOT EXISTS ca_vector_chunks_hnsw_{dimension} ON ca_vector_chunks "
            f"USING hnsw ((embedding::vector({dimension})) vector_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE dimension = {dimension}")


def migrate(conn: psycopg.Connection[Any]) -> list[int]:
    """Apply the missing migrations; the versions applied now (empty when the schema was current)."""
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS ca_schema_version (version integer PRIMARY KEY, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        row = conn.execute("SELECT coalesce(max(version), 0) FROM ca_schema_version").fetchone()
        current = int(row[0]) if row else 0
        for version, step in MIGRATIONS:
            if version > current:
                if isinstance(step, str):
                    conn.execute(step.encode())
                else:
                    step(conn)
                conn.execute("INSERT INTO ca_schema_version(version) VALUES (%s)", (version,))
                applied.append(version)
    return applied
