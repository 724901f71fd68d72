"""A collection's matrix saved beside the database and mapped by every process: searches equal
exact search over the table through any mix of writes from any process, the file is shared and
never written, a new file replaces it past a share of changes, and a file that is not this
database's, not this model's, or damaged is never used."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.stores.sqlite import matrix as matrix_module
from context_assembly.stores.sqlite import vector as vector_module
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.postings_files import database_token
from context_assembly.stores.sqlite.stored_embeddings import read_embeddings
from context_assembly.stores.sqlite.vector import SqliteVectorIndex
from context_assembly.stores.vector_index import IndexedDoc

from .processes import at_once, lock_held

DIM = 16
MODEL = "test-16"
STEM = matrix_module.file_stem("c")  # the collection's name in file names


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def docs(vectors: np.ndarray, start: int = 0) -> list[IndexedDoc]:
    return [IndexedDoc(f"d{start + i}", "t", "{}", ("t",), v[None, :]) for i, v in enumerate(vectors)]


def open_index(root: Path) -> SqliteVectorIndex:
    return SqliteVectorIndex(Database(root / "db" / "project.db"), ann_min_chunks=None)


def filled(root: Path, vectors: np.ndarray) -> SqliteVectorIndex:
    """An index holding `vectors` (docs d0...) in collection "c"."""
    index = open_index(root)
    index.upsert("c", MODEL, DIM, docs(vectors))
    return index


def saved_index(root: Path, vectors: np.ndarray) -> SqliteVectorIndex:
    """An index of `vectors` (docs d0...) searched once and its matrix saved."""
    index = filled(root, vectors)
    index.nearest("c", vectors[0], 1, -1.0)
    index.wait_for_saves()
    return index


def folder(root: Path) -> Path:
    return root / "db" / "vector-matrix"


def saved(root: Path) -> list[str]:
    return sorted(p.name for p in folder(root).glob(f"{STEM}~*.f32")) if folder(root).is_dir() else []


def truth(root: Path, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Exact top k over the table itself, read afresh."""
    db = Database(root / "db" / "project.db")
    try:
        ids, matrix = read_embeddings(db.connection(), "c", DIM)
    finally:
        db.close()
    scores = matrix @ query
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


def same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """The same chunks with the same scores (rows scored from a mapped file may differ in the last
    bit); chunks tied at the cut may differ."""
    assert len(got) == len(want)
    assert all(abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(got, want, strict=True))
    cut = want[-1][1] if want else 0.0
    assert {i for i, s in got if s > cut + 1e-6} == {i for i, s in want if s > cut + 1e-6}


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Collections of 50 chunks and more are saved (not 20,000)."""
    monkeypatch.setattr(matrix_module, "FILE_MIN_CHUNKS", 50)


def mapped_files() -> set[str]:
    return {line.split(maxsplit=5)[5].strip() for line in Path("/proc/self/maps").read_text().splitlines()
            if len(line.split(maxsplit=5)) == 6}


def test_a_read_matrix_is_saved_and_another_process_maps_it(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(1)
    first = filled(tmp_path, unit(rng, 300))
    q = unit(rng, 1)[0]
    want = first.nearest("c", q, 10, -1.0)
    first.wait_for_saves()
    [file] = saved(tmp_path)
    other = open_index(tmp_path)
    same(other.nearest("c", q, 10, -1.0), want)
    index = other._indexes["c"]
    assert index.shared is not None and index.shared.file == file and not len(index.ids)
    if sys.platform.startswith("linux"):
        assert str(folder(tmp_path) / file) in mapped_files()
    assert first._indexes["c"].shared is not None  # the saving process maps it too: its own rows let go


def test_writes_go_beside_the_mapped_rows_and_the_file_is_never_written(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(2)
    writer = saved_index(tmp_path, unit(rng, 400))
    [file] = saved(tmp_path)
    content = (folder(tmp_path) / file).read_bytes()
    reader = open_index(tmp_path)
    reader.nearest("c", unit(rng, 1)[0], 1, -1.0)
    for doc in range(0, 30, 3):  # 10 deleted, 10 added: within the share, no new file
        writer.delete("c", f"d{doc}")
    writer.upsert("c", MODEL, DIM, docs(unit(rng, 10), start=400))
    for searcher in (writer, reader):  # its own writes, another process's caught up
        for q in unit(rng, 5):
            same(searcher.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
        index = searcher._indexes["c"]
        assert index.shared is not None and index.shared.file == file
        assert index.size == 400 and len(index.ids) == 10 and index.shared.live == 390
    writer.wait_for_saves()
    reader.wait_for_saves()
    assert saved(tmp_path) == [file] and (folder(tmp_path) / file).read_bytes() == content


def test_past_a_share_of_changes_a_new_file_replaces_it_for_every_process(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(3)
    writer = saved_index(tmp_path, unit(rng, 200))
    [first] = saved(tmp_path)
    reader = open_index(tmp_path)
    reader.nearest("c", unit(rng, 1)[0], 1, -1.0)
    writer.upsert("c", MODEL, DIM, docs(unit(rng, 30), start=200))  # 15 %: past the share
    q = unit(rng, 1)[0]
    writer.nearest("c", q, 10, -1.0)
    writer.wait_for_saves()
    [second] = saved(tmp_path)
    assert second != first
    same(reader.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))  # catches up, then maps the newer file
    reader.wait_for_saves()
    assert saved(tmp_path) == [second]  # it did not write one of its own
    for searcher in (writer, reader):
        same(searcher.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
        index = searcher._indexes["c"]
        assert index.shared is not None and index.shared.file == second and index.size == 230


OPS = st.lists(st.tuples(st.sampled_from(["add", "delete", "replace", "search"]), st.integers(0, 1),
                         st.integers(1, 40)), min_size=1, max_size=12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, seed=st.integers(0, 2**32 - 1), share=st.sampled_from([0.05, 0.3, 10.0]))
def test_any_writes_from_two_processes_leave_searches_exact(ops: list[tuple[str, int, int]], seed: int,
                                                            share: float) -> None:
    rng = np.random.default_rng(seed)
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as tmp:
        patch.setattr(matrix_module, "FILE_MIN_CHUNKS", 30)
        patch.setattr(matrix_module, "RESAVE_SHARE", share)
        root = Path(tmp)
        processes = [open_index(root), open_index(root)]
        processes[0].upsert("c", MODEL, DIM, docs(unit(rng, 60)))
        next_doc, live, mapped = 60, list(range(60)), 0
        for op, who, n in ops:
            index = processes[who]
            if op == "add":
                index.upsert("c", MODEL, DIM, docs(unit(rng, n), start=next_doc))
                live += range(next_doc, next_doc + n)
                next_doc += n
            elif op in ("delete", "replace") and live:
                chosen = [int(d) for d in rng.choice(live, min(n, len(live)), replace=False)]
                if op == "delete":
                    for doc in chosen:
                        index.delete("c", f"d{doc}")
                    live = [d for d in live if d not in set(chosen)]
                else:  # new chunk ids for the same documents
                    index.upsert("c", MODEL, DIM, [IndexedDoc(f"d{d}", "t", "{}", ("t",), unit(rng, 1))
                                                  for d in chosen])
            for searcher in processes:
                searcher.wait_for_saves()
                q = unit(rng, 1)[0]
                same(searcher.nearest("c", q, 8, -1.0), truth(root, q, 8))
        for searcher in processes:
            searcher.wait_for_saves()
        for searcher in processes:  # once the saves are done (one may let its rows go), both map one file
            for _ in range(2):
                q = unit(rng, 1)[0]
                same(searcher.nearest("c", q, 8, -1.0), truth(root, q, 8))
                searcher.wait_for_saves()
            index = searcher._indexes.get("c")
            mapped += index is not None and index.shared is not None
        for searcher in processes:
            searcher.wait_for_saves()
            searcher._db.close()
        if len(live) >= 30:  # FILE_MIN_CHUNKS: a file is saved
            assert mapped >= 2  # both searched through the mapped file, not only rows of their own


def test_a_file_not_of_this_database_or_model_or_damaged_is_not_used(tmp_path: Path, small_files: None,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(4)
    index = saved_index(tmp_path, unit(rng, 100))
    [file] = saved(tmp_path)
    # damaged: a byte short (a copy named instead: the file is mapped here, rewriting it in place could fault)
    short = f"{STEM}~short0000000.f32"
    (folder(tmp_path) / short).write_bytes((folder(tmp_path) / file).read_bytes()[:-1])
    described = folder(tmp_path) / f"{STEM}.json"
    described.write_bytes(orjson.dumps({**orjson.loads(described.read_bytes()), "file": short}))
    caplog.set_level("WARNING")
    q = unit(rng, 1)[0]
    reader = open_index(tmp_path)
    same(reader.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
    assert "cannot be used" in caplog.text
    reader.wait_for_saves()
    [file] = saved(tmp_path)  # the reader saved a whole one in its place
    assert file != short and reader._indexes["c"].shared is not None
    # of another model (as if the collection had been embedded anew): not used, nothing logged
    meta = folder(tmp_path) / f"{STEM}.json"
    meta.write_bytes(meta.read_bytes().replace(MODEL.encode(), b"other-16"))
    caplog.clear()
    fresh = open_index(tmp_path)
    token = database_token(fresh._db.connection())
    assert token is not None and fresh._matrix_files.load("c", token, MODEL, DIM) is None and not caplog.text
    same(fresh.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))  # read from the database, then saved anew
    fresh.wait_for_saves()
    [replaced] = saved(tmp_path)
    assert replaced != file and fresh._indexes["c"].shared is not None
    fresh._db.close()
    # a recreated database has no token: the file left beside it is not trusted
    index._db.close()
    reader._db.close()
    for path in (tmp_path / "db").glob("project.db*"):
        path.unlink()
    recreated = open_index(tmp_path)  # a recreated database: no token, so no file is trusted
    recreated.upsert("c", MODEL, DIM, docs(unit(rng, 100)))
    assert database_token(recreated._db.connection()) is None
    same(recreated.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
    recreated.wait_for_saves()  # then a file of its own replaces the stale one
    [own] = saved(tmp_path)
    assert own != replaced and recreated._indexes["c"].shared is not None
    recreated._db.close()


SAVE_LOCK = textwrap.dedent("""
    import sys
    from filelock import FileLock
    with FileLock(sys.argv[1]):
        print("held", flush=True)
        sys.stdin.readline()
""")


def test_while_another_process_saves_none_is_written_and_searches_go_on(tmp_path: Path, small_files: None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matrix_module, "SAVE_WAIT_S", 0.3)
    rng = np.random.default_rng(5)
    index = filled(tmp_path, unit(rng, 100))
    folder(tmp_path).mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", SAVE_LOCK, str(folder(tmp_path) / f".{STEM}.lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        q = unit(rng, 1)[0]
        same(index.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
        index.wait_for_saves()
        assert saved(tmp_path) == [] and index._indexes["c"].shared is None
        assert index._save_after["c"] > time.monotonic()  # not tried at every search
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()


def test_a_save_that_cannot_write_is_logged_and_not_tried_again_soon(tmp_path: Path, small_files: None,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    import resource

    caplog.set_level("WARNING")
    rng = np.random.default_rng(6)
    index = filled(tmp_path, unit(rng, 3000))  # ~200 KB of rows
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    q = unit(rng, 1)[0]
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
    try:
        got = index.nearest("c", q, 10, -1.0)
        index.wait_for_saves()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    same(got, truth(tmp_path, q, 10))
    assert "cannot save the matrix of collection 'c'" in caplog.text
    assert saved(tmp_path) == [] and not list(folder(tmp_path).glob(".*.tmp"))
    assert index._save_after["c"] > time.monotonic() + 60
    index.upsert("c", MODEL, DIM, docs(unit(rng, 1), start=5000))
    index.nearest("c", q, 10, -1.0)
    assert "c" not in index._saves and saved(tmp_path) == []


def test_small_collections_and_batches_save_nothing(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    index = filled(tmp_path, unit(rng, 300))  # below FILE_MIN_CHUNKS (20,000)
    index.nearest("c", unit(rng, 1)[0], 1, -1.0)
    index.wait_for_saves()
    assert saved(tmp_path) == []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matrix_module, "FILE_MIN_CHUNKS", 50)
        with pytest.raises(RuntimeError), index._db.batch():
            index.upsert("c", MODEL, DIM, docs(unit(rng, 10), start=300))
            index.nearest("c", unit(rng, 1)[0], 1, -1.0)  # inside a batch: nothing saved
            index.wait_for_saves()
            assert saved(tmp_path) == []
            raise RuntimeError("abort")


def test_a_collection_its_ann_index_serves_keeps_no_saved_matrix(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(8)
    index = saved_index(tmp_path, unit(rng, 300))
    assert saved(tmp_path)
    index.ann_min_chunks = 200
    index.upsert("c", MODEL, DIM, docs(unit(rng, 40), start=300))  # past the share: a new file would be due
    q = unit(rng, 1)[0]
    same(index.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))  # exact, and the ANN build starts
    index.wait_for_saves()
    index.ann.wait()
    assert index.ann.current("c") is not None
    assert saved(tmp_path) == [] and not (folder(tmp_path) / f"{STEM}.json").exists()


ONE_SEARCH = textwrap.dedent("""
    import sys
    import numpy as np
    from pathlib import Path
    from context_assembly.stores.sqlite import matrix
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex
    matrix.FILE_MIN_CHUNKS = 50
    index = SqliteVectorIndex(Database(Path(sys.argv[1]) / "db" / "project.db"), ann_min_chunks=None)
    q = np.ones(16, dtype=np.float32) / 4
    print(len(index.nearest("c", q, 3, -1.0)), flush=True)
    # exits at once, the save just started
""")


def test_a_process_exiting_after_one_search_leaves_its_saved_matrix_whole(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(9)
    writer = filled(tmp_path, unit(rng, 5000))
    writer._db.close()
    done = subprocess.run([sys.executable, "-c", ONE_SEARCH, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr
    [file] = saved(tmp_path)
    reader = open_index(tmp_path)
    q = unit(rng, 1)[0]
    same(reader.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
    assert reader._indexes["c"].shared is not None and reader._indexes["c"].shared.file == file


def test_a_collection_shrunk_below_the_size_saves_no_new_file(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(10)
    index = saved_index(tmp_path, unit(rng, 100))
    for doc in range(100):  # emptied (a file saved on the way down, while it still held 50)
        index.delete("c", f"d{doc}")
    index.nearest("c", unit(rng, 1)[0], 1, -1.0)
    index.wait_for_saves()
    [file] = saved(tmp_path)
    for n in range(10):  # then a chunk at a time: each past 10 % of nothing, none past the size
        index.upsert("c", MODEL, DIM, docs(unit(rng, 1), start=200 + n))
        q = unit(rng, 1)[0]
        same(index.nearest("c", q, 5, -1.0), truth(tmp_path, q, 5))
        index.wait_for_saves()
    assert saved(tmp_path) == [file]


def test_writes_made_while_a_save_runs_are_kept_over_the_saved_file(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(11)
    index = filled(tmp_path, unit(rng, 100))
    index._save_after["c"] = float("inf")  # no save of its own accord: this test starts the one it needs
    index.nearest("c", unit(rng, 1)[0], 1, -1.0)
    at_start = index._indexes["c"]
    index.upsert("c", MODEL, DIM, docs(unit(rng, 10), start=100))  # while the save of `at_start` runs
    index.delete("c", "d3")
    index._save_matrix("c", at_start)
    [file] = saved(tmp_path)
    current = index._indexes["c"]
    assert current.shared is not None and current.shared.file == file  # over the file, not read again
    assert current.size == 109 and len(current.ids) == 10 and current.shared.live == 99
    for q in unit(rng, 5):
        same(index.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))


def test_a_mapped_matrix_gives_its_file_s_rows_until_it_has_rows_of_its_own_or_masked(
        tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(65)
    index = saved_index(tmp_path, unit(rng, 300))
    held = index._indexes["c"]
    ids, rows = held.rows()
    assert isinstance(ids, np.memmap) and isinstance(rows, np.memmap) and len(ids) == 300  # no copy
    index.upsert("c", MODEL, DIM, docs(unit(rng, 1), start=300))  # a row of its own
    index.delete("c", "d0")  # and one masked
    index.nearest("c", unit(rng, 1)[0], 1, -1.0)
    ids, rows = index._indexes["c"].rows()
    assert not isinstance(ids, np.memmap) and len(ids) == len(rows) == 300 and 1 not in ids and 301 in ids


def test_rebasing_keeps_exactly_the_rows_it_held() -> None:
    rng = np.random.default_rng(12)
    rows = unit(rng, 12)
    ids = np.arange(1, 13, dtype=np.int64)
    file_rows = matrix_module.SharedRows("f", ids[:10], rows[:10])
    saved_index = matrix_module.MatrixIndex(3, MODEL, ids[:0], rows[:0], file_rows)
    held = np.array([i != 2 for i in range(12)])  # chunk 3 deleted since, 11 and 12 added
    current = matrix_module.MatrixIndex(5, MODEL, ids[held], rows[held])
    rebased = current.rebased(saved_index)
    assert rebased is not None and rebased.size == 11 and rebased.ids.tolist() == [11, 12]
    assert rebased.shared is not None and rebased.shared.gone is not None and rebased.shared.gone.tolist() == [
        i == 2 for i in range(10)]
    q = unit(rng, 1)[0]
    got, want = rebased.scores(q), current.scores(q)
    assert dict(zip(rebased.every_id.tolist(), got.tolist(), strict=True)) == {
        **dict(zip(current.every_id.tolist(), want.tolist(), strict=True)), 3: -np.inf}
    lacking = matrix_module.SharedRows("g", ids[[0, 1, 2, 4, 5, 6, 7, 8, 9]], rows[[0, 1, 2, 4, 5, 6, 7, 8, 9]])
    assert current.rebased(matrix_module.MatrixIndex(3, MODEL, ids[:0], rows[:0], lacking)) is None  # lacks 5
    assert current.rebased(matrix_module.MatrixIndex(6, MODEL, ids[:0], rows[:0], file_rows)) is None  # newer


def test_collections_differing_in_case_keep_files_apart(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(13)
    index = open_index(tmp_path)
    for name in ("c", "C"):
        index.upsert(name, MODEL, DIM, docs(unit(rng, 60)))
        index.nearest(name, unit(rng, 1)[0], 1, -1.0)
        index.wait_for_saves()
    metas = sorted(p.name for p in folder(tmp_path).glob("*.json"))
    assert len(metas) == 2 and metas[0].lower() != metas[1].lower()
    mine, other = folder(tmp_path) / f"{STEM}.json", folder(tmp_path) / f"{matrix_module.file_stem('C')}.json"
    mine.write_bytes(other.read_bytes())  # as if a file system ignoring case had let one overwrite the other
    token = database_token(index._db.connection())
    assert index._matrix_files.load("c", token, MODEL, DIM) is None


def test_a_search_inside_a_rolled_back_batch_is_neither_kept_nor_saved(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(14)
    index = saved_index(tmp_path, unit(rng, 100))
    with pytest.raises(RuntimeError), index._db.batch():
        index.upsert("c", MODEL, DIM, docs(unit(rng, 20), start=100))  # not committed
        index.nearest("c", unit(rng, 1)[0], 5, -1.0)
        raise RuntimeError("abort")
    new = unit(rng, 20)
    index.upsert("c", MODEL, DIM, docs(new, start=200))  # the rolled-back chunk ids again, other vectors
    index.wait_for_saves()
    for searcher in (index, open_index(tmp_path)):
        for v in new:  # each new chunk is its own nearest neighbour
            same(searcher.nearest("c", v, 3, -1.0), truth(tmp_path, v, 3))
        searcher.wait_for_saves()


def test_a_meta_file_that_is_not_an_object_is_logged_and_read_around(tmp_path: Path, small_files: None,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING")
    rng = np.random.default_rng(15)
    index = filled(tmp_path, unit(rng, 100))
    folder(tmp_path).mkdir(parents=True)
    (folder(tmp_path) / f"{STEM}.json").write_bytes(b"[1, 2]")
    q = unit(rng, 1)[0]
    same(index.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
    index.wait_for_saves()
    assert "cannot be used" in caplog.text and len(saved(tmp_path)) == 1  # replaced by a good one


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    """No test leaves a temp file behind."""
    yield
    if folder(tmp_path).is_dir():
        assert not [p.name for p in folder(tmp_path).iterdir() if p.name.endswith(".tmp")]


def test_a_database_restored_and_written_again_to_the_file_s_generation_ignores_it(tmp_path: Path,
                                                                                   small_files: None) -> None:
    """A database restored from an older copy and written again reuses the chunk ids above the
    copy's and can reach the generation of a matrix saved before: that file holds other embeddings
    under those ids, so it is neither mapped nor taken in place of a save."""
    rng = np.random.default_rng(41)
    first = saved_index(tmp_path / "a", unit(rng, 200))  # (the database's token made)
    first._db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = (tmp_path / "a" / "db" / "project.db").read_bytes()
    first.upsert("c", MODEL, DIM, docs(unit(rng, 30), start=200))  # 15 %: a new file is saved
    first.nearest("c", unit(rng, 1)[0], 1, -1.0)
    first.wait_for_saves()
    root = tmp_path / "restored"  # the copy restored beside the files saved since
    shutil.copytree(folder(tmp_path / "a"), folder(root))
    (root / "db" / "project.db").write_bytes(copy)
    [stale] = saved(root)
    again = open_index(root)
    again.upsert("c", MODEL, DIM, docs(unit(rng, 30), start=200))  # the same ids, other vectors
    described = orjson.loads((folder(root) / f"{STEM}.json").read_bytes())
    assert again._db.generation("vector:c") == described["generation"] and described["count"] == 230
    for q in unit(rng, 5):
        same(again.nearest("c", q, 10, -1.0), truth(root, q, 10))
    again.wait_for_saves()
    [written] = saved(root)
    assert written != stale  # its own file, not the one of the other history
    fresh = open_index(root)
    for q in unit(rng, 5):
        same(fresh.nearest("c", q, 10, -1.0), truth(root, q, 10))
    index = fresh._indexes["c"]
    assert index.shared is not None and index.shared.file == written and index.size == 230


def test_a_collection_holding_a_nan_embedding_maps_its_own_file(tmp_path: Path, small_files: None) -> None:
    """The newest rows are compared bit for bit: NaN is equal to itself there."""
    rng = np.random.default_rng(43)
    vectors = unit(rng, 120)
    vectors[-1] = np.nan
    saved_index(tmp_path, vectors)
    [file] = saved(tmp_path)
    other = open_index(tmp_path)
    other.nearest("c", vectors[0], 5, -1.0)
    index = other._indexes["c"]
    assert index.shared is not None and index.shared.file == file
    other.wait_for_saves()
    assert saved(tmp_path) == [file]


def test_a_file_tidied_away_between_its_description_and_its_mapping_is_looked_for_again(
        tmp_path: Path, small_files: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(44)
    vectors = unit(rng, 120)
    saved_index(tmp_path, vectors)
    [file] = saved(tmp_path)
    read = matrix_module.current_meta
    calls: list[int] = []

    def first_gone(path: Path) -> dict[str, object]:
        calls.append(1)
        meta = read(path)
        return {**meta, "file": f"{STEM}~tidiedaway00.f32"} if len(calls) == 1 else meta

    monkeypatch.setattr(matrix_module, "current_meta", first_gone)
    other = open_index(tmp_path)
    other.nearest("c", vectors[0], 5, -1.0)
    index = other._indexes["c"]
    assert len(calls) == 2 and index.shared is not None and index.shared.file == file


# --- a swarm's first read: one process reads the matrix whole, the others map its file ------------

SLOW_READER = textwrap.dedent("""
    import sys
    from pathlib import Path
    import numpy as np
    from context_assembly.stores.sqlite import matrix, vector
    from context_assembly.stores.sqlite.database import Database
    matrix.FILE_MIN_CHUNKS = 50
    read = vector.read_embeddings

    def told_to_go(conn, collection, dimension, **kwargs):
        if not kwargs:  # the whole read: held until the test says go
            print("reading", flush=True)
            sys.stdin.readline()
        return read(conn, collection, dimension, **kwargs)

    vector.read_embeddings = told_to_go
    index = vector.SqliteVectorIndex(Database(Path(sys.argv[1])), ann_min_chunks=None)
    index.nearest("c", np.full(16, 0.25, dtype=np.float32), 1, -1.0)
    index.wait_for_saves()
    print(index._indexes["c"].shared.file, flush=True)
""")

SWARM_MEMBER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    from context_assembly.stores.sqlite import matrix, vector
    from context_assembly.stores.sqlite.database import Database
    matrix.FILE_MIN_CHUNKS = 50
    whole = []
    read = vector.read_embeddings
    vector.read_embeddings = lambda conn, c, d, **kw: (kw or whole.append(1), read(conn, c, d, **kw))[1]
    index = vector.SqliteVectorIndex(Database(Path(sys.argv[1])), ann_min_chunks=None)
    sys.stdin.readline()
    got = index.nearest("c", np.full(16, 0.25, dtype=np.float32), 10, -1.0)
    index.wait_for_saves()
    shared = index._indexes["c"].shared
    print(json.dumps({"whole": len(whole), "file": shared and shared.file, "got": got}))
""")

TRY_LOCK = textwrap.dedent("""
    import sys
    from filelock import FileLock, Timeout
    try:
        FileLock(sys.argv[1]).acquire(timeout=0).lock.release()
        print("free")
    except Timeout:
        print("held")
""")


@pytest.fixture
def whole_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The collections this process reads whole from the table (not a catch-up's rows) from now on."""
    calls: list[str] = []

    def recorded(conn: object, collection: str, dimension: int, **kwargs: object) -> object:
        if not kwargs:
            calls.append(collection)
        return read_embeddings(conn, collection, dimension, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(vector_module, "read_embeddings", recorded)
    return calls


def first_read_lock(root: Path) -> Path:
    return folder(root) / f".{STEM}.first-read"


def unsaved_collection(root: Path, seed: int) -> tuple[np.ndarray, SqliteVectorIndex]:
    """A 300-chunk collection "c" with no matrix saved (its folder made), a query, and another
    process's index of it, not searched yet."""
    rng = np.random.default_rng(seed)
    filled(root, unit(rng, 300))
    folder(root).mkdir(parents=True)
    return unit(rng, 1)[0], open_index(root)


def searched_in_a_thread(index: SqliteVectorIndex, q: np.ndarray) -> tuple[threading.Thread, dict[str, object]]:
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.update(got=index.nearest("c", q, 10, -1.0)))
    thread.start()
    return thread, result


def test_while_another_process_reads_the_matrix_whole_a_search_waits_for_its_file_and_maps_it(
        tmp_path: Path, small_files: None, whole_reads: list[str]) -> None:
    rng = np.random.default_rng(45)
    filled(tmp_path, unit(rng, 300))
    reader = subprocess.Popen([sys.executable, "-c", SLOW_READER, str(tmp_path / "db" / "project.db")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert reader.stdin is not None and reader.stdout is not None
    try:
        assert reader.stdout.readline().strip() == "reading"  # it holds the first-read lock now
        q = unit(rng, 1)[0]
        other = open_index(tmp_path)
        thread, result = searched_in_a_thread(other, q)
        thread.join(0.5)
        assert thread.is_alive() and not whole_reads  # waiting for the reader's file, not reading
        reader.stdin.write("go\n")
        reader.stdin.flush()
        file = reader.stdout.readline().strip()
        thread.join(60)
    finally:
        reader.stdin.close()
        reader.wait(60)
    same(result["got"], truth(tmp_path, q, 10))  # type: ignore[arg-type]
    index = other._indexes["c"]
    assert not whole_reads and index.shared is not None and index.shared.file == file
    assert saved(tmp_path) == [file] and not other._claims


def test_a_reader_that_exits_without_a_file_leaves_the_read_to_the_search_waiting(
        tmp_path: Path, small_files: None, whole_reads: list[str]) -> None:
    q, other = unsaved_collection(tmp_path, 46)
    with lock_held(first_read_lock(tmp_path)):
        thread, result = searched_in_a_thread(other, q)
        thread.join(0.3)
        assert thread.is_alive()
    thread.join(60)
    same(result["got"], truth(tmp_path, q, 10))  # type: ignore[arg-type]
    other.wait_for_saves()
    assert whole_reads == ["c"] and len(saved(tmp_path)) == 1  # read and saved it itself


def test_a_reader_that_takes_too_long_is_waited_for_no_longer_than_the_limit(
        tmp_path: Path, small_files: None, whole_reads: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matrix_module, "FIRST_READ_WAIT_S", 0.2)
    q, other = unsaved_collection(tmp_path, 47)
    with lock_held(first_read_lock(tmp_path)):
        same(other.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
        assert whole_reads == ["c"]


def test_a_reader_of_a_larger_collection_is_waited_for_longer(
        tmp_path: Path, small_files: None, whole_reads: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """(1M chunks take ~7-10 s to read and ~1 GB to write: more than the 10 s a small one gets.)"""
    monkeypatch.setattr(matrix_module, "FIRST_READ_WAIT_S", 0.0)
    monkeypatch.setattr(matrix_module, "FIRST_READ_WAIT_PER_CHUNK_S", 0.1)  # 300 chunks: 30 s
    q, other = unsaved_collection(tmp_path, 51)
    with lock_held(first_read_lock(tmp_path)):
        thread, result = searched_in_a_thread(other, q)
        thread.join(0.5)
        assert thread.is_alive() and not whole_reads  # still waiting for the reader's file
    thread.join(60)  # the reader exited without one: read here
    same(result["got"], truth(tmp_path, q, 10))  # type: ignore[arg-type]
    other.wait_for_saves()
    assert whole_reads == ["c"]


def test_the_first_read_lock_is_let_go_once_the_file_is_saved_and_taken_only_for_a_file(
        tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(48)
    index = saved_index(tmp_path, unit(rng, 300))
    assert saved(tmp_path) and not index._claims
    check = [sys.executable, "-c", TRY_LOCK, str(first_read_lock(tmp_path))]
    assert subprocess.run(check, capture_output=True, text=True, check=True).stdout.strip() == "free"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matrix_module, "FILE_MIN_CHUNKS", 1000)  # now too small for a file: no lock either
        small = tmp_path / "small"
        filled(small, unit(rng, 300)).nearest("c", unit(rng, 1)[0], 1, -1.0)
        assert not first_read_lock(small).exists() and saved(small) == []


def test_processes_starting_at_once_read_the_matrix_whole_once(tmp_path: Path, small_files: None) -> None:
    rng = np.random.default_rng(49)
    filled(tmp_path, unit(rng, 3000))
    q = np.full(DIM, 0.25, dtype=np.float32)
    reports = [orjson.loads(out) for out in at_once(SWARM_MEMBER, [str(tmp_path / "db" / "project.db")], 4)]
    assert sum(r["whole"] for r in reports) == 1
    assert {r["file"] for r in reports} == set(saved(tmp_path)) and len(saved(tmp_path)) == 1
    want = truth(tmp_path, q, 10)
    for report in reports:
        same([(i, s) for i, s in report["got"]], want)


def test_a_file_saved_between_the_look_and_the_lock_is_mapped_on_a_new_database(
        tmp_path: Path, small_files: None, whole_reads: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(50)
    filled(tmp_path, unit(rng, 300))
    early, late = open_index(tmp_path), open_index(tmp_path)
    assert database_token(late._db.connection()) is None  # made by the first save, after late's first look
    claim = SqliteVectorIndex._claim_first_read

    def saved_meanwhile(self: SqliteVectorIndex, conn: object, collection: str) -> bool:
        if self is late and not saved(tmp_path):  # another process reads, saves and lets go in between
            early.nearest(collection, unit(rng, 1)[0], 1, -1.0)
            early.wait_for_saves()
        return claim(self, conn, collection)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteVectorIndex, "_claim_first_read", saved_meanwhile)
    q = unit(rng, 1)[0]
    same(late.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
    [file] = saved(tmp_path)
    index = late._indexes["c"]
    assert whole_reads == ["c"] and index.shared is not None and index.shared.file == file  # early's read alone


def test_a_search_waiting_for_another_process_s_file_holds_up_none_of_this_process_s_saves(
        tmp_path: Path, small_files: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(51)
    index = filled(tmp_path, unit(rng, 300))
    index.upsert("y", MODEL, DIM, docs(unit(rng, 300)))
    save = matrix_module.MatrixFiles.save

    def slow_save(self: matrix_module.MatrixFiles, *args: object, **kwargs: object) -> object:
        time.sleep(0.3)  # still saving when the search of "y" begins to wait
        return save(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(matrix_module.MatrixFiles, "save", slow_save)
    folder(tmp_path).mkdir(parents=True)
    check = [sys.executable, "-c", TRY_LOCK, str(first_read_lock(tmp_path))]
    with lock_held(folder(tmp_path) / f".{matrix_module.file_stem('y')}.first-read"):
        index.nearest("c", unit(rng, 1)[0], 1, -1.0)  # read whole: it holds "c"'s lock until its file is named
        assert "c" in index._saves
        other = threading.Thread(target=index.nearest, args=("y", unit(rng, 1)[0], 1, -1.0))
        other.start()
        index.wait_for_saves(5)
        # "c"'s file is named and its lock let go while this process still waits for "y"'s
        assert saved(tmp_path) and other.is_alive()
        assert subprocess.run(check, capture_output=True, text=True, check=True).stdout.strip() == "free"
    other.join(60)


def test_where_the_matrix_folder_cannot_be_made_searches_answer_and_nothing_is_claimed(
        tmp_path: Path, small_files: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING")
    rng = np.random.default_rng(52)
    index = filled(tmp_path, unit(rng, 300))
    folder(tmp_path).write_text("a file where the folder would be")
    q = unit(rng, 1)[0]
    same(index.nearest("c", q, 10, -1.0), truth(tmp_path, q, 10))
    index.wait_for_saves()
    assert not index._claims and "cannot save the matrix of collection 'c'" in caplog.text
