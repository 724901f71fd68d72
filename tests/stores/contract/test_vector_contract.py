"""The vector store contract on every backend: same chunks, same embedder, same hit shape and scales."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from context_assembly.errors import ConflictError, InvalidParamsError
from context_assembly.stores.embedding import HASHING
from context_assembly.stores.store_set import StoreSet
from context_assembly.stores.vector import VectorStore

from .conftest import BACKENDS, open_backend

DOCS = {
    "auth.md": "The login request fails with a timeout when the authentication server is slow.",
    "db.md": "Database connection pool exhausted: too many open connections to postgres.",
    "bake.md": "Banana bread recipe: mash ripe bananas, mix in flour and sugar, bake for an hour.",
    "deploy.md": "Deploying to production: build the image, push it, roll out the release.",
}
HIT_KEYS = {"id", "doc_uri", "chunk", "text", "score", "metadata", "source"}
POSTINGS = "embedded-postings"  # the embedded store with its keyword leg answered from in-memory postings


@pytest.fixture(params=[*BACKENDS, POSTINGS])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def stores(backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[StoreSet]:
    monkeypatch.delenv("CONTEXT_ASSEMBLY_DSN", raising=False)
    opened = open_backend("embedded" if backend == POSTINGS else backend, tmp_path / "workspace", request)
    if backend == POSTINGS:  # used whatever the collection's size, read by the search that needs them
        postings = opened.vectors.index.postings  # type: ignore[union-attr]
        postings.min_chunks, postings.background = 0, False
    yield opened
    opened.close()


@pytest.fixture
def vectors(stores: StoreSet) -> VectorStore:
    assert stores.vectors is not None
    stores.vectors.settings("docs", HASHING)
    for uri, text in DOCS.items():
        stores.vectors.upsert("docs", uri, text, {"title": uri.removesuffix(".md")})
    return stores.vectors


def uris(hits: list) -> list[str]:
    return [h["doc_uri"] for h in hits]


def test_documents_list_get_and_collections(vectors: VectorStore) -> None:
    assert isinstance(vectors, VectorStore)
    assert vectors.upsert("docs", "new.md", "fresh words", {"a": 1}) == {"collection": "docs", "doc_uri": "new.md",
                                                                       "chunks": 1}
    listed = {d["doc_uri"]: d for d in vectors.list("docs")}
    assert sorted(listed) == sorted([*DOCS, "new.md"]) and listed["new.md"]["chunks"] == 1
    assert listed["new.md"]["metadata"] == {"a": 1} and listed["new.md"]["chars"] == len("fresh words")
    [collection] = vectors.list()
    assert collection == {"collection": "docs", "embedding_model": HASHING, "dimension": 256, "documents": 5,
                          "chunks": 5}
    got = vectors.get("docs", "new.md")
    assert got is not None and got["text"] == "fresh words" and got["chunks"] == 1 and vectors.get("docs", "x") is None


def test_vector_search_ranks_by_cosine(vectors: VectorStore) -> None:
    hits = vectors.search("docs", "login request timeout", top_k=10)
    assert hits[0]["doc_uri"] == "auth.md" and set(hits[0]) == HIT_KEYS
    assert hits[0]["source"] == "vector://docs/auth.md" and hits[0]["id"] == "docs/auth.md#0"
    assert hits[0]["metadata"] == {"title": "auth"}
    assert all(-1.0 <= h["score"] <= 1.0 + 1e-6 for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert vectors.search("docs", "login request timeout", top_k=10, min_score=1.01) == []
    assert len(vectors.search("docs", "login request timeout", top_k=2)) == 2


def test_keyword_and_hybrid(vectors: VectorStore) -> None:
    hits = vectors.search("docs", "postgres connections", mode="keyword")
    assert uris(hits) == ["db.md"] and 0 < hits[0]["score"] < 1
    assert vectors.search("docs", "zebras", mode="keyword") == []
    fused = vectors.search("docs", "login request timeout", mode="hybrid", top_k=10)
    assert fused[0]["doc_uri"] == "auth.md" and fused[0]["score"] == pytest.approx(1.0)
    assert all(0 < h["score"] <= 1 for h in fused)


def test_keywords_are_words_on_every_backend(vectors: VectorStore) -> None:
    """Paths, file names, addresses, versions and accents are words on both backends: PostgreSQL's
    parser kept `src/auth/session.py` as one token and `Café` with its accent, so these found
    nothing there."""
    for uri, text in {"paths.md": "Edit src/auth/session.py and config.yaml, then mail bob@example.com.",
                      "menu.md": "Le CAFÉ crème à Zürich, version v1.2.3.",
                      "snake.md": "The retry_policy_value lives in settings."}.items():
        vectors.upsert("docs", uri, text, {})
    for query, found in {"auth": "paths.md", "session py": "paths.md", "yaml": "paths.md", "example": "paths.md",
                         "cafe": "menu.md", "café": "menu.md", "CAFE creme": "menu.md", "zurich": "menu.md",
                         "v1": "menu.md", "policy": "snake.md", "retry_policy": "snake.md"}.items():
        assert uris(vectors.search("docs", query, mode="keyword")) == [found], query
    assert vectors.search("docs", "policy_retry", mode="keyword") == []  # a term is a phrase, in order


def test_hostile_queries_and_unknown_collections(vectors: VectorStore) -> None:
    for query in ['"', "*", "NEAR(", "-", "", "AND", "a OR", "col:term", "'", "\\", "(", "!", "&|", "x" * 5000]:
        for mode in ("vector", "hybrid", "keyword"):
            assert isinstance(vectors.search("docs", query, mode=mode), list)
    for mode in ("vector", "hybrid", "keyword"):
        assert vectors.search("nowhere", "login", mode=mode) == []
    with pytest.raises(InvalidParamsError):
        vectors.search("docs", "x", top_k=-1)


def test_replace_and_delete_invalidate(vectors: VectorStore) -> None:
    start = vectors.generation()
    vectors.upsert("docs", "auth.md", "bananas only now", {})
    assert vectors.search("docs", "login", mode="keyword") == []
    assert uris(vectors.search("docs", "only", mode="keyword")) == ["auth.md"]
    assert vectors.delete("docs", "auth.md") is True and vectors.delete("docs", "auth.md") is False
    assert vectors.get("docs", "auth.md") is None and vectors.generation() == start + 2


def test_a_collection_keeps_its_model(stores: StoreSet) -> None:
    assert stores.vectors is not None
    stores.vectors.settings("c", HASHING)
    stores.vectors.upsert("c", "d", "text", {})
    assert stores.vectors.settings("c").embedding_model == HASHING
    with pytest.raises(ConflictError):
        stores.vectors.index.upsert("c", "other-model", 8, [])  # type: ignore[attr-defined]


def test_bulk_upsert_and_chunking(stores: StoreSet) -> None:
    assert stores.vectors is not None
    stores.vectors.settings("big", HASHING)
    docs = [(f"d{i}", f"document marker{i} " + "filler words here " * (i % 3) * 60, {"i": i}) for i in range(30)]
    result = stores.vectors.upsert_many("big", docs)
    assert result["documents"] == 30 and result["chunks"] > 30
    assert len(stores.vectors.list("big")) == 30
    hits = stores.vectors.search("big", "marker7", top_k=3, mode="hybrid")
    assert hits and hits[0]["doc_uri"] == "d7"


def test_prepare_loads_a_written_collection_and_not_an_unknown_one(vectors: VectorStore, stores: StoreSet) -> None:
    assert vectors.prepare("nowhere") is False
    assert vectors.prepare("docs") is True
    assert vectors.prepare("docs", keyword=True) is True
    assert uris(vectors.search("docs", "authentication timeout", top_k=1, mode="hybrid")) == ["auth.md"]
    with pytest.raises(InvalidParamsError):
        vectors.prepare("../escape")


def test_a_chunk_without_words_scores_zero_on_every_backend(stores: StoreSet) -> None:
    """Its embedding is all zeros: PostgreSQL's cosine distance to it is NaN, and it was dropped."""
    assert stores.vectors is not None
    stores.vectors.settings("notes", HASHING)
    for uri, text in (("rule", "----------"), ("party", "party time with friends"),
                      ("tax", "quarterly tax filing deadline")):
        stores.vectors.upsert("notes", uri, text, {})
    hits = stores.vectors.search("notes", "party", top_k=5, min_score=0.0)
    assert uris(hits)[0] == "party" and sorted(uris(hits)[1:]) == ["rule", "tax"]
    assert [h["score"] for h in hits][1:] == [0.0, 0.0]


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_an_admitted_search_ranks_as_if_the_rest_were_not_there(vectors: VectorStore, mode: str) -> None:
    """`admit` (a restricted caller's read patterns): the hidden documents change neither which
    hits come back nor their scores (keyword scores aside: BM25 weighs terms by the whole
    collection), however many better hidden hits there are."""
    for n in range(60):
        vectors.upsert("docs", f"hidden-{n}.md", f"login request timeout slow authentication server {n}", {})
    vectors.settings("seen", HASHING)
    for uri, text in DOCS.items():
        vectors.upsert("seen", uri, text, {"title": uri.removesuffix(".md")})

    def shown(source: str, metadata: object) -> bool:
        return "/hidden-" not in source and isinstance(metadata, dict)

    query = "login request timeout postgres connections release"  # (no two hits tie)
    admitted = vectors.search("docs", query, top_k=3, mode=mode, admit=shown)
    alone = vectors.search("seen", query, top_k=3, mode=mode)
    assert uris(admitted) == uris(alone) and len(admitted) == 3
    if mode != "keyword":
        assert [h["score"] for h in admitted] == pytest.approx([h["score"] for h in alone])
    assert all(h["source"].startswith("vector://docs/") for h in admitted)
