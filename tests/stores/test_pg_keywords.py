"""PostgreSQL's keyword words are FTS5's (stores/postgres/keywords.py): the tables are SQLite's own,
the tokenizer gives FTS5's words at FTS5's positions, and the database's SQL fallback (chunks
written by another writer) gives the same `tsvector` as the sidecar."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.stores.postgres import fts5_tables
from context_assembly.stores.postgres.keywords import function_sql, tsquery, tsvector, words

# letters, digits and separators of several scripts, diacritics alone and composed, folds (ǅ, ß, ﬁ)
ALPHABET = st.sampled_from(list("aZé É_-./@'\\\"9 \t\nçÇøĳǅßﬁİıΣσςЖжй東京。，「」😀\u0301\u0308\u00a0\u2014"))
TEXTS = st.text(ALPHABET, max_size=60) | st.text(max_size=40)


def fts5_words(texts: list[str]) -> list[list[str]]:
    """Each text's tokens, in order, as SQLite's FTS5 index makes them."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(t, tokenize='unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, instance)")
    db.executemany("INSERT INTO f(rowid, t) VALUES (?, ?)", list(enumerate(texts, start=1)))
    found: dict[int, list[tuple[int, str]]] = {}
    for term, doc, offset in db.execute("SELECT term, doc, offset FROM v"):
        found.setdefault(doc, []).append((offset, term))
    return [[term for _, term in sorted(found.get(doc, []))] for doc in range(1, len(texts) + 1)]


def test_the_tables_are_sqlites_own() -> None:
    """Every code point, through SQLite's FTS5 between two letters: separated, or folded."""
    codes = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    separators: list[int] = []
    folded: dict[int, str] = {}
    for code, tokens in zip(codes, fts5_words([f"q{chr(code)}q" for code in codes]), strict=True):
        if tokens == ["q", "q"]:
            separators.append(code)
        else:
            assert len(tokens) == 1, (hex(code), tokens)
            if tokens[0][1:-1] != chr(code):
                folded[code] = tokens[0][1:-1]
    assert [c for a, b in fts5_tables.SEPARATORS for c in range(a, b + 1)] == separators
    ascii_folds = {code: chr(code + 32) for code in range(ord("A"), ord("Z") + 1)}
    mapped = dict(zip(map(ord, fts5_tables.FOLDED), fts5_tables.INTO, strict=True))
    assert {**ascii_folds, **mapped, **dict.fromkeys(map(ord, fts5_tables.DROPPED), "")} == folded


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=20))
def test_the_words_are_fts5s(texts: list[str]) -> None:
    assert [words(text) for text in texts] == fts5_words(texts)


def test_queries_are_phrases_of_the_same_words() -> None:
    assert tsquery(["src_auth", "Café", "config.yaml", "x"]) == \
        "('src' <-> 'auth') | 'cafe' | ('config' <-> 'yaml') | 'x'"
    assert tsquery(["\u0301", "..."]) == ""
    assert tsvector("The cafe, the CAFÉ: src/auth") == "'the':1,3 'cafe':2,4 'src':5 'auth':6"


@pytest.fixture
def database(postgres_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS keyword_fold")
        conn.execute("SET search_path TO keyword_fold")
        conn.execute("DROP FUNCTION IF EXISTS ca_keyword_tsvector(text)")
        conn.execute("DROP FUNCTION IF EXISTS ca_keyword_text(text)")
        conn.execute(function_sql().encode())
        yield conn


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXTS, min_size=1, max_size=10))
def test_the_databases_fallback_makes_the_same_words(database: psycopg.Connection, texts: list[str]) -> None:
    """A chunk another writer inserts gets its words from the trigger: the same tsvector."""
    texts = [t.replace("\x00", "") for t in texts]  # (PostgreSQL text holds no NUL)
    for text in texts:
        row = database.execute("SELECT ca_keyword_tsvector(%s)::text = CAST(%s AS tsvector)::text",
                               (text, tsvector(text))).fetchone()
        assert row == (True,), (text, words(text))


def test_long_texts_keep_what_a_tsvector_can_hold(database: psycopg.Connection) -> None:
    """Past 16,383 words positions share the last one; a word keeps 256 positions; a word longer
    than 2,046 bytes is left out: the sidecar and the database's fallback alike."""
    text = " ".join(f"w{i % 300}" for i in range(17_000)) + " " + "a" * 2_046 + " " + "ж" * 1_100 + " z" * 300
    row = database.execute("SELECT ca_keyword_tsvector(%s) = CAST(%s AS tsvector), "
                           "length(CAST(%s AS tsvector))", (text, tsvector(text), tsvector(text))).fetchone()
    assert row == (True, 302)  # w0..w299, the 2,046-byte word and z; not the 2,200-byte one
    assert "'w5':6,306," in tsvector(text) and tsvector(text).endswith("'z':16383")  # 300 z, one position
