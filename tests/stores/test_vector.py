"""The SQLite vector store: writes, exact search in three modes, settings, several processes."""

from __future__ import annotations

import importlib.util
import itertools
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.errors import ConflictError, InvalidParamsError
from context_assembly.stores.embedding import HASHING, WORDLLAMA
from context_assembly.stores.sqlite import vector as sqlite_vector
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.vector import SqliteVectorStore, fts_query
from context_assembly.stores.vector_collections import fts_terms
from context_assembly.workspace.layout import WorkspaceLayout

HIT_KEYS = {"id", "doc_uri", "chunk", "text", "score", "metadata", "source"}
HOSTILE = ['"', '""', "*", "NEAR(", "NEAR(a b", "-", "- -x", "", "   ", "AND", "a OR", "col:term", "^x", "(", ")",
           "'", "\\", "_", "%", "\x00", "NOT NOT", "{a b}", "x" * 5000]

DOCS = {
    "auth.md": "The login request fails with a timeout when the authentication server is slow.",
    "db.md": "Database connection pool exhausted: too many open connections to postgres.",
    "bake.md": "Banana bread recipe: mash ripe bananas, mix in flour and sugar, bake for an hour.",
    "deploy.md": "Deploying to production: build the image, push it, roll out the release.",
}


def make_store(root: Path, model: str | None = HASHING) -> SqliteVectorStore:
    return SqliteVectorStore.for_workspace(WorkspaceLayout(root), default_model=model)


@pytest.fixture
def store(tmp_path: Path) -> SqliteVectorStore:
    s = make_store(tmp_path)
    for uri, text in DOCS.items():
        s.upsert("docs", uri, text, {"title": uri.removesuffix(".md")})
    return s


def uris(hits: list) -> list[str]:
    return [h["doc_uri"] for h in hits]


# --- writes ----------------------------------------------------------------------------------

def test_upsert_returns_counts_and_lists(store: SqliteVectorStore) -> None:
    assert store.upsert("docs", "new.md", "fresh words", {"a": 1}) == {"collection": "docs", "doc_uri": "new.md",
                                                                       "chunks": 1}
    listed = {d["doc_uri"]: d for d in store.list("docs")}
    assert set(listed) == {*DOCS, "new.md"}
    assert listed["new.md"]["metadata"] == {"a": 1} and listed["new.md"]["chunks"] == 1
    [collection] = store.list()
    assert collection == {"collection": "docs", "embedding_model": HASHING, "dimension": 256, "documents": 5,
                          "chunks": 5}
    doc = store.get("docs", "new.md")
    assert doc is not None and doc["text"] == "fresh words" and doc["metadata"] == {"a": 1}
    assert store.get("docs", "missing") is None


def test_upsert_replaces_the_previous_chunks(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    long_text = "\n\n".join(f"Paragraph {i} talks about zebras and giraffes at length." * 3 for i in range(40))
    assert s.upsert("c", "doc", long_text, {})["chunks"] > 1
    assert s.search("c", "zebras", mode="keyword")
    assert s.upsert("c", "doc", "now only about penguins", {"v": 2}) == {"collection": "c", "doc_uri": "doc",
                                                                        "chunks": 1}
    assert s.search("c", "zebras", mode="keyword") == []
    [hit] = s.search("c", "penguins", mode="vector", top_k=10)
    assert hit["id"] == "c/doc#0" and hit["metadata"] == {"v": 2}
    assert s.list("c")[0]["chunks"] == 1


def test_delete(store: SqliteVectorStore) -> None:
    assert store.delete("docs", "auth.md") is True
    assert store.delete("docs", "auth.md") is False
    assert store.delete("nowhere", "auth.md") is False
    assert "auth.md" not in uris(store.search("docs", "login timeout", top_k=10))
    assert "auth.md" not in uris(store.search("docs", "login timeout", top_k=10, mode="keyword"))


def test_upsert_many_is_one_bulk_write(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    g0 = s.generation()
    docs = [(f"d{i}", f"document number {i} about topic {i % 7}", {"i": i}) for i in range(300)]
    docs.append(("d0", "replaced zero", {"i": "last"}))
    assert s.upsert_many("bulk", docs) == {"collection": "bulk", "documents": 300, "chunks": 300}
    assert s.generation() == g0 + 1
    assert len(s.list("bulk")) == 300
    [hit] = s.search("bulk", "replaced zero", top_k=1)
    assert hit["doc_uri"] == "d0" and hit["metadata"] == {"i": "last"}


def test_empty_text_is_stored_without_chunks(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    assert s.upsert("c", "empty", "  \n ", {})["chunks"] == 0
    assert s.list("c")[0]["chunks"] == 0
    assert s.search("c", "anything") == []


@pytest.mark.parametrize(("args", "path"), [
    (("bad name", "d", "t", {}), "/collection"),
    (("../up", "d", "t", {}), "/collection"),
    (("c", "", "t", {}), "/doc_uri"),
    (("c", "d", 5, {}), "/docs/0/text"),
    (("c", "d", "t", []), "/docs/0/metadata"),
    (("c", "d", "t", {"x": object()}), "/docs/0/metadata"),
    (("c", "d", "bad \udcff text", {}), "/docs/0"),
])
def test_bad_writes_are_refused_clearly(tmp_path: Path, args: tuple, path: str) -> None:
    s = make_store(tmp_path)
    with pytest.raises(InvalidParamsError) as info:
        s.upsert(*args)
    assert info.value.errors[0]["path"] == path
    assert s.list() == []


# --- search ----------------------------------------------------------------------------------

def test_search_orders_by_score_and_respects_top_k(store: SqliteVectorStore) -> None:
    hits = store.search("docs", "the login request timeout", top_k=3)
    assert len(hits) <= 3 and hits[0]["doc_uri"] == "auth.md"
    assert all(set(h) == HIT_KEYS for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    h = hits[0]
    assert h["id"] == "docs/auth.md#0" and h["chunk"] == 0 and h["source"] == "vector://docs/auth.md"
    assert h["text"] == DOCS["auth.md"] and h["metadata"] == {"title": "auth"}
    assert store.search("docs", "login", top_k=0) == []


def test_min_score_filters_on_cosine(store: SqliteVectorStore) -> None:
    everything = store.search("docs", "login request timeout", top_k=10, min_score=-1.0)
    assert len(everything) == len(DOCS)
    cut = everything[0]["score"] - 1e-6
    kept = store.search("docs", "login request timeout", top_k=10, min_score=cut)
    assert uris(kept) == ["auth.md"]
    assert store.search("docs", "login request timeout", top_k=10, min_score=1.01) == []


def test_keyword_mode_is_bm25(store: SqliteVectorStore) -> None:
    hits = store.search("docs", "postgres connections", mode="keyword")
    assert uris(hits) == ["db.md"] and hits[0]["score"] > 0


def test_hybrid_scores_are_normalised(store: SqliteVectorStore) -> None:
    hits = store.search("docs", "login request timeout", mode="hybrid", top_k=10)
    assert hits[0]["doc_uri"] == "auth.md" and hits[0]["score"] == pytest.approx(1.0)
    assert all(0 < h["score"] <= 1 for h in hits)


def test_unknown_collection_searches_empty(store: SqliteVectorStore) -> None:
    for mode in ("vector", "hybrid", "keyword"):
        assert store.search("nowhere", "login", mode=mode) == []
    assert store.list("nowhere") == []


def test_bad_search_parameters(store: SqliteVectorStore) -> None:
    with pytest.raises(InvalidParamsError):
        store.search("docs", "x", mode="semantic")
    with pytest.raises(InvalidParamsError):
        store.search("docs", "x", top_k=-1)
    with pytest.raises(InvalidParamsError):
        store.search("docs", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidParamsError):
        store.search("docs", "x", min_score=float("nan"))


@pytest.mark.parametrize("query", HOSTILE)
@pytest.mark.parametrize("mode", ["vector", "hybrid", "keyword"])
def test_fts_hostile_queries_do_not_raise(store: SqliteVectorStore, query: str, mode: str) -> None:
    hits = store.search("docs", query, mode=mode, top_k=3)
    assert isinstance(hits, list)


def test_fts_query_quotes_every_term() -> None:
    assert fts_query('NEAR("a" b*) -c AND d:e') == '"near" OR "a" OR "b" OR "c" OR "and" OR "d" OR "e"'
    assert fts_query('"*-^()') == "" and fts_query("___") == ""


@pytest.mark.skipif(importlib.util.find_spec("wordllama") is None, reason="the wordllama package is not installed")
def test_hybrid_finds_a_rare_keyword_that_vector_search_ranks_low(tmp_path: Path) -> None:
    s = make_store(tmp_path, WORDLLAMA)
    subjects = ["parser", "lexer", "tokenizer", "compiler", "interpreter", "type checker", "linter", "formatter"]
    problems = ["crashed on malformed input", "broke on an unexpected token", "aborted with a fatal exception",
                "stopped with a bug"]
    where = ["while reading the build script", "in the nightly job", "on a large module", "after the upgrade"]
    docs = [(f"doc-{i}", f"The {a} {b} {c}.", {}) for i, (a, b, c) in enumerate(itertools.product(subjects, problems,
                                                                                                   where))]
    docs.append(("billing", "Monthly invoice export for Kestrel finished and was sent to accounting.", {}))
    s.upsert_many("kb", docs)
    query = "software crashes when compiling code for Kestrel"
    vector = uris(s.search("kb", query, top_k=len(docs), mode="vector", min_score=-1.0))
    assert vector.index("billing") >= 10  # by meaning, the crash reports win
    assert uris(s.search("kb", query, top_k=3, mode="keyword")) == ["billing"]
    assert "billing" in uris(s.search("kb", query, top_k=3, mode="hybrid"))


# --- settings --------------------------------------------------------------------------------

def test_settings_file_is_created_with_defaults(store: SqliteVectorStore, tmp_path: Path) -> None:
    path = WorkspaceLayout(tmp_path).vectordb_dir / "docs" / "collection.json"
    assert json.loads(path.read_text()) == {"embedding_model": HASHING, "dimension": 256, "chunk_size": 512,
                                            "chunk_overlap": 64, "search_mode": "vector"}


def test_default_model_is_the_real_one(tmp_path: Path) -> None:
    s = make_store(tmp_path, model=None)
    s.upsert("c", "d", "hello", {})
    expected = WORDLLAMA if importlib.util.find_spec("wordllama") else HASHING
    assert s.list()[0]["embedding_model"] == expected


def test_collection_never_mixes_models(store: SqliteVectorStore, tmp_path: Path) -> None:
    path = WorkspaceLayout(tmp_path).vectordb_dir / "docs" / "collection.json"
    path.write_text(json.dumps({"embedding_model": "all-minilm-l6-v2"}))
    with pytest.raises(ConflictError, match="holds hashing-256 embeddings"):
        store.upsert("docs", "x", "text", {})
    assert store.search("docs", "login request timeout")  # still searchable with its stored model


def test_settings_choose_chunking_and_default_mode(tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path)
    (layout.vectordb_dir / "kb").mkdir(parents=True)
    (layout.vectordb_dir / "kb" / "collection.json").write_text(json.dumps(
        {"embedding_model": HASHING, "chunk_size": 8, "chunk_overlap": 0, "search_mode": "keyword"}))
    s = make_store(tmp_path)
    assert s.list() == [{"collection": "kb", "embedding_model": HASHING, "dimension": 256, "documents": 0,
                         "chunks": 0}]
    assert s.upsert("kb", "d", " ".join(["word"] * 40), {})["chunks"] == 7  # 6 words = 29 chars = 8 tokens
    s.upsert("kb", "other", "unrelated zebra", {})
    hits = s.search("kb", "zebra", mode=None)
    assert uris(hits) == ["other"] and hits[0]["score"] > 0  # keyword mode: only the match


# --- caching and several processes -----------------------------------------------------------

def test_own_writes_patch_the_cached_matrix(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"text {i} about item {i}", {}) for i in range(50)])
    s.search("c", "item")  # loads the matrix
    s.upsert("c", "d3", "completely new words", {})
    s.delete("c", "d7")
    s.upsert("c", "extra", "another fresh document", {})
    fresh = make_store(tmp_path)
    for query in ("completely new words", "item 7", "another fresh document"):
        assert s.search("c", query, top_k=60) == fresh.search("c", query, top_k=60)
    patched, loaded = s.index._indexes["c"], fresh.index._indexes["c"]
    assert patched.generation == loaded.generation
    order_p, order_l = np.argsort(patched.ids), np.argsort(loaded.ids)
    assert np.array_equal(patched.ids[order_p], loaded.ids[order_l])
    assert np.array_equal(patched.matrix[order_p], loaded.matrix[order_l])


WRITER = textwrap.dedent("""
    import sys
    from context_assembly.stores.sqlite.vector import SqliteVectorStore
    from context_assembly.workspace.layout import WorkspaceLayout
    root, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SqliteVectorStore.for_workspace(WorkspaceLayout(root), default_model="hashing-256")
    for i in range(count):
        store.upsert("shared", f"{prefix}-{i}", f"document {i} written by {prefix}", {"by": prefix})
    print("done")
""")


def run_writers(root: Path, *prefixes: str, count: int) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), p, str(count)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in prefixes]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "done"


def test_two_processes_upserting_at_once_lose_nothing(tmp_path: Path) -> None:
    run_writers(tmp_path, "alpha", "beta", count=40)
    s = make_store(tmp_path)
    listed = uris(s.list("shared"))
    assert sorted(listed) == sorted([f"alpha-{i}" for i in range(40)] + [f"beta-{i}" for i in range(40)])
    assert s.generation() == 80
    hits = s.search("shared", "written by beta", top_k=100, mode="keyword")
    assert {h["doc_uri"] for h in hits} >= {f"beta-{i}" for i in range(40)}


def test_reader_sees_another_process_writes(tmp_path: Path) -> None:
    reader = make_store(tmp_path)
    reader.upsert("shared", "local", "a local document", {})
    assert uris(reader.search("shared", "written by other", top_k=10)) == ["local"]
    g = reader.generation()
    run_writers(tmp_path, "other", count=3)
    assert reader.generation() == g + 3
    hits = reader.search("shared", "document 2 written by other", top_k=10)
    assert hits[0]["doc_uri"] == "other-2"
    assert set(uris(hits)) == {"local", "other-0", "other-1", "other-2"}


EDITOR = textwrap.dedent("""
    import sys
    from context_assembly.stores.sqlite.vector import SqliteVectorStore
    from context_assembly.workspace.layout import WorkspaceLayout
    store = SqliteVectorStore.for_workspace(WorkspaceLayout(sys.argv[1]), default_model="hashing-256")
    for name in sys.argv[2:]:
        verb, _, doc = name.rpartition(":")
        if verb == "delete":
            store.delete("c", doc)
        else:
            store.upsert("c", doc, f"{doc} rewritten by another process", {})
    print("done")
""")


def edit_elsewhere(root: Path, *edits: str) -> None:
    proc = subprocess.run([sys.executable, "-c", EDITOR, str(root), *edits], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def same_matrix(s: SqliteVectorStore, root: Path) -> None:
    """`s`'s cached matrix holds what a fresh read of the table gives, row for row."""
    fresh = make_store(root)
    fresh.search("c", "item", top_k=5)  # reads its matrix whole
    caught, loaded = s.index._indexes["c"], fresh.index._indexes["c"]
    assert caught.generation == loaded.generation
    assert np.array_equal(caught.ids, loaded.ids) and np.array_equal(caught.matrix, loaded.matrix)
    for query in ("rewritten by another process", "item 7", "text 30"):
        assert s.search("c", query, top_k=80) == fresh.search("c", query, top_k=80)


@pytest.mark.parametrize("edits", [
    ("new-1", "new-2"),  # added only
    ("delete:d3", "delete:d40"),  # deleted only
    ("d7", "delete:d0", "new-1", "delete:d49", "d12"),  # rewritten (a delete and an add), deleted, added
    tuple(f"delete:d{i}" for i in range(50)),  # everything deleted
])
def test_another_process_writes_are_caught_up_in_the_cached_matrix(tmp_path: Path, edits: tuple[str, ...],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    s = make_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"text {i} about item {i}", {}) for i in range(50)])
    assert s.search("c", "item")  # loads the matrix
    edit_elsewhere(tmp_path, *edits)
    assert caught_up(s, monkeypatch) == [True]  # the whole matrix was not read again
    same_matrix(s, tmp_path)


def caught_up(s: SqliteVectorStore, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Searches `s` once; per catch-up of its cached matrix on the way, whether it took."""
    took: list[bool] = []
    catch_up = sqlite_vector._caught_up

    def recorded(*args: Any) -> Any:
        index = catch_up(*args)
        took.append(index is not None)
        return index

    with monkeypatch.context() as patched:
        patched.setattr(sqlite_vector, "_caught_up", recorded)
        s.search("c", "item")
    return took


def test_added_rows_go_into_room_after_the_matrix_and_earlier_matrices_keep_theirs(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"text {i} about item {i}", {}) for i in range(50)])
    assert s.search("c", "item")
    edit_elsewhere(tmp_path, "new-1")
    s.search("c", "item")
    first = s.index._indexes["c"]  # room made after it
    before = first.matrix.copy()
    edit_elsewhere(tmp_path, "new-2")  # another process adds ...
    s.search("c", "item")
    s.upsert("c", "own", "written here about item", {})  # ... and this one
    latest = s.index._indexes["c"]
    assert len(latest.ids) == len(first.ids) + 2
    assert np.shares_memory(latest.matrix, first.matrix)  # appended in place, not copied
    assert np.array_equal(first.matrix, before)  # a search still reading `first` sees the same rows
    same_matrix(s, tmp_path)
    edit_elsewhere(tmp_path, "delete:d5")  # a delete copies the rows kept, into new room
    s.search("c", "item")
    assert not np.shares_memory(s.index._indexes["c"].matrix, latest.matrix)
    same_matrix(s, tmp_path)


def test_many_own_deletes_patch_the_cached_matrix_through_one_copy(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_vector, "MANY_GONE", 0)  # every own delete takes the many-rows path
    s = make_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"text {i} about item {i}", {}) for i in range(50)])
    assert s.search("c", "item")
    for i in (0, 7, 49):
        s.delete("c", f"d{i}")
    s.upsert("c", "d7", "rewritten here about item", {})
    same_matrix(s, tmp_path)


def test_many_deletes_elsewhere_read_the_matrix_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_vector, "MANY_GONE", 3)
    s = make_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"text {i} about item {i}", {}) for i in range(50)])
    assert s.search("c", "item")
    edit_elsewhere(tmp_path, *(f"delete:d{i}" for i in range(10)), "new-1")
    assert caught_up(s, monkeypatch) == [False]  # read whole instead
    same_matrix(s, tmp_path)


def test_store_shares_the_database_with_other_stores(tmp_path: Path) -> None:
    db = Database(WorkspaceLayout(tmp_path).db_path)
    s = SqliteVectorStore(db, WorkspaceLayout(tmp_path).vectordb_dir, default_model=HASHING)
    s.upsert("c", "d", "text", {})
    assert db.generation("vector") == 1 and db.generation("vector:c") == 1


def test_keyword_search_over_common_terms_stays_exact(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(60)]
    docs = [(f"d{i}", " ".join(rng.choice(vocab) for _ in range(rng.randint(5, 30))) + (" zygote" * (i % 50 == 0)),
             {}) for i in range(1500)]
    s.upsert_many("big", docs)
    for query in ("w1 zygote", "w2 w3 zygote", "w4", "zygote w5 w6 w7", "nothing zygote"):
        for limit in (1, 5, 50):
            got = s.index._keyword("big", fts_terms(query), limit)
            full = s.index._bm25("big", fts_query(query), limit)
            assert [i for i, _ in got] == [i for i, _ in full], (query, limit)
            assert np.allclose([x for _, x in got], [x for _, x in full])


def test_a_huge_top_k_returns_everything(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"text number {i}", {}) for i in range(1200)])
    assert len(s.search("c", "text number", top_k=100_000, min_score=-1.0)) == 1200


@pytest.fixture(scope="module")
def keyword_store(tmp_path_factory: pytest.TempPathFactory) -> SqliteVectorStore:
    """1,500 chunks in two collections, Zipf-like words (a few in most chunks), some deleted."""
    s = make_store(tmp_path_factory.mktemp("keyword"))
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(300)]
    weights = [1 / (i + 1) for i in range(300)]

    def text(i: int) -> str:
        words = rng.choices(vocab, weights, k=rng.randint(3, 40))
        return " ".join(words) + (" Rare_word café" if i % 97 == 0 else "")

    s.upsert_many("a", [(f"d{i}", text(i), {}) for i in range(1200)])
    s.upsert_many("b", [(f"d{i}", text(i), {}) for i in range(300)])
    for i in range(0, 1200, 13):
        s.delete("a", f"d{i}")
    return s


WORDS = st.one_of(st.sampled_from([f"w{i}" for i in range(0, 300, 7)] + ["w0", "w1", "w2", "w3", "absent"]),
                  st.sampled_from(["rare_word", "__w1__", "café", "cafe", "w1_w2", "rare"]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(WORDS, min_size=1, max_size=8), limit=st.integers(1, 60), collection=st.sampled_from("ab"))
def test_keyword_top_k_equals_the_fts5_bm25_ranking(keyword_store: SqliteVectorStore, words: list[str],
                                                    limit: int, collection: str) -> None:
    terms = fts_terms(" ".join(words))
    got = keyword_store.index._keyword(collection, terms, limit)
    conn = keyword_store.index._db.connection()
    reference = conn.execute(  # FTS5's ranking of every match in the collection, written plainly
        "SELECT c.id, -bm25(vector_chunks_fts) AS s FROM vector_chunks_fts JOIN vector_chunks c "
        "ON c.id = vector_chunks_fts.rowid WHERE vector_chunks_fts MATCH ? AND c.collection = ? "
        "ORDER BY s DESC, c.id LIMIT ?", (fts_query(terms), collection, limit)).fetchall()
    assert got == reference  # the same chunks, in the same order, with bit-identical scores
    assert keyword_store.index._bm25(collection, fts_query(terms), limit) == reference
