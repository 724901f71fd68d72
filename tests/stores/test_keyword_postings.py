"""The keyword leg's in-memory postings: the same top-k as FTS5's own bm25() ranking (bit for bit),
kept in step with writes from this and other processes and with batches, rebuilt when out of step."""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from context_assembly.stores.embedding import HASHING
from context_assembly.stores.sqlite import postings_files, postings_keeper
from context_assembly.stores.sqlite.postings import TOKENIZE, Postings, SavedWords, Snapshot, chunk_rows, tokenize
from context_assembly.stores.sqlite.vector import SqliteVectorStore, fts_query
from context_assembly.stores.vector_collections import fts_terms
from context_assembly.workspace.layout import WorkspaceLayout

from .processes import at_once, lock_held

Ranked = list[tuple[int, float]]


def postings_store(root: Path) -> SqliteVectorStore:
    """A store whose keyword leg uses the postings whatever its size, read by the search that needs them."""
    s = SqliteVectorStore.for_workspace(WorkspaceLayout(root), default_model=HASHING)
    s.index.postings.min_chunks = 0
    s.index.postings.background = False
    return s


def reference(s: SqliteVectorStore, collection: str, terms: list[str], limit: int) -> Ranked:
    """FTS5's ranking of every match in the collection, written plainly."""
    return [(int(i), float(x)) for i, x in s.index._db.connection().execute(
        "SELECT c.id, -bm25(vector_chunks_fts) AS s FROM vector_chunks_fts JOIN vector_chunks c "
        "ON c.id = vector_chunks_fts.rowid WHERE vector_chunks_fts MATCH ? AND c.collection = ? "
        "ORDER BY s DESC, c.id LIMIT ?", (fts_query(terms), collection, limit)).fetchall()]


def by_postings(s: SqliteVectorStore, collection: str, query: str, limit: int) -> Ranked:
    """The keyword top-k, asserting that the postings (not FTS5) answered it."""
    snapshot = s.index.postings.current()
    assert snapshot is not None
    ranked = s.index._keywords._from_postings(snapshot, collection, fts_terms(query), limit)
    assert ranked is not None
    assert s.index.full_text(collection, fts_terms(query), limit) == ranked
    return ranked


def agrees(s: SqliteVectorStore, collection: str, query: str, limit: int = 20) -> Ranked:
    ranked = by_postings(s, collection, query, limit)
    assert ranked == reference(s, collection, fts_terms(query), limit)
    return ranked


def zipf_text(rng: random.Random, i: int) -> str:
    words = rng.choices([f"w{n}" for n in range(300)], [1 / (n + 1) for n in range(300)], k=rng.randint(3, 40))
    return " ".join(words) + (" Rare_word café" if i % 97 == 0 else "") + (" w1_w2 w1 w2 w1" if i % 5 == 0 else "")


@pytest.fixture(scope="module")
def keyword_store(tmp_path_factory: pytest.TempPathFactory) -> SqliteVectorStore:
    """Two collections read into postings, then written to: chunks added (the tail) and deleted."""
    s = postings_store(tmp_path_factory.mktemp("postings"))
    rng = random.Random(11)
    s.upsert_many("a", [(f"d{i}", zipf_text(rng, i), {}) for i in range(1000)])
    s.upsert_many("b", [(f"d{i}", zipf_text(rng, i), {}) for i in range(300)])
    assert s.index.build_postings()
    main = s.index.postings.current().main  # type: ignore[union-attr]
    s.upsert_many("a", [(f"n{i}", zipf_text(rng, i), {}) for i in range(200)])
    for i in range(0, 1000, 13):
        s.delete("a", f"d{i}")
    s.upsert("b", "d5", "w1 w2 replaced w1_w2 naïve", {})
    snapshot = s.index.postings.current()
    assert snapshot is not None and snapshot.main is main and snapshot.tail.entries  # caught up, not re-read
    return s


WORDS = st.one_of(st.sampled_from([f"w{i}" for i in range(0, 300, 7)] + ["w0", "w1", "w2", "w3", "absent"]),
                  st.sampled_from(["rare_word", "__w1__", "w1_w2", "w2_w1", "w1_w1", "rare", "replaced", "naive",
                                   "w3_absent", "café", "cafe"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(WORDS, min_size=1, max_size=8), limit=st.integers(1, 60), collection=st.sampled_from("ab"))
def test_postings_top_k_equals_the_fts5_bm25_ranking(keyword_store: SqliteVectorStore, words: list[str],
                                                     limit: int, collection: str) -> None:
    terms = fts_terms(" ".join(words))
    want = reference(keyword_store, collection, terms, limit)
    assert keyword_store.index.full_text(collection, terms, limit) == want  # same ids, order, bit-identical scores
    if all(term.isascii() for term in terms):
        assert by_postings(keyword_store, collection, " ".join(words), limit) == want


def test_unknown_collections_and_absent_words_find_nothing(keyword_store: SqliteVectorStore) -> None:
    assert by_postings(keyword_store, "nowhere", "w1", 10) == []
    assert by_postings(keyword_store, "a", "absent nothing", 10) == []
    assert keyword_store.search("a", "w1 w2", top_k=5, mode="keyword")


def test_a_build_reads_collections_written_interleaved(tmp_path: Path) -> None:
    """A build reads each collection's chunk ids in one statement and merges them by id: chunks of
    three collections written in turns, some deleted, are each searched as FTS5 ranks them."""
    s = postings_store(tmp_path)
    rng = random.Random(5)
    for i in range(240):
        s.upsert("abc"[i % 3] if i % 7 else "c", f"d{i}", zipf_text(rng, i), {})
    for i in range(0, 240, 11):
        s.delete("abc"[i % 3] if i % 7 else "c", f"d{i}")
    assert s.index.build_postings()
    snapshot = s.index.postings.current()
    assert snapshot is not None and list(snapshot.codes) == ["b", "c", "a"]  # numbered by their first chunks
    for collection in "abc":
        for query in ("w1", "w0 w5", "w3 w2 w1", "rare_word w1_w2"):
            agrees(s, collection, query)


def test_own_writes_are_caught_up_not_reread(tmp_path: Path) -> None:
    s = postings_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"common text {i} about item {i % 7}", {}) for i in range(200)])
    agrees(s, "c", "common item 3")
    main = s.index.postings.current().main  # type: ignore[union-attr]
    s.upsert("c", "d3", "completely new words about item", {})  # an update: old chunk deleted, new one added
    assert [i for i, _ in agrees(s, "c", "completely new")] == [s.index._db.read(
        "SELECT id FROM vector_chunks WHERE doc_uri = 'd3'")[0][0]]
    s.delete("c", "d7")
    assert not any(text == "common text 7 about item 0" for text in texts(s, agrees(s, "c", "common 7 item 0")))
    s.upsert("c", "extra", "another fresh document", {})
    agrees(s, "c", "another fresh item")
    assert s.index.postings.current().main is main  # type: ignore[union-attr]


def texts(s: SqliteVectorStore, ranked: Ranked) -> list[str]:
    return [row.text for row in s.index.chunks([i for i, _ in ranked]).values()]


WRITER = textwrap.dedent("""
    import sys
    from context_assembly.stores.sqlite.vector import SqliteVectorStore
    from context_assembly.workspace.layout import WorkspaceLayout
    root, count = sys.argv[1], int(sys.argv[2])
    store = SqliteVectorStore.for_workspace(WorkspaceLayout(root), default_model="hashing-256")
    for i in range(count):
        store.upsert("c", f"other-{i}", f"document {i} written by another process", {})
    for i in range(0, 40, 3):
        store.delete("c", f"d{i}")
    store.upsert("c", "d1", "rewritten by another process", {})
    print("done")
""")


def test_another_process_writes_and_deletes_are_caught_up(tmp_path: Path) -> None:
    s = postings_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"document {i} written here", {}) for i in range(40)])
    agrees(s, "c", "document written")
    main = s.index.postings.current().main  # type: ignore[union-attr]
    proc = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "30"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    for query in ("document written", "another process", "rewritten", "document 3 written here"):
        agrees(s, "c", query, limit=100)
    assert s.index.postings.current().main is main  # type: ignore[union-attr]  # caught up, deletes found
    assert len(by_postings(s, "c", "document", 200)) == 40 - 14 - 1 + 30  # d1 rewritten without the word
    assert len(by_postings(s, "c", "rewritten", 10)) == 1


def test_a_batch_sees_its_own_writes_and_a_rollback_leaves_the_postings_right(tmp_path: Path) -> None:
    s = postings_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"plain text {i}", {}) for i in range(50)])
    agrees(s, "c", "plain text")
    main = s.index.postings.current().main  # type: ignore[union-attr]
    db = s.index._db
    with pytest.raises(RuntimeError), db.batch():
        s.upsert("c", "new", "uncommitted zebra words", {})
        s.delete("c", "d1")
        assert s.index.postings.current() is None  # FTS5 answers inside the batch ...
        assert len(s.index.full_text("c", ["zebra"], 5)) == 1  # ... and sees the batch's own writes
        raise RuntimeError("roll back")
    assert agrees(s, "c", "zebra") == []
    assert len(agrees(s, "c", "plain", 100)) == 50
    with db.batch():
        s.upsert("c", "new", "committed zebra words", {})
        s.delete("c", "d1")
    assert len(agrees(s, "c", "zebra")) == 1
    assert len(agrees(s, "c", "plain", 100)) == 49
    assert s.index.postings.current().main is main  # type: ignore[union-attr]  # caught up, not re-read


def test_a_bulk_write_rebuilds_the_postings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings_keeper, "CATCH_UP_MAX", 3)
    s = postings_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"plain text {i}", {}) for i in range(20)])
    agrees(s, "c", "plain")
    main = s.index.postings.current().main  # type: ignore[union-attr]
    s.upsert_many("c", [(f"n{i}", f"bulk words {i}", {}) for i in range(10)])
    assert len(agrees(s, "c", "bulk text", 50)) == 30
    assert s.index.postings.current().main is not main  # type: ignore[union-attr]


def test_large_indexes_build_in_the_background_and_fts5_answers_meanwhile(tmp_path: Path) -> None:
    s = SqliteVectorStore.for_workspace(WorkspaceLayout(tmp_path), default_model=HASHING)
    s.upsert_many("c", [(f"d{i}", f"plain text {i}", {}) for i in range(30)])
    assert s.index.postings.current() is None  # below the threshold: FTS5, nothing built
    assert s.index.postings._build is None
    s.index.postings.min_chunks = 10
    want = reference(s, "c", ["plain", "text"], 10)
    assert s.index.full_text("c", ["plain", "text"], 10) == want  # FTS5 while the thread reads the postings
    s.index.postings.wait()
    assert by_postings(s, "c", "plain text", 10) == want


def test_postings_out_of_step_with_the_table_fall_back_to_fts5(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    s = postings_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"plain text {i}", {}) for i in range(30)])
    agrees(s, "c", "plain")
    db = s.index._db
    with db.transaction() as conn:  # an FTS row without its chunk (a damaged index), and a write
        conn.execute("INSERT INTO vector_chunks_fts(rowid, text) VALUES (999999, 'plain ghost')")
        db.bump(conn, "vector")
    with caplog.at_level(logging.WARNING):
        got = s.index.full_text("c", ["plain", "ghost"], 40)
    assert "out of step" in caplog.text and "building the keyword postings failed" in caplog.text
    assert s.index.postings.current() is None
    assert got == reference(s, "c", ["plain", "ghost"], 40) and len(got) == 30  # FTS5's ranking, no ghost
    assert s.search("c", "plain", top_k=3, mode="hybrid")
    with db.transaction() as conn:  # repaired: the next write lets the postings be read again
        conn.execute("INSERT INTO vector_chunks_fts(vector_chunks_fts, rowid, text) VALUES "
                     "('delete', 999999, 'plain ghost')")
    s.upsert("c", "more", "plain more", {})
    agrees(s, "c", "plain more", 40)


def test_searches_during_concurrent_writes_never_fail_and_end_in_step(tmp_path: Path) -> None:
    s = postings_store(tmp_path)
    s.upsert_many("c", [(f"d{i}", f"plain text {i} item", {}) for i in range(100)])
    agrees(s, "c", "plain")
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            for i in range(60):
                s.upsert("c", f"w{i}", f"written item {i}", {})
                if i % 4 == 0:
                    s.delete("c", f"d{i}")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            done.set()

    def search() -> None:
        try:
            while not done.is_set():
                assert s.search("c", "written plain item", top_k=10, mode="hybrid")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write), threading.Thread(target=search), threading.Thread(target=search)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert len(agrees(s, "c", "written plain item", 500)) == 100 - 15 + 60


# --- saved postings: a new process starts from what a build saved ----------------------------------


def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the reads of the postings from the FTS index (a build), in any store from now on."""
    calls: list[int] = []
    read = postings_keeper.PostingsKeeper._read

    def counted(self: postings_keeper.PostingsKeeper) -> Any:
        calls.append(1)
        return read(self)

    monkeypatch.setattr(postings_keeper.PostingsKeeper, "_read", counted)
    return calls


def saved_file(root: Path) -> Path:
    return WorkspaceLayout(root).db_path.parent / postings_files.FOLDER / postings_files.META


QUERIES = ("w1 w2", "w3 rare_word", "w1_w2 w7", "naive replaced", "w0 w5 w9 w13 w100", "absent")


def seeded_store(root: Path, documents: int = 300) -> SqliteVectorStore:
    s = postings_store(root)
    rng = random.Random(5)
    s.upsert_many("a", [(f"d{i}", zipf_text(rng, i), {}) for i in range(documents)])
    s.upsert_many("b", [(f"d{i}", zipf_text(rng, i), {}) for i in range(documents // 3)])
    assert s.index.build_postings()
    return s


def test_a_build_saves_the_postings_and_a_new_process_starts_from_them(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    first = seeded_store(tmp_path)
    assert saved_file(tmp_path).is_file()
    built = reads(monkeypatch)
    second = postings_store(tmp_path)  # another process's view: its own database connection and keeper
    for collection in "ab":
        for query in QUERIES:
            assert agrees(second, collection, query, 40) == agrees(first, collection, query, 40)
    assert built == []  # loaded, not read from the FTS index


def test_a_saved_file_is_caught_up_with_the_writes_made_since(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = seeded_store(tmp_path)
    rng = random.Random(9)
    first.upsert_many("a", [(f"n{i}", zipf_text(rng, i), {}) for i in range(40)])
    for i in range(0, 300, 11):
        first.delete("a", f"d{i}")
    first.upsert("b", "d3", "w1 w2 replaced w1_w2 naïve", {})
    built = reads(monkeypatch)
    second = postings_store(tmp_path)
    for collection in "ab":
        for query in (*QUERIES, "w2 w4 w8"):
            agrees(second, collection, query, 60)
    snapshot = second.index.postings.current()
    assert snapshot is not None and snapshot.tail.entries and not snapshot.live.all()  # caught up from the file
    assert built == []


def test_a_saved_file_of_another_database_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded_store(tmp_path)
    saved = saved_file(tmp_path).read_bytes()
    for suffix in ("", "-wal", "-shm"):  # the database is made anew, with other texts under the same ids
        Path(f"{WorkspaceLayout(tmp_path).db_path}{suffix}").unlink(missing_ok=True)
    s = postings_store(tmp_path)
    s.upsert_many("a", [(f"d{i}", f"fresh text {i} about w{i % 9}", {}) for i in range(300)])
    assert saved_file(tmp_path).read_bytes() == saved  # still there: the store has not searched yet
    built = reads(monkeypatch)
    for query in ("fresh w3", "w1 w2", "about"):
        agrees(s, "a", query, 40)
    assert built == [1]  # the new database has no token: read from its FTS index


def restored_from_an_older_copy(root: Path) -> None:
    """A database with postings saved, then restored from a copy taken before its last writes (the
    newer file stays)."""
    first = seeded_store(root)
    db_path = WorkspaceLayout(root).db_path
    first.index._db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    copy = db_path.read_bytes()
    rng = random.Random(3)
    first.upsert_many("a", [(f"n{i}", zipf_text(rng, i), {}) for i in range(30)])
    assert first.index.build_postings()  # the file now holds chunks the copy never had
    first.index._db.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    db_path.write_bytes(copy)


def test_a_database_restored_from_an_older_copy_ignores_a_newer_file(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    restored_from_an_older_copy(tmp_path)
    built = reads(monkeypatch)
    behind = postings_store(tmp_path)
    for query in ("w1 w2", "w3 w5 w7"):
        agrees(behind, "a", query, 40)
    assert built == [1]  # its generation is behind the file's


def test_a_restored_database_written_past_the_file_ignores_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    restored_from_an_older_copy(tmp_path)
    writer = postings_store(tmp_path)
    rng = random.Random(3)  # the same number of chunks and of words as the file's newest, other words:
    for i in range(30):  # the ids the file gives to those texts, and the same totals
        writer.upsert("a", f"m{i}", zipf_text(rng, i).replace("w", "z"), {})
    built = reads(monkeypatch)
    again = postings_store(tmp_path)
    for query in ("z1 z2", "w1 w2", "z3 w5 z7"):
        agrees(again, "a", query, 80)
    assert built == [1]


def test_a_build_replaces_a_newer_file_not_of_this_database_s_history(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    restored_from_an_older_copy(tmp_path)  # the file named is of a generation the database never reached
    stale = named_file(tmp_path)
    behind = postings_store(tmp_path)
    assert behind.index.build_postings()
    assert named_file(tmp_path) != stale and not stale.exists()
    built = reads(monkeypatch)
    fresh = postings_store(tmp_path)
    for query in ("w1 w2", "w3 w5 w7"):
        agrees(fresh, "a", query, 40)
    snapshot = fresh.index.postings.current()
    assert built == [] and snapshot is not None and snapshot.main.file == named_file(tmp_path).name


def test_a_build_at_the_generation_named_with_other_texts_keeps_its_own(tmp_path: Path) -> None:
    """A database restored from an older copy and written again can reach the generation and the
    chunk ids of the file named with other texts: a build then saves its own file, it does not take
    that one."""
    restored_from_an_older_copy(tmp_path)
    stale = named_file(tmp_path)
    writer = postings_store(tmp_path)
    rng = random.Random(3)  # as the writes behind the file, in one write as they were, other words
    writer.upsert_many("a", [(f"n{i}", zipf_text(rng, i).replace("w", "z"), {}) for i in range(30)])
    described = orjson.loads(saved_file(tmp_path).read_bytes())
    assert writer.index._db.generation(postings_keeper.STORE) == described["generation"]
    assert writer.index.build_postings()
    snapshot = writer.index.postings.current()
    assert snapshot is not None and len(snapshot.ids) == described["chunks"]  # the same ids
    assert named_file(tmp_path) != stale and snapshot.main.file == named_file(tmp_path).name
    for s in (writer, postings_store(tmp_path)):
        for query in ("z1 z2", "w1 w2", "z3 w5 z7"):
            agrees(s, "a", query, 80)


def named_file(root: Path) -> Path:
    """The postings file the description names."""
    return saved_file(root).parent / str(orjson.loads(saved_file(root).read_bytes())["file"])


def region(meta: dict[str, Any], array: str) -> tuple[int, int]:
    """Where `array` lies in the file (`postings_files.LAYOUT`), in bytes."""
    at = 0
    for name, dtype, key in postings_files.LAYOUT:
        size = np.dtype(dtype).itemsize * (int(meta[key.removesuffix("+1")]) + key.endswith("+1"))
        if name == array:
            return at, at + size
        at += size
    raise KeyError(array)


def with_array(data: bytes, meta: dict[str, Any], array: str, change: Any) -> bytes:
    """The file's bytes with `change` applied to a copy of one of its arrays."""
    start, end = region(meta, array)
    dtype = next(d for name, d, _ in postings_files.LAYOUT if name == array)
    values = np.frombuffer(data[start:end], dtype=dtype).copy()
    change(values)
    return data[:start] + values.tobytes() + data[end:]


def set_at(values: np.ndarray, at: int, value: int) -> None:
    values[at] = value


DAMAGES: list[tuple[str, Any]] = [  # (what, (description, file bytes) -> damaged (description, file bytes))
    ("a description that is not JSON", lambda meta, data: (b"not json", data)),
    ("a description that is not an object", lambda meta, data: (b"[1, 2]", data)),
    ("a description without a count", lambda meta, data: (orjson.dumps({**meta, "entries": None}), data)),
    ("collections' codes that are not an object", lambda meta, data: (orjson.dumps({**meta, "codes": [0]}), data)),
    ("a count one too many", lambda meta, data: (orjson.dumps({**meta, "entries": meta["entries"] + 1}), data)),
    ("a negative count", lambda meta, data: (orjson.dumps({**meta, "words": -1}), data)),
    ("a file cut short", lambda meta, data: (orjson.dumps(meta), data[: len(data) // 2])),
    ("an empty file", lambda meta, data: (orjson.dumps(meta), b"")),
    ("a chunk position past the chunks", lambda meta, data: (
        orjson.dumps(meta), with_array(data, meta, "docs", lambda v: set_at(v, 0, meta["chunks"])))),
    ("word offsets that go back", lambda meta, data: (
        orjson.dumps(meta), with_array(data, meta, "offsets", lambda v: set_at(v, 1, v[2] + 1)))),
    ("a word order naming a word twice", lambda meta, data: (
        orjson.dumps(meta), with_array(data, meta, "order", lambda v: set_at(v, 0, v[1])))),
    ("word starts past the words", lambda meta, data: (
        orjson.dumps(meta), with_array(data, meta, "starts", lambda v: set_at(v, -1, v[-1] + 1)))),
    ("chunk lengths that disagree with the totals", lambda meta, data: (
        orjson.dumps(meta), with_array(data, meta, "lengths", lambda v: set_at(v, 0, v[0] + 1)))),
]


@pytest.mark.parametrize("what, damage", DAMAGES, ids=[what for what, _ in DAMAGES])
def test_an_unreadable_saved_file_is_read_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture, what: str, damage: Any) -> None:
    seeded_store(tmp_path)
    data = named_file(tmp_path).read_bytes()
    path = named_file(tmp_path).with_name("postings~damaged00000.bin")  # (the file named stays as it is: it
    meta, damaged = damage({**orjson.loads(saved_file(tmp_path).read_bytes()), "file": path.name}, data)  # is mapped)
    path.write_bytes(damaged)
    saved_file(tmp_path).write_bytes(meta)
    built = reads(monkeypatch)
    s = postings_store(tmp_path)
    with caplog.at_level(logging.WARNING):
        agrees(s, "a", "w1 w2 w3", 30)
    assert built == [1] and "cannot be used" in caplog.text
    assert named_file(tmp_path) != path and postings_store(tmp_path).index.postings.current() is not None  # saved anew


def test_a_description_naming_a_file_that_is_gone_is_read_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded_store(tmp_path)
    named_file(tmp_path).unlink()
    built = reads(monkeypatch)
    agrees(postings_store(tmp_path), "a", "w1 w2 w3", 30)
    assert built == [1] and named_file(tmp_path).is_file()


def test_a_file_tidied_away_between_its_description_and_its_opening_is_looked_for_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process saved twice meanwhile: the description read named a file already gone."""
    seeded_store(tmp_path)
    read = postings_files.current_meta
    calls: list[int] = []

    def first_gone(path: Path) -> dict[str, Any]:
        calls.append(1)
        meta = read(path)
        return {**meta, "file": "postings~tidiedaway00.bin"} if len(calls) == 1 else meta

    monkeypatch.setattr(postings_files, "current_meta", first_gone)
    built = reads(monkeypatch)
    second = postings_store(tmp_path)
    agrees(second, "a", "w1 w2 w3", 30)
    snapshot = second.index.postings.current()
    assert built == [] and len(calls) == 2 and snapshot is not None and snapshot.main.file == named_file(tmp_path).name


def mapped_from(postings: Any) -> str:
    """The name of the file a snapshot's postings are mapped from (AssertionError: a copy of its own)."""
    assert isinstance(postings.vocab, SavedWords) and postings.file is not None
    for array in (postings.docs, postings.freqs, postings.offsets):
        base = array
        while not isinstance(base, np.memmap):
            base = base.base
        assert Path(str(base.filename)).name == postings.file and not array.flags.writeable
    return str(postings.file)


def test_the_saved_postings_are_mapped_by_the_process_that_saved_them_and_by_the_next(tmp_path: Path) -> None:
    first = seeded_store(tmp_path)
    snapshot = first.index.postings.current()
    assert snapshot is not None
    name = mapped_from(snapshot.main)  # its own copy let go once saved
    assert name == named_file(tmp_path).name
    second = postings_store(tmp_path)
    loaded = second.index.postings.current()
    assert loaded is not None and mapped_from(loaded.main) == name
    for query in QUERIES:
        assert agrees(second, "a", query, 40) == agrees(first, "a", query, 40)
    first.upsert("a", "late", "w1 w2 late", {})  # a catch-up keeps the mapped postings, adds a tail
    caught = second.index.postings.current()
    assert caught is not None and mapped_from(caught.main) == name and caught.tail.entries
    agrees(second, "a", "w1 late", 40)


def test_processes_reading_the_same_state_end_on_one_file(tmp_path: Path) -> None:
    first = seeded_store(tmp_path)
    second = postings_store(tmp_path)
    assert second.index.build_postings()  # read anew at the same generation: the file named is taken
    snapshots = [s.index.postings.current() for s in (first, second)]
    assert all(s is not None for s in snapshots)
    assert {mapped_from(s.main) for s in snapshots if s is not None} == {named_file(tmp_path).name}
    assert list(saved_file(tmp_path).parent.glob("postings~*.bin")) == [named_file(tmp_path)]


def test_a_build_behind_the_named_file_keeps_its_copy_and_the_newer_file(tmp_path: Path) -> None:
    first = seeded_store(tmp_path)
    behind = first.index.postings._read()  # read before the write below,
    first.upsert("a", "late", "w1 w2 late", {})
    assert first.index.build_postings()  # and a newer file saved meantime
    newer = named_file(tmp_path)
    files = postings_files.PostingsFiles(saved_file(tmp_path).parent)
    assert files.save(first.index._db, behind) is None
    assert named_file(tmp_path) == newer and newer.is_file()


def test_a_save_that_cannot_be_written_leaves_the_file_named_and_the_postings_serving(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    resource = pytest.importorskip("resource")  # (POSIX: writes past a size limit fail with EFBIG)
    s = seeded_store(tmp_path)
    named = named_file(tmp_path)
    s.upsert("a", "late", "w1 w2 late", {})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))  # writes past 4 KiB fail (EFBIG)
    try:
        with caplog.at_level(logging.WARNING):
            assert s.index.build_postings()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "could not be saved" in caplog.text
    assert named_file(tmp_path) == named and list(named.parent.glob("postings~*.bin")) == [named]  # no part left
    snapshot = s.index.postings.current()
    assert snapshot is not None and snapshot.main.file is None  # its own copy serves
    agrees(s, "a", "w1 late", 30)


def test_postings_saved_by_an_earlier_version_are_read_anew_and_removed(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seeded_store(tmp_path)
    folder = saved_file(tmp_path).parent
    for old in folder.iterdir():
        old.unlink()
    earlier = folder / postings_files.EARLIER
    earlier.write_bytes(b"PK\x03\x04 an archive of arrays")
    built = reads(monkeypatch)
    agrees(postings_store(tmp_path), "a", "w1 w2", 30)
    assert built == [1] and not earlier.exists() and named_file(tmp_path).is_file()


SWARM_MEMBER = textwrap.dedent("""
    import logging, random, sys
    from pathlib import Path
    from context_assembly.stores.embedding import HASHING
    from context_assembly.stores.sqlite.postings import read_transaction
    from context_assembly.stores.sqlite.vector import SqliteVectorStore, fts_query
    from context_assembly.stores.vector_collections import fts_terms
    from context_assembly.workspace.layout import WorkspaceLayout
    logging.basicConfig(level=logging.WARNING)
    root, member = Path(sys.argv[1]), int(sys.argv[2])
    s = SqliteVectorStore.for_workspace(WorkspaceLayout(root), default_model=HASHING)
    s.index.postings.min_chunks, s.index.postings.background = 0, False
    rng = random.Random(member)
    conn = s.index._db.connection()
    from_postings = 0
    for step in range(12):
        s.upsert_many("a", [(f"m{member}-{step}-{i}", " ".join(rng.choices(["w1", "w2", "w3", f"z{member}"], k=6)), {})
                            for i in range(5)])
        s.delete("a", f"d{rng.randrange(300)}")
        if step % 3 == member % 3:  # read anew and saved, racing the others' saves (or left to the
            s.index.build_postings()  # member reading them: FTS5 answers until its file is there)
        for query in ("w1 w2", f"z{member} w3", "w0 w5"):
            terms = fts_terms(query)
            with read_transaction(conn):  # the others' writes wait for the next query
                want = [(int(i), float(x)) for i, x in conn.execute(
                    "SELECT c.id, -bm25(vector_chunks_fts) AS s FROM vector_chunks_fts JOIN vector_chunks c "
                    "ON c.id = vector_chunks_fts.rowid WHERE vector_chunks_fts MATCH ? AND c.collection = 'a' "
                    "ORDER BY s DESC, c.id LIMIT 20", (fts_query(terms),))]
                snapshot = s.index.postings.current()
                got = s.index.full_text("a", terms, 20) if snapshot is None else \
                    s.index._keywords._from_postings(snapshot, "a", terms, 20)
                assert got == want, query
                from_postings += snapshot is not None
    print("done", from_postings, flush=True)
""")


def test_a_swarm_reading_and_saving_at_once_ends_on_one_file_in_step(tmp_path: Path) -> None:
    seeded_store(tmp_path)
    members = [subprocess.Popen([sys.executable, "-c", SWARM_MEMBER, str(tmp_path), str(member)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for member in range(3)]
    answered = 0
    for member in members:
        out, err = member.communicate(timeout=300)
        assert member.returncode == 0 and out.split()[0] == "done", err
        assert "cannot" not in err and "Traceback" not in err, err  # no save failed, no file refused
        answered += int(out.split()[1])
    assert answered > 36, answered  # most of the 108 searches from postings, not all from FTS5
    if os.name == "posix":  # (elsewhere a file still mapped by a member when the last save tidied stays)
        assert [p.name for p in saved_file(tmp_path).parent.glob("postings~*.bin")] == [named_file(tmp_path).name]
    fresh = postings_store(tmp_path)
    snapshot = fresh.index.postings.current()
    assert snapshot is not None and mapped_from(snapshot.main) == named_file(tmp_path).name
    for query in ("w1 w2", "z0 z1 z2 w3", "w0 w5"):
        agrees(fresh, "a", query, 60)


def test_while_another_process_reads_the_postings_fts5_answers_and_then_their_file_is_mapped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = postings_store(tmp_path)
    rng = random.Random(6)
    writer.upsert_many("a", [(f"d{i}", zipf_text(rng, i), {}) for i in range(300)])
    files = postings_files.PostingsFiles(saved_file(tmp_path).parent)
    with lock_held(files.build_lock().lock_file):
        built = reads(monkeypatch)
        waiting = postings_store(tmp_path)
        for query in QUERIES:  # FTS5's own ranking: nothing read here
            terms = fts_terms(query)
            assert waiting.index.full_text("a", terms, 20) == reference(waiting, "a", terms, 20)
        assert built == [] and waiting.index.postings.current() is None and not saved_file(tmp_path).exists()
    assert postings_store(tmp_path).index.build_postings() and built == [1]  # the other process's read, saved
    for query in QUERIES:  # (within the wait after it found the lock held: the file is what it takes)
        agrees(waiting, "a", query, 30)
    snapshot = waiting.index.postings.current()
    assert built == [1] and snapshot is not None and snapshot.main.file == named_file(tmp_path).name


def test_a_build_finding_postings_another_process_saved_meanwhile_maps_them(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The build lock taken after another process's build released it: its file is there."""
    late = postings_store(tmp_path)
    rng = random.Random(7)
    late.upsert_many("a", [(f"d{i}", zipf_text(rng, i), {}) for i in range(300)])
    with monkeypatch.context() as asked:  # it looks (none saved yet) and asks for a build that has not run
        asked.setattr(late.index.postings, "start_build", lambda background=True: None)
        assert late.index.postings.current() is None
    assert postings_store(tmp_path).index.build_postings()  # the other process
    built = reads(monkeypatch)
    assert late.index.build_postings() and built == []
    snapshot = late.index.postings.current()
    assert snapshot is not None and snapshot.main.file == named_file(tmp_path).name
    agrees(late, "a", "w1 w2 w3", 30)


def test_a_process_whose_read_ended_without_a_file_leaves_the_read_to_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings_keeper, "BUILD_BUSY_S", 0.0)  # (asked again at the next search)
    s = postings_store(tmp_path)
    rng = random.Random(9)
    s.upsert_many("a", [(f"d{i}", zipf_text(rng, i), {}) for i in range(300)])
    files = postings_files.PostingsFiles(saved_file(tmp_path).parent)
    with lock_held(files.build_lock().lock_file):  # it reads them, then exits without saving
        built = reads(monkeypatch)
        s.index.full_text("a", ["w1", "w2"], 10)
        assert built == [] and s.index.postings.current() is None
    agrees(s, "a", "w1 w2", 30)  # nobody reads them: this one does
    assert built == [1]


RACING_READER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from context_assembly.stores.embedding import HASHING
    from context_assembly.stores.sqlite import postings_keeper
    from context_assembly.stores.sqlite.vector import SqliteVectorStore
    from context_assembly.workspace.layout import WorkspaceLayout
    reads = []
    read = postings_keeper.PostingsKeeper._read
    postings_keeper.PostingsKeeper._read = lambda self: (reads.append(1), read(self))[1]
    postings_keeper.BUILD_BUSY_S = 0.0
    s = SqliteVectorStore.for_workspace(WorkspaceLayout(Path(sys.argv[1])), default_model=HASHING)
    s.index.postings.min_chunks = 0
    sys.stdin.readline()  # all started: search at once
    while s.index.postings.current() is None:
        s.index.full_text("a", ["w1", "w2"], 10)
        s.index.postings.wait()
    print(len(reads), s.index.postings.current().main.file, flush=True)
""")


def test_processes_needing_the_postings_together_read_them_once(tmp_path: Path) -> None:
    writer = postings_store(tmp_path)
    rng = random.Random(8)
    writer.upsert_many("a", [(f"d{i}", zipf_text(rng, i), {}) for i in range(3000)])
    reported = [out.split() for out in at_once(RACING_READER, [str(tmp_path)], 4)]
    assert sum(int(count) for count, _ in reported) == 1, reported  # one read them; the others map its file
    assert {file for _, file in reported} == {named_file(tmp_path).name}


WORD_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(WORD_TEXT, unique=True, max_size=40), others=st.lists(
    st.one_of(WORD_TEXT, st.just(""), st.just("\ud800")), max_size=10))
def test_saved_words_find_each_word_s_number_and_nothing_else(words: list[str], others: list[str]) -> None:
    """The binary search over the words in byte order finds every word of the vocabulary by its
    number, and no other text: prefixes, extensions, the empty string, a lone surrogate."""
    vocab = {word: n for n, word in enumerate(words)}
    none = np.zeros(0, np.int32)
    main = Postings(vocab, np.zeros(len(words) + 1, np.int64), none, none)
    arrays = postings_files._arrays(Snapshot(0, np.zeros(0, np.int64), none, {}, np.ones(0, bool), np.zeros(0), 0, 0,
                                             main))
    saved = SavedWords(memoryview(arrays["vocab"]), memoryview(arrays["starts"]), memoryview(arrays["order"]))
    assert dict(saved.items()) == vocab and list(saved) == words and len(saved) == len(words)
    for text in [*others, *(w[:-1] for w in words), *(w + "a" for w in words)]:
        assert saved.get(text) == vocab.get(text)


def test_postings_that_cannot_be_saved_still_serve(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = saved_file(tmp_path).parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file where the folder goes")
    with caplog.at_level(logging.WARNING):
        s = seeded_store(tmp_path)
    assert "could not be saved" in caplog.text
    agrees(s, "a", "w1 w2", 30)


def test_a_keeper_told_not_to_save_writes_nothing(tmp_path: Path) -> None:
    s = SqliteVectorStore.for_workspace(WorkspaceLayout(tmp_path), default_model=HASHING)
    s.index._keywords.postings = postings_keeper.PostingsKeeper(s.index._db, 0, background=False, saved=False)
    s.upsert_many("a", [(f"d{i}", f"plain text {i}", {}) for i in range(30)])
    agrees(s, "a", "plain text")
    assert not saved_file(tmp_path).parent.exists()


TEXTS = st.lists(st.sampled_from(["abc", "XYZ", "0123", " ", ",", ".", "-", "_", "'", '"', "\t", "\n", "é", "ï", "ß",
                                  "ø", "“", "”", "日本", "🎉", "İ", "ﬁ", "\u0301", "Ωμέγα", "naïve"]),
                 max_size=30).map("".join)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(TEXTS, max_size=12))
def test_chunks_are_tokenized_as_fts5_tokenizes_them(texts: list[str]) -> None:
    """The catch-up's tokens for each new chunk, ASCII or not, are the ones FTS5 itself indexes, in
    order. Non-ASCII text goes through FTS5 in a scratch table: inserted in one statement and its
    tokens read back in one (a step a row or a token would let a busy thread stall the search, see
    stores.sqlite.many_rows)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(f"CREATE VIRTUAL TABLE ref USING fts5(text, tokenize='{TOKENIZE}')")
    conn.execute("CREATE VIRTUAL TABLE ref_instances USING fts5vocab(ref, instance)")
    rows = [(n + 1, text) for n, text in enumerate(texts)]
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    tokens = tokenize(conn, rows)
    conn.set_trace_callback(None)
    assert sum(sql.startswith("INSERT INTO temp.keyword_scratch") for sql in seen) <= 1
    for doc, text in rows:
        conn.execute("INSERT INTO ref(rowid, text) VALUES (?, ?)", (doc, text))
        want = [t for t, in conn.execute("SELECT term FROM ref_instances WHERE doc = ? ORDER BY offset", (doc,))]
        assert tokens[doc] == want, text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(texts=[("a", "x\x1fy"), ("b.c", ""), ("a", "nul\x00after"), ("d-1", "🎉 café")], after=0, limit=9)
@example(texts=[("a", "x\x1fy"), ("b.c", ""), ("d-1", "🎉 café")], after=1, limit=2)
@given(texts=st.lists(st.tuples(st.sampled_from(["a", "b.c", "d-1"]),
                                st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20)),
                      max_size=25),
       after=st.integers(0, 30), limit=st.integers(1, 30))
def test_the_chunks_a_catch_up_reads_are_the_tables(tmp_path_factory: pytest.TempPathFactory,
                                                    texts: list[tuple[str, str]], after: int, limit: int) -> None:
    """Chunks read in one statement (their texts concatenated and cut by length), those added
    since a snapshot and those of a list of ids: any text (NUL, U+001F, emoji, empty; a NUL sends
    them row by row), any collection."""
    s = postings_store(tmp_path_factory.mktemp("db"))
    conn = s.index._db.connection()
    s.upsert("a", "seed", "seed", {})  # the tables, and the collection's settings
    conn.executemany("INSERT INTO vector_chunks(collection, doc_uri, ord, text, embedding) VALUES (?, ?, 0, ?, x'')",
                     [(collection, f"d{n}", text) for n, (collection, text) in enumerate(texts)])
    want = [(int(i), str(c), str(t)) for i, c, t in conn.execute(
        "SELECT id, collection, text FROM vector_chunks WHERE id > ? ORDER BY id LIMIT ?", (after, limit))]
    assert chunk_rows(conn, "WHERE id > ? ORDER BY id LIMIT ?", (after, limit)) == want
    picked = list(range(after, after + 2 * limit, 2))  # (the keyword leg's own reads: by id lists)
    marks = ",".join("?" * len(picked))
    assert chunk_rows(conn, f"WHERE id IN ({marks})", picked) == sorted(
        (int(i), str(c), str(t)) for i, c, t in conn.execute(
            f"SELECT id, collection, text FROM vector_chunks WHERE id IN ({marks})", picked))
