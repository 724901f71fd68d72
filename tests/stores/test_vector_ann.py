"""The embedded vector store's ANN index: agrees with exact search, persists, stays in step with
writes from any process, survives corruption and a crash mid-save, and is optional."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.saved_files import file_stem
from context_assembly.stores.sqlite.vector import SqliteVectorIndex, SqliteVectorStore
from context_assembly.stores.vector_index import IndexedDoc
from context_assembly.workspace.layout import WorkspaceLayout

from .processes import at_once, lock_held

DIM = 16
MODEL = "test-16"
STEM = file_stem("c")  # the collection's name in file names
NEVER = None  # ann_min_chunks of an index that always searches exactly, never through a persisted ANN


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def docs(vectors: np.ndarray, start: int = 0) -> list[IndexedDoc]:
    return [IndexedDoc(f"d{start + i}", f"text {start + i}", "{}", (f"text {start + i}",), v[None, :])
            for i, v in enumerate(vectors)]


def open_index(root: Path, ann_min_chunks: int | None = 1) -> SqliteVectorIndex:
    return SqliteVectorIndex(Database(root / "db" / "project.db"), ann_min_chunks=ann_min_chunks)


def with_exact(root: Path, seed: int) -> tuple[np.ndarray, SqliteVectorIndex, SqliteVectorIndex]:
    """300 random vectors written as collection "c" by an index (no ANN index built yet), that
    index, and one that searches exactly."""
    vectors = unit(np.random.default_rng(seed), 300)
    index = open_index(root)
    index.upsert("c", MODEL, DIM, docs(vectors))
    return vectors, index, open_index(root, NEVER)


def built(root: Path, vectors: np.ndarray) -> SqliteVectorIndex:
    """An index of `vectors` (docs d0...) with its ANN index built and saved."""
    index = open_index(root)
    index.upsert("c", MODEL, DIM, docs(vectors))
    assert index.build_ann("c")
    return index


@pytest.fixture
def fold_at_40(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold is due after 40 changes (not 2,000)."""
    from context_assembly.stores.sqlite import vector_ann

    monkeypatch.setattr(vector_ann, "SAVE_MIN", 40)


def ann_files(root: Path) -> list[Path]:
    return sorted((root / "db" / "vector-ann").glob("*"))


def agree(index: SqliteVectorIndex, exact: SqliteVectorIndex, queries: np.ndarray, k: int = 10,
          min_recall: float = 0.9) -> None:
    """What the ANN promises against true exact search: only live chunks, each with its exact cosine,
    best first, as many as exact search finds, and nearly all of exact search's top k (HNSW is
    approximate; with candidates re-scored it misses a neighbour now and then on these small random
    sets, and the graph a multi-threaded build makes differs from run to run), so one miss is allowed
    however few neighbours were asked for."""
    hits = total = 0
    for q in queries:
        got, want = index.nearest("c", q, k, -1.0), exact.nearest("c", q, k, -1.0)
        every = dict(exact.nearest("c", q, 10**6, -1.0))
        assert len(got) == len(want)
        assert all(i in every and abs(s - every[i]) <= 1e-6 for i, s in got)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        hits += len({i for i, _ in got} & {i for i, _ in want})
        total += len(want)
    # at least min_recall of them, and never fail on a single miss among a handful (k = 1 on five
    # queries would otherwise demand 100%)
    assert total - hits <= max(1, (1 - min_recall) * total), f"recall {hits}/{total}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 250), deletes=st.integers(0, 40), k=st.integers(1, 20), seed=st.integers(0, 2**32 - 1))
def test_ann_agrees_with_exact_search_on_small_sets(n: int, deletes: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        index = open_index(root)
        index.upsert("c", MODEL, DIM, docs(unit(rng, n)))
        assert index.build_ann("c")
        for doc in rng.choice(n, min(deletes, n), replace=False):
            index.delete("c", f"d{doc}")
        index.upsert("c", MODEL, DIM, docs(unit(rng, 5), start=n))
        ann = index.ann.current("c")
        assert ann is not None and ann.viewed  # the writes since the save lie beside the view
        agree(index, open_index(root, NEVER), unit(rng, 5), k)


def test_deleted_chunks_never_come_back(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    vectors = unit(rng, 600)
    index = open_index(tmp_path)
    index.upsert("c", MODEL, DIM, docs(vectors))
    assert index.build_ann("c") and ann_files(tmp_path)
    gone = list(range(0, 600, 3))
    for doc in gone:
        index.delete("c", f"d{doc}")
    # the saved file predates most deletes: a new process catches up from the table
    for reader in (index, open_index(tmp_path)):
        for doc in gone[:50]:
            found = {i for i, _ in reader.nearest("c", vectors[doc], 10, -1.0)}
            assert found and doc + 1 not in found  # chunk id = doc + 1
        assert reader.ann.current("c") is not None
        agree(reader, open_index(tmp_path, NEVER), vectors[gone[:20]])


def test_the_index_persists_and_catches_up_with_other_writers(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    first = open_index(tmp_path)
    first.upsert("c", MODEL, DIM, docs(unit(rng, 400)))
    assert first.build_ann("c")
    other = open_index(tmp_path)  # another process: loads the saved index, then writes
    assert other.ann.current("c") is not None
    other.upsert("c", MODEL, DIM, docs(unit(rng, 50), start=400))
    other.delete("c", "d7")
    other.upsert("c", MODEL, DIM, docs(unit(rng, 1), start=3))  # replaced: new chunk id
    exact = open_index(tmp_path, NEVER)
    for reader in (first, other, open_index(tmp_path)):
        agree(reader, exact, unit(rng, 10))
        ann = reader.ann.current("c")
        assert ann is not None and len(ann) == 449


def mapped_files() -> set[str]:
    """The files this process has memory-mapped (Linux: /proc/self/maps)."""
    return {line.split(maxsplit=5)[5].strip() for line in Path("/proc/self/maps").read_text().splitlines()
            if len(line.split(maxsplit=5)) == 6}


def test_a_loaded_index_is_a_shared_view_and_writes_go_beside_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(21)
    vectors = unit(rng, 800)
    index = built(tmp_path, vectors)
    [data] = [p for p in ann_files(tmp_path) if p.suffix == ".usearch"]
    saved = data.read_bytes()
    reader = open_index(tmp_path)  # another process
    for current in (index, reader):  # the builder too lets go of the graph it built for the view
        ann = current.ann.current("c")
        assert ann is not None and ann.viewed and ann.file == data.name
    if sys.platform.startswith("linux"):
        assert str(data) in mapped_files()  # mapped, so every process shares its pages
    # the nearest neighbours of a query deleted: the view must not run short of live candidates
    q = vectors[0]
    nearest = [i for i, _ in open_index(tmp_path, NEVER).nearest("c", q, 60, -1.0)]
    for chunk in nearest:
        reader.delete("c", f"d{chunk - 1}")  # chunk id = doc + 1
    reader.upsert("c", MODEL, DIM, docs(unit(rng, 30), start=800))
    for current in (reader, index):  # its own writes, and another process's caught up
        ann = current.ann.current("c")
        assert ann is not None and ann.viewed and len(ann) == 800 - 60 + 30
        assert len(ann.hidden) == 60 and ann.delta is not None and len(ann.delta) == 30
        assert not set(nearest) & {i for i, _ in current.nearest("c", q, 10, -1.0)}
        agree(current, open_index(tmp_path, NEVER), np.vstack([q[None, :], unit(rng, 6)]))
    assert data.read_bytes() == saved  # a view is never written


def test_a_view_finds_live_neighbours_behind_many_deleted_ones(tmp_path: Path) -> None:
    rng = np.random.default_rng(27)
    vectors = unit(rng, 2000)
    index = built(tmp_path, vectors)
    q = vectors[0]
    exact = open_index(tmp_path, NEVER)
    crowd = [i for i, _ in exact.nearest("c", q, 450, -1.0)]  # more than twice the candidates asked for
    for chunk in crowd:
        index.delete("c", f"d{chunk - 1}")
    ann = index.ann.current("c")
    assert ann is not None and ann.viewed and len(ann.hidden) == 450
    got = index.nearest("c", q, 10, -1.0)
    assert len(got) == 10 and not {i for i, _ in got} & set(crowd)
    agree(index, exact, q[None, :])


def test_changes_past_a_share_fold_into_a_new_file_every_process_views(tmp_path: Path, fold_at_40: None) -> None:
    rng = np.random.default_rng(22)
    index = built(tmp_path, unit(rng, 1000))
    other = open_index(tmp_path)
    first = other.ann.current("c")
    assert first is not None and first.viewed
    for doc in range(25):
        other.delete("c", f"d{doc}")
    other.upsert("c", MODEL, DIM, docs(unit(rng, 25), start=1000))  # 50 changes: past SAVE_MIN
    other.ann.wait()  # the fold runs in the background, in a process of its own
    files = [p.name for p in ann_files(tmp_path) if p.suffix == ".usearch"]
    assert len(files) == 1 and files[0] != first.file  # the older file tidied away
    exact = open_index(tmp_path, NEVER)
    for reader in (other, index, open_index(tmp_path)):
        ann = reader.ann.current("c")
        assert ann is not None and ann.viewed and ann.file == files[0]
        assert len(ann) == 1000 and not ann.hidden and ann.delta is None  # all in the new file
        agree(reader, exact, unit(rng, 6))
    assert not list((tmp_path / "db" / "vector-ann").glob(".fold-*"))  # the hand-over file is gone


def test_a_process_behind_a_newer_file_views_it_instead_of_folding(tmp_path: Path, fold_at_40: None) -> None:
    rng = np.random.default_rng(23)
    writer, behind = open_index(tmp_path), open_index(tmp_path)
    writer.upsert("c", MODEL, DIM, docs(unit(rng, 500)))
    assert writer.build_ann("c")
    old = behind.ann.current("c")
    assert old is not None
    writer.upsert("c", MODEL, DIM, docs(unit(rng, 60), start=500))
    writer.ann.wait()
    [newer] = [p.name for p in ann_files(tmp_path) if p.suffix == ".usearch"]
    assert newer != old.file
    # `behind` catches the same 60 chunks up from the table: past SAVE_MIN, but a newer file exists
    ann = behind.ann.current("c")
    behind.ann.wait()
    assert [p.name for p in ann_files(tmp_path) if p.suffix == ".usearch"] == [newer]  # no second fold
    ann = behind.ann.current("c")
    assert ann is not None and ann.file == newer and len(ann) == 560
    agree(behind, open_index(tmp_path, NEVER), unit(rng, 5))


def fold_lock_held(root: Path, collection: str = "c", kind: str = "fold") -> AbstractContextManager[None]:
    """Another process holding the collection's save and fold lock (or `kind` "build": its build
    lock) meanwhile."""
    return lock_held(root / "db" / "vector-ann" / f".{file_stem(collection)}.{kind}-lock")


def test_while_another_process_folds_a_process_keeps_its_view(tmp_path: Path, fold_at_40: None) -> None:
    rng = np.random.default_rng(25)
    index = built(tmp_path, unit(rng, 400))
    viewed = index.ann.current("c")
    assert viewed is not None
    with fold_lock_held(tmp_path):
        index.upsert("c", MODEL, DIM, docs(unit(rng, 50), start=400))  # past SAVE_MIN: a fold is due
        index.ann.wait()
        assert index.ann.current("c") is viewed  # not folded, not let go: the other's file comes next
        assert viewed.unsaved == 0  # tried again after as many changes more, not at every write
        assert [p.name for p in ann_files(tmp_path) if p.suffix == ".usearch"] == [viewed.file]
        agree(index, open_index(tmp_path, NEVER), unit(rng, 5))
    index.upsert("c", MODEL, DIM, docs(unit(rng, 40), start=450))  # as many changes more: folded now
    index.ann.wait()
    ann = index.ann.current("c")
    assert ann is not None and ann.file != viewed.file and len(ann) == 490 and ann.delta is None


SWARM_MEMBER = textwrap.dedent("""
    import logging, sys
    import numpy as np
    from pathlib import Path
    from context_assembly.stores.sqlite import vector_ann
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex
    from context_assembly.stores.vector_index import IndexedDoc
    logging.basicConfig(level=logging.WARNING)
    vector_ann.SAVE_MIN, vector_ann.SAVE_SHARE = 30, 0.0  # a fold every 30 changes: many, racing
    root, member = Path(sys.argv[1]), int(sys.argv[2])
    index = SqliteVectorIndex(Database(root / "db" / "project.db"), ann_min_chunks=1)
    rng = np.random.default_rng(member)
    mine = []
    for step in range(40):
        v = rng.standard_normal((8, 16)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        uris = [f"m{member}-{step}-{i}" for i in range(8)]
        index.upsert("c", "test-16", 16, [IndexedDoc(u, "t", "{}", ("t",), r[None, :]) for u, r in zip(uris, v)])
        mine += uris
        for uri in rng.choice(mine, 3, replace=False):
            index.delete("c", str(uri))
        found = index.nearest("c", v[0], 5, -1.0)
        assert found, "a search found nothing"
    index.ann.wait()
    print("done", flush=True)
""")


def test_a_swarm_writing_and_searching_at_once_keeps_one_index_in_step(tmp_path: Path) -> None:
    rng = np.random.default_rng(32)
    index = built(tmp_path, unit(rng, 500))
    first = index.ann.current("c")
    assert first is not None
    members = [subprocess.Popen([sys.executable, "-c", SWARM_MEMBER, str(tmp_path), str(member)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for member in range(3)]
    for member in members:
        out, err = member.communicate(timeout=300)
        assert member.returncode == 0 and out.strip() == "done", err
        assert "cannot" not in err and "Traceback" not in err, err  # no save or fold failed
    count = index._db.read("SELECT count(*) FROM vector_chunks WHERE collection = 'c'")[0][0]
    exact = open_index(tmp_path, NEVER)
    for reader in (index, open_index(tmp_path)):
        ann = reader.ann.current("c")
        assert ann is not None and ann.viewed and len(ann) == count
        agree(reader, exact, unit(rng, 10))
    left = sorted(p.name for p in ann_files(tmp_path) if not p.name.endswith("-lock"))
    assert len(left) == 2 and left[0] == f"{STEM}.json" and left[1].endswith(".usearch"), left  # the one it names
    assert left[1] != first.file  # folded, by one member or another


def test_a_fold_that_cannot_write_leaves_the_view_serving(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import resource

    caplog.set_level("WARNING")
    rng = np.random.default_rng(26)
    index = built(tmp_path, unit(rng, 3000))
    index.upsert("c", MODEL, DIM, docs(unit(rng, 20), start=3000))
    ann = index.ann.current("c")
    assert ann is not None and ann.unsaved == 20
    [before] = [p.name for p in ann_files(tmp_path) if p.suffix == ".usearch"]
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))  # the fold process cannot write the index file
    try:
        index.ann._save("c", ann, force=True, background=False)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "cannot fold the changes of collection 'c'" in caplog.text
    assert index.ann.current("c") is ann and ann.unsaved == 0  # tried again after as many changes more
    assert [p.name for p in ann_files(tmp_path) if p.suffix == ".usearch"] == [before]
    assert not list((tmp_path / "db" / "vector-ann").glob(f"{STEM}~*.usearch.*")) and not list(
        (tmp_path / "db" / "vector-ann").glob(".fold-*"))
    agree(index, open_index(tmp_path, NEVER), unit(rng, 5))


SHADOW = "open(__file__ + '.ran', 'w').close()\nraise ImportError('a module of the user\\'s project')\n"


def test_a_fold_imports_nothing_from_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        fold_at_40: None) -> None:
    rng = np.random.default_rng(29)
    project = tmp_path / "project"
    project.mkdir()
    index = built(tmp_path, unit(rng, 300))
    viewed = index.ann.current("c")
    assert viewed is not None
    for folder in (project, tmp_path / "db" / "vector-ann"):  # the server's working folder, the fold's
        for name in ("filelock.py", "orjson.py", "numpy.py"):
            (folder / name).write_text(SHADOW)
    monkeypatch.chdir(project)
    index.upsert("c", MODEL, DIM, docs(unit(rng, 40), start=300))
    index.ann.wait()
    ann = index.ann.current("c")
    assert ann is not None and ann.file != viewed.file and len(ann) == 340
    assert not list(tmp_path.rglob("*.ran"))


def test_a_save_never_names_an_older_index_and_waits_for_the_lock(tmp_path: Path) -> None:
    from filelock import Timeout

    from context_assembly.stores.sqlite.ann import new_ann

    rng = np.random.default_rng(30)
    index = open_index(tmp_path)
    vectors = unit(rng, 300)
    index.upsert("c", MODEL, DIM, docs(vectors))
    assert index.build_ann("c")
    ann = index.ann.current("c")
    assert ann is not None
    meta = tmp_path / "db" / "vector-ann" / f"{STEM}.json"
    named = meta.read_bytes()
    late = new_ann(MODEL, DIM, ann.token, ann.generation - 1)  # a build that started before the last write
    late.add(np.arange(1, 300, dtype=np.int64), vectors[:299])
    assert not index.ann._files.save("c", late)
    assert meta.read_bytes() == named
    assert [p.name for p in ann_files(tmp_path) if p.suffix == ".usearch"] == [ann.file]
    with fold_lock_held(tmp_path), pytest.raises(Timeout):
        index.ann._files.save("c", new_ann(MODEL, DIM, ann.token, ann.generation), wait=0.2)
    assert meta.read_bytes() == named


def test_a_save_tidies_what_interrupted_processes_left(tmp_path: Path) -> None:
    rng = np.random.default_rng(31)
    index = open_index(tmp_path)
    index.upsert("c", MODEL, DIM, docs(unit(rng, 300)))
    folder = tmp_path / "db" / "vector-ann"
    folder.mkdir(parents=True)
    old, fresh = folder / ".fold-0123456789ab.npz", folder / ".fold-ba9876543210.npz"
    tmp_json = folder / ".c~0123456789ab.usearch.json.tmp"
    for path in (old, fresh, tmp_json):
        path.write_bytes(b"left by a process that was killed")
    hours_ago = time.time() - 2 * 3600
    for path in (old, tmp_json):
        os.utime(path, (hours_ago, hours_ago))
    assert index.build_ann("c")
    assert not old.exists() and not tmp_json.exists()
    assert fresh.exists()  # may be another process's fold starting now


@pytest.mark.skipif(os.name != "posix", reason="a mapped file cannot be unlinked on Windows")
def test_a_fold_of_a_file_gone_meanwhile_saves_nothing(tmp_path: Path) -> None:
    from context_assembly.stores.sqlite.ann_fold import fold

    rng = np.random.default_rng(24)
    index = built(tmp_path, unit(rng, 200))
    ann = index.ann.current("c")
    assert ann is not None and ann.file is not None
    (tmp_path / "db" / "vector-ann" / ann.file).unlink()  # as a newer save tidies it away
    none = np.empty(0, dtype=np.int64)
    assert fold(index.ann._files, "c", ann, ann.generation, ann.max_id, none, none,
                np.empty((0, DIM), dtype=np.float32))
    assert [p.name for p in ann_files(tmp_path) if not p.name.startswith(".")] == [f"{STEM}.json"]
    agree(index, open_index(tmp_path, NEVER), unit(rng, 5))  # the mapping still reads the unlinked file


def test_an_index_saved_under_the_earlier_names_is_used_then_replaced(tmp_path: Path, fold_at_40: None) -> None:
    import orjson

    rng = np.random.default_rng(34)
    built(tmp_path, unit(rng, 300))
    folder = tmp_path / "db" / "vector-ann"
    [data] = [p for p in ann_files(tmp_path) if p.suffix == ".usearch"]
    meta = folder / f"{STEM}.json"
    legacy = data.rename(folder / f"c~{data.name.split('~', 1)[1]}")  # as an earlier version named them
    (folder / "c.json").write_bytes(orjson.dumps({**orjson.loads(meta.read_bytes()), "file": legacy.name}))
    meta.unlink()
    reader = open_index(tmp_path)
    ann = reader.ann.current("c")
    assert ann is not None and ann.viewed and ann.file == legacy.name  # used as it is: no rebuild
    reader.upsert("c", MODEL, DIM, docs(unit(rng, 40), start=300))  # a fold: saved under the stem
    reader.ann.wait()
    names = sorted(p.name for p in ann_files(tmp_path) if not p.name.startswith("."))
    assert len(names) == 2 and names[0] == f"{STEM}.json" and names[1].startswith(f"{STEM}~"), names
    agree(reader, open_index(tmp_path, NEVER), unit(rng, 5))


def test_a_corrupt_index_file_is_rebuilt(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    built(tmp_path, unit(rng, 300))  # (its file viewed here: a damaged one is named instead of rewriting it)
    described, damaged = tmp_path / "db" / "vector-ann" / f"{STEM}.json", f"{STEM}~corrupt00000.usearch"
    (described.parent / damaged).write_bytes(b"not an index" * 100)
    described.write_bytes(orjson.dumps({**orjson.loads(described.read_bytes()), "file": damaged}))
    fresh = open_index(tmp_path)
    queries = unit(rng, 5)
    agree(fresh, open_index(tmp_path, NEVER), queries)  # exact while the index is rebuilt
    fresh.ann.wait()
    assert fresh.ann.current("c") is not None
    agree(open_index(tmp_path), open_index(tmp_path, NEVER), queries)


def test_a_description_that_is_not_an_object_is_rebuilt_around(tmp_path: Path) -> None:
    rng = np.random.default_rng(33)
    built(tmp_path, unit(rng, 300))
    [meta] = [p for p in ann_files(tmp_path) if p.suffix == ".json"]
    meta.write_bytes(b"[1, 2]")
    fresh = open_index(tmp_path)
    queries = unit(rng, 5)
    agree(fresh, open_index(tmp_path, NEVER), queries, min_recall=1.0)  # exact while it is rebuilt
    fresh.ann.wait()
    assert fresh.ann.current("c") is not None


def test_an_index_built_with_earlier_parameters_is_rebuilt(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    built(tmp_path, unit(rng, 300))
    [meta] = [p for p in ann_files(tmp_path) if p.suffix == ".json"]
    meta.write_bytes(meta.read_bytes().replace(b'"format":2', b'"format":1'))
    fresh = open_index(tmp_path)
    assert fresh.ann.current("c") is None  # format 1 (ef_construction 48) is not used
    queries = unit(rng, 5)
    agree(fresh, open_index(tmp_path, NEVER), queries, min_recall=1.0)  # exact while it is rebuilt
    fresh.ann.wait()
    assert fresh.ann.current("c") is not None
    assert b'"format":2' in meta.read_bytes()


def test_an_index_from_a_recreated_database_is_not_trusted(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    old = open_index(tmp_path)
    old.upsert("c", MODEL, DIM, docs(unit(rng, 300)))
    assert old.build_ann("c")
    old._db.close()
    for path in (tmp_path / "db").glob("project.db*"):
        path.unlink()
    new = open_index(tmp_path)
    new.upsert("c", MODEL, DIM, docs(unit(rng, 300)))  # same ids, other vectors
    assert new.ann.current("c") is None
    agree(new, open_index(tmp_path, NEVER), unit(rng, 5))


def test_a_large_collection_gets_its_index_in_the_background(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    index = open_index(tmp_path, ann_min_chunks=200)
    index.upsert("c", MODEL, DIM, docs(unit(rng, 150)))
    index.nearest("c", unit(rng, 1)[0], 5, -1.0)
    index.ann.wait()
    assert index.ann.current("c") is None and not ann_files(tmp_path)  # small: exact only
    index.upsert("c", MODEL, DIM, docs(unit(rng, 100), start=150))
    index.nearest("c", unit(rng, 1)[0], 5, -1.0)  # exact, and starts the build
    index.ann.wait()
    assert index.ann.current("c") is not None and ann_files(tmp_path)
    assert "c" not in index._indexes  # the matrix is released once the index serves
    agree(index, open_index(tmp_path, NEVER), unit(rng, 5))


def test_a_rolled_back_batch_leaves_the_index_in_step(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    index = built(tmp_path, unit(rng, 300))
    with pytest.raises(RuntimeError), index._db.batch():
        index.upsert("c", MODEL, DIM, docs(unit(rng, 20), start=300))
        index.delete("c", "d5")
        raise RuntimeError("abort")
    index.upsert("c", MODEL, DIM, docs(unit(rng, 20), start=400))  # may reuse the rolled-back chunk ids
    agree(index, open_index(tmp_path, NEVER), unit(rng, 5))
    ann = index.ann.current("c")
    assert ann is not None and len(ann) == 320


def test_a_search_inside_a_rolled_back_batch_leaves_the_index_in_step(tmp_path: Path) -> None:
    rng = np.random.default_rng(28)
    index = built(tmp_path, unit(rng, 300))
    with pytest.raises(RuntimeError), index._db.batch():
        index.upsert("c", MODEL, DIM, docs(unit(rng, 20), start=300))  # not committed
        index.nearest("c", unit(rng, 1)[0], 5, -1.0)  # a search inside the batch does not take them in
        raise RuntimeError("abort")
    new = unit(rng, 20)
    index.upsert("c", MODEL, DIM, docs(new, start=400))  # the rolled-back chunk ids again, other vectors
    index.upsert("c", MODEL, DIM, docs(unit(rng, 1), start=500))
    exact = open_index(tmp_path, NEVER)
    for reader in (index, open_index(tmp_path)):
        for v in new:  # each new chunk is its own nearest neighbour
            assert reader.nearest("c", v, 1, -1.0) == exact.nearest("c", v, 1, -1.0)
        ann = reader.ann.current("c")
        assert ann is not None and len(ann) == 321


def test_a_k_beyond_the_ann_limit_is_answered_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    index = built(tmp_path, unit(rng, 1500))
    q = unit(rng, 1)[0]
    assert index.nearest("c", q, 1200, -1.0) == open_index(tmp_path, NEVER).nearest("c", q, 1200, -1.0)


SAVER = textwrap.dedent("""
    import sys
    import numpy as np
    from pathlib import Path
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex
    from context_assembly.stores.vector_index import IndexedDoc
    index = SqliteVectorIndex(Database(Path(sys.argv[1]) / "db" / "project.db"), ann_min_chunks=1)
    ann = index.ann.current("c")
    rng = np.random.default_rng(9)
    n = 10_000
    print("ready", flush=True)
    while True:  # writes and folds until killed
        v = rng.standard_normal((1, 16)).astype(np.float32)
        v /= np.linalg.norm(v)
        index.upsert("c", "test-16", 16, [IndexedDoc(f"d{n}", "t", "{}", ("t",), v)])
        index.ann._save("c", index.ann.current("c"), force=True, background=False)
        n += 1
""")


def test_a_crash_mid_save_leaves_a_usable_index(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    index = open_index(tmp_path)
    index.upsert("c", MODEL, DIM, docs(unit(rng, 20_000)))
    assert index.build_ann("c")
    proc = subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(3)  # several folds of a 20k-vector index: the kill lands mid-save or between two
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the writer and the fold process it waits on
        proc.wait()
    reader = open_index(tmp_path)
    queries = unit(rng, 5)
    agree(reader, open_index(tmp_path, NEVER), queries)
    reader.ann.wait()
    assert reader.ann.current("c") is not None
    agree(reader, open_index(tmp_path, NEVER), queries)


MISSING = textwrap.dedent("""
    import sys
    sys.modules["usearch"] = None  # the optional dependency is not installed
    sys.modules["usearch.index"] = None
    from context_assembly.stores.embedding import HASHING
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex, SqliteVectorStore
    from context_assembly.workspace.layout import WorkspaceLayout
    layout = WorkspaceLayout(sys.argv[1])
    store = SqliteVectorStore(Database(layout.db_path), layout.vectordb_dir, default_model=HASHING)
    store.index = SqliteVectorIndex(Database(layout.db_path), ann_min_chunks=10)
    store.upsert_many("c", [(f"d{i}", f"document {i} about topic {i % 7}", {}) for i in range(50)])
    hits = store.search("c", "document 3 about topic 3", top_k=3)
    print(hits[0]["doc_uri"], store.index.build_ann("c"))
""")


def test_without_usearch_search_is_exact_and_says_so(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", MISSING, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["d3", "False"]
    assert "usearch is not installed" in done.stderr
    assert not (tmp_path / ".codebolt" / "db" / "vector-ann").exists()


def test_the_store_searches_through_the_index(tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path)
    store = SqliteVectorStore.for_workspace(layout, default_model="hashing-256")
    store.upsert_many("c", [(f"d{i}", f"note {i} on subject {i % 11} and item {i}", {}) for i in range(300)])
    exact = {mode: store.search("c", "subject 4 item 15", top_k=10, mode=mode) for mode in ("vector", "hybrid")}
    assert store.index.build_ann("c")
    for mode, hits in exact.items():
        got = store.search("c", "subject 4 item 15", top_k=10, mode=mode)
        # chunks tied at the cut may differ (the index breaks ties its own way); scores may not
        assert [h["score"] for h in got] == [h["score"] for h in hits]
        above = [h for h in hits if h["score"] > hits[-1]["score"]]
        assert got[:len(above)] == above


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR")


def test_an_index_of_another_history_under_the_same_chunk_ids_is_rebuilt(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A database restored from an older copy and written again reuses the chunk ids above the
    copy's: the index saved before holds other vectors under them, and is not used."""
    import shutil

    rng = np.random.default_rng(44)
    first = built(tmp_path / "a", unit(rng, 500))  # (the database's token made)
    first._db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = (tmp_path / "a" / "db" / "project.db").read_bytes()
    first.upsert("c", MODEL, DIM, docs(unit(rng, 30), start=500))
    assert first.build_ann("c")  # saved again: chunks 501-530
    root = tmp_path / "restored"  # the copy restored beside the files saved since
    shutil.copytree(tmp_path / "a" / "db" / "vector-ann", root / "db" / "vector-ann")
    (root / "db" / "project.db").write_bytes(copy)
    again = open_index(root)
    fresh = unit(rng, 30)
    again.upsert("c", MODEL, DIM, docs(fresh, start=500))  # the same ids, other vectors
    with caplog.at_level("WARNING"):
        for n, vector in enumerate(fresh):
            assert again.nearest("c", vector, 1, -1.0)[0][0] == 501 + n  # each chunk is its own nearest
    assert "holds other vectors than the table" in caplog.text
    again.ann.wait()
    for reader in (again, open_index(root)):
        ann = reader.ann.current("c")
        assert ann is not None and len(ann) == 530
        agree(reader, open_index(root, NEVER), fresh[:10])


def test_a_build_replaces_an_index_of_a_generation_the_database_never_reached(tmp_path: Path,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    import shutil

    rng = np.random.default_rng(45)
    first = built(tmp_path / "a", unit(rng, 500))
    first._db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = (tmp_path / "a" / "db" / "project.db").read_bytes()
    first.upsert("c", MODEL, DIM, docs(unit(rng, 15), start=500))
    first.upsert("c", MODEL, DIM, docs(unit(rng, 15), start=515))
    assert first.build_ann("c")  # named: two writes past the copy
    root = tmp_path / "restored"
    shutil.copytree(tmp_path / "a" / "db" / "vector-ann", root / "db" / "vector-ann")
    (root / "db" / "project.db").write_bytes(copy)
    stale = orjson.loads((root / "db" / "vector-ann" / f"{STEM}.json").read_bytes())
    again = open_index(root)
    again.upsert("c", MODEL, DIM, docs(unit(rng, 10), start=500))  # one write: behind the file named
    assert again._db.generation("vector:c") < stale["generation"]
    again.nearest("c", unit(rng, 1)[0], 5, -1.0)  # not of this history: rebuilt, and saved
    again.ann.wait()
    named = orjson.loads((root / "db" / "vector-ann" / f"{STEM}.json").read_bytes())
    assert named["file"] != stale["file"] and named["count"] == 510
    caplog.clear()
    with caplog.at_level("WARNING"):
        fresh = open_index(root)
        ann = fresh.ann.current("c")
    assert ann is not None and ann.viewed and ann.file == named["file"] and not caplog.text
    agree(fresh, open_index(root, NEVER), unit(rng, 5))


def test_while_another_process_builds_the_index_a_process_searches_exactly_and_then_views_it(
        tmp_path: Path) -> None:
    vectors, index, exact = with_exact(tmp_path, 46)
    with fold_lock_held(tmp_path, kind="build"):
        for q in vectors[:5]:
            assert index.nearest("c", q, 10, -1.0) == exact.nearest("c", q, 10, -1.0)
        index.ann.wait()
        assert index.ann.current("c") is None and not ann_files(tmp_path)[1:]  # nothing built or saved here
        assert [p.name for p in ann_files(tmp_path)] == [f".{STEM}.build-lock"]
        other = open_index(tmp_path)  # the builder: saves its index while the lock is (still) held elsewhere
        assert other.build_ann("c") is False
    builder = open_index(tmp_path)
    assert builder.build_ann("c")
    index.nearest("c", vectors[0], 10, -1.0)  # the other's file, viewed: no build of its own
    ann = index.ann.current("c")
    assert ann is not None and ann.viewed and ann.file == builder.ann.current("c").file  # type: ignore[union-attr]
    agree(index, exact, vectors[5:10])


def matrix_files(root: Path) -> list[str]:
    """The saved matrices (exact search's) of collection "c", and their description."""
    folder = root / "db" / "vector-matrix"
    return sorted(p.name for p in folder.glob(f"{STEM}*") if not p.name.startswith(".")) if folder.is_dir() else []


@pytest.fixture
def small_matrix_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Matrices of 50 chunks and more are saved (not 20,000)."""
    from context_assembly.stores.sqlite import matrix

    monkeypatch.setattr(matrix, "FILE_MIN_CHUNKS", 50)


def test_a_process_that_searched_exactly_while_another_built_the_index_lets_its_matrix_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only the builder: at 1M chunks each such matrix is ~1 GB of a process's own."""
    from context_assembly.stores.sqlite import vector_ann

    vectors, index, exact = with_exact(tmp_path, 56)
    with fold_lock_held(tmp_path, kind="build"):
        assert index.nearest("c", vectors[0], 10, -1.0) == exact.nearest("c", vectors[0], 10, -1.0)
        index.ann.wait()
        assert "c" in index._indexes  # searched from its matrix meanwhile
    assert open_index(tmp_path).build_ann("c")  # the other process's index, saved
    agree(index, exact, vectors[5:10])  # through that index now
    assert "c" not in index._indexes
    monkeypatch.setattr(vector_ann, "BUILD_BUSY_S", 0.0)  # (its own build asked for again at once)
    index.ann._built_elsewhere.clear()
    builds: list[int] = []
    run = vector_ann.AnnSearch._build_locked
    monkeypatch.setattr(vector_ann.AnnSearch, "_build_locked", lambda self, *args: (builds.append(1), run(self, *args)))
    q = vectors[1]  # more than an ANN proposes: exact, from the matrix read again and kept for the next
    for _ in range(2):
        assert index.nearest("c", q, 1001, -1.0) == exact.nearest("c", q, 1001, -1.0)
        index.ann.wait()
    agree(index, exact, vectors[10:12])
    assert "c" in index._indexes and builds == []  # no index built anew for them


def test_while_another_process_builds_the_index_the_matrix_is_saved_for_every_process_and_goes_once_built(
        tmp_path: Path, small_matrix_files: None) -> None:
    rng = np.random.default_rng(57)
    vectors = unit(rng, 300)
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(vectors))
    exact = open_index(tmp_path, NEVER)
    first, second = open_index(tmp_path), open_index(tmp_path)
    with fold_lock_held(tmp_path, kind="build"):
        assert first.nearest("c", vectors[0], 10, -1.0) == exact.nearest("c", vectors[0], 10, -1.0)
        first.wait_for_saves()
        first.ann.wait()
        saved = [name for name in matrix_files(tmp_path) if name.endswith(".f32")]
        assert len(saved) == 1 and first.ann.current("c") is None
        assert second.nearest("c", vectors[1], 10, -1.0) == exact.nearest("c", vectors[1], 10, -1.0)
        second.ann.wait()  # (its build found the lock held)
        for process in (first, second):  # the file's rows mapped, none of their own
            held = process._indexes["c"]
            assert held.shared is not None and held.shared.file == saved[0] and len(held.ids) == 0
    assert open_index(tmp_path).build_ann("c")
    assert matrix_files(tmp_path) == []  # the builder removed it
    for process in (first, second):
        agree(process, exact, vectors[5:8])
        assert "c" not in process._indexes


def test_a_build_after_a_save_of_the_matrix_reads_the_file_s_rows_not_a_copy(
        tmp_path: Path, small_matrix_files: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1M chunks the rows read to be saved are ~1 GB of the process's own: they go once the file
    is there, and the minutes of the build read the file's pages, which every process shares."""
    from context_assembly.stores.sqlite import vector_ann

    rng = np.random.default_rng(64)
    vectors = unit(rng, 300)
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(vectors))
    built_from: list[tuple[np.ndarray, np.ndarray]] = []
    run = vector_ann.AnnSearch._build_locked
    monkeypatch.setattr(vector_ann.AnnSearch, "_build_locked",
                        lambda self, collection, index: (built_from.append(index.rows()), run(self, collection, index)))
    index = open_index(tmp_path)
    index.nearest("c", vectors[0], 10, -1.0)  # read whole, saved, then built
    index.wait_for_saves()
    index.ann.wait()
    assert len(built_from) == 1 and all(isinstance(rows, np.memmap) for rows in built_from[0])
    assert index.ann.current("c") is not None
    agree(index, open_index(tmp_path, NEVER), vectors[1:4])


def test_a_build_left_to_a_save_that_meets_writes_of_this_process_still_reads_the_file(
        tmp_path: Path, small_matrix_files: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from context_assembly.stores.sqlite import vector_ann
    from context_assembly.stores.sqlite.matrix import MatrixFiles

    rng = np.random.default_rng(66)
    vectors = unit(rng, 300)
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(vectors))
    gate, save = threading.Event(), MatrixFiles.save
    monkeypatch.setattr(MatrixFiles, "save",
                        lambda files, *args, **kwargs: (gate.wait(60), save(files, *args, **kwargs))[1])
    built_from: list[tuple[np.ndarray, np.ndarray]] = []
    run = vector_ann.AnnSearch._build_locked
    monkeypatch.setattr(vector_ann.AnnSearch, "_build_locked",
                        lambda self, collection, index: (built_from.append(index.rows()), run(self, collection, index)))
    index = open_index(tmp_path)
    index.nearest("c", vectors[0], 10, -1.0)  # read whole, its save held up: the build left to it
    index.upsert("c", MODEL, DIM, docs(unit(rng, 2), start=300))  # a write of its own meanwhile
    gate.set()
    index.wait_for_saves()
    index.ann.wait()
    assert len(built_from) == 1 and all(isinstance(rows, np.memmap) for rows in built_from[0])
    agree(index, open_index(tmp_path, NEVER), vectors[1:4])  # the two written since caught up
    assert len(index.ann.current("c") or []) == 302


def test_a_save_no_search_asked_a_build_of_starts_none(tmp_path: Path, small_matrix_files: None) -> None:
    """A process that only writes (an import) past the size of an index builds none of its own."""
    rng = np.random.default_rng(67)
    vectors = unit(rng, 300)
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(vectors))
    index = open_index(tmp_path, ann_min_chunks=320)
    index.nearest("c", vectors[0], 10, -1.0)  # 300 chunks: exact, its matrix saved
    index.wait_for_saves()
    index.upsert("c", MODEL, DIM, docs(unit(rng, 40), start=300))  # 340, and past the share: saved again
    index.wait_for_saves()
    index.ann.wait()
    assert index.ann.current("c") is None and not [p for p in ann_files(tmp_path) if p.suffix == ".usearch"]
    assert len([name for name in matrix_files(tmp_path) if name.endswith(".f32")]) == 1  # (the new file)


def test_a_process_searching_exactly_once_the_index_is_saved_saves_no_matrix(
        tmp_path: Path, small_matrix_files: None) -> None:
    rng = np.random.default_rng(58)
    vectors = unit(rng, 300)
    exact = open_index(tmp_path, NEVER)
    exact.upsert("c", MODEL, DIM, docs(vectors))
    q = vectors[2]
    want = exact.nearest("c", q, 1001, -1.0)
    exact.wait_for_saves()  # (its matrix saved: the build below removes it)
    assert open_index(tmp_path).build_ann("c") and matrix_files(tmp_path) == []
    late = open_index(tmp_path)
    assert late.nearest("c", q, 1001, -1.0) == want
    late.wait_for_saves()
    assert matrix_files(tmp_path) == []


def test_a_matrix_saved_after_the_index_was_built_is_removed_again(
        tmp_path: Path, small_matrix_files: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The save ran while another process's build ended (its removal found no file yet)."""
    from context_assembly.stores.sqlite.matrix import MatrixFiles, MatrixIndex
    from context_assembly.stores.sqlite.stored_embeddings import read_embeddings
    from context_assembly.stores.sqlite.vector_ann import collection_store

    rng = np.random.default_rng(59)
    vectors = unit(rng, 300)
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(vectors))
    index = open_index(tmp_path)
    save = MatrixFiles.save

    built: list[bool] = []

    def built_meanwhile(files: MatrixFiles, *args: object, **kwargs: object) -> object:
        builder = open_index(tmp_path)  # its matrix read as its own search would, without a lock
        ids, rows = read_embeddings(builder._db.connection(), "c", DIM)
        built.append(builder.ann.build_now("c", MatrixIndex(builder._db.generation(collection_store("c")),
                                                            MODEL, ids, rows)))
        return save(files, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MatrixFiles, "save", built_meanwhile)
    monkeypatch.setattr(index.ann, "start_build", lambda *args, **kwargs: None)  # (the other process builds)
    index.nearest("c", vectors[0], 10, -1.0)
    index.wait_for_saves()
    assert built == [True] and (tmp_path / "db" / "vector-matrix").is_dir()  # a save ran, after the build
    assert matrix_files(tmp_path) == []
    held = index._indexes.get("c")
    assert held is None or held.shared is None  # not the removed file's rows
    agree(index, open_index(tmp_path, NEVER), vectors[3:6])


def test_while_an_index_found_unusable_is_rebuilt_the_matrix_is_shared_and_let_go_again(
        tmp_path: Path, small_matrix_files: None) -> None:
    rng = np.random.default_rng(60)
    vectors = unit(rng, 300)
    built(tmp_path, vectors)
    index = open_index(tmp_path)
    index.nearest("c", vectors[0], 10, -1.0)
    assert index.ann.current("c") is not None  # served
    index.ann._anns.pop("c")  # found unusable, as a failed catch-up leaves it
    index.ann._unusable["c"] = index.ann._named("c")
    with fold_lock_held(tmp_path, kind="build"):  # another process rebuilds it meanwhile
        got = index.nearest("c", vectors[2], 10, -1.0)
        index.wait_for_saves()  # (the save starts the build the search asked for)
        index.ann.wait()  # (which found the lock held)
        held = index._indexes["c"]  # saved here (no other process searched), then mapped
        assert held.shared is not None and [name for name in matrix_files(tmp_path) if name.endswith(".f32")]
    assert open_index(tmp_path).build_ann("c")
    index.nearest("c", vectors[3], 10, -1.0)
    assert "c" not in index._indexes and matrix_files(tmp_path) == []
    exact = open_index(tmp_path, NEVER)
    assert got == exact.nearest("c", vectors[2], 10, -1.0)
    agree(index, exact, vectors[4:6])


def test_a_matrix_file_a_killed_save_left_unnamed_goes_once_the_index_is_built(
        tmp_path: Path, small_matrix_files: None) -> None:
    from context_assembly.stores.sqlite.matrix import MatrixIndex
    from context_assembly.stores.sqlite.stored_embeddings import read_embeddings
    from context_assembly.stores.sqlite.vector_ann import collection_store

    rng = np.random.default_rng(61)
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(unit(rng, 300)))
    folder = tmp_path / "db" / "vector-matrix"
    folder.mkdir(parents=True)
    (folder / f"{STEM}~0123456789ab.f32").write_bytes(b"\0" * 64)  # written, never named: no description
    builder = open_index(tmp_path)  # (its matrix read without a save of its own, which would tidy it too)
    ids, rows = read_embeddings(builder._db.connection(), "c", DIM)
    assert builder.ann.build_now("c", MatrixIndex(builder._db.generation(collection_store("c")), MODEL, ids, rows))
    assert matrix_files(tmp_path) == []


EXITS_WHILE_BUILDING = textwrap.dedent("""
    import logging, sys, time
    from pathlib import Path
    import numpy as np
    from context_assembly.stores.sqlite import ann, vector_ann
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex
    logging.basicConfig(level=logging.INFO)
    vector_ann.BUILD_BATCH = 10  # (many adds: the exit comes in the middle of the build)
    index = SqliteVectorIndex(Database(Path(sys.argv[1]) / "db" / "project.db"), ann_min_chunks=1)
    index.nearest("c", np.ones(16, dtype=np.float32) / 4.0, 5, -1.0)  # the build starts in a thread
    adding, until = sys.argv[2] == "adding", time.monotonic() + (30.0 if sys.argv[2] == "adding" else 1.0)
    while not (adding and ann._calls) and time.monotonic() < until:  # exits once it adds, or after a second
        time.sleep(0.0005)
""")


def test_a_process_exiting_while_its_build_runs_stops_it_and_exits_cleanly(tmp_path: Path) -> None:
    """(A process leaving while usearch adds or searches in another thread aborts: exit status 134.)"""
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(unit(np.random.default_rng(62), 3000)))
    done = subprocess.run([sys.executable, "-c", EXITS_WHILE_BUILDING, str(tmp_path), "adding"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # (without the wait: -6 nearly every time, "terminate called ...")
    assert "Traceback" not in done.stderr
    assert not [p for p in ann_files(tmp_path) if p.suffix == ".usearch"]  # the next process builds it
    assert built(tmp_path / "next", unit(np.random.default_rng(62), 300)).ann.current("c") is not None


def test_a_process_exiting_while_its_build_waits_to_save_does_not_wait_with_it(tmp_path: Path) -> None:
    """Another process saving or folding the collection's index holds the lock the save waits for
    (a minute at most): the exit waits for no lock, only for usearch calls running."""
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(unit(np.random.default_rng(63), 300)))
    with fold_lock_held(tmp_path):
        done = subprocess.run([sys.executable, "-c", EXITS_WHILE_BUILDING, str(tmp_path), "a second"],
                              capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert not [p for p in ann_files(tmp_path) if p.suffix == ".usearch"]


RACING_BUILDER = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    import numpy as np
    from context_assembly.stores.sqlite import vector_ann
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex
    built = []
    run = vector_ann.AnnSearch._build_locked
    vector_ann.AnnSearch._build_locked = lambda self, *args: (built.append(1), run(self, *args))
    vector_ann.BUILD_BUSY_S = 0.0
    index = SqliteVectorIndex(Database(Path(sys.argv[1]) / "db" / "project.db"), ann_min_chunks=1)
    q = np.ones(16, dtype=np.float32) / 4.0
    sys.stdin.readline()  # all started: search at once
    while index.ann.current("c") is None:
        index.nearest("c", q, 5, -1.0)
        index.ann.wait()
    print(len(built), flush=True)
""")


def test_processes_crossing_the_size_together_build_the_index_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(47)
    open_index(tmp_path, NEVER).upsert("c", MODEL, DIM, docs(unit(rng, 3000)))
    builds = [int(out) for out in at_once(RACING_BUILDER, [str(tmp_path)], 4)]
    assert sum(builds) == 1, builds  # one built and saved it; the others view its file
    assert len([p for p in ann_files(tmp_path) if p.suffix == ".usearch"]) == 1


def test_a_build_asked_for_before_another_process_saved_its_index_views_that_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other process saved between this one finding no index and its build taking the lock."""
    from context_assembly.stores.sqlite import vector_ann

    rng = np.random.default_rng(48)
    index = open_index(tmp_path)
    index.upsert("c", MODEL, DIM, docs(unit(rng, 300)))
    assert index.ann.current("c") is None  # none yet: a search would read the matrix, then ask for a build
    matrix = index._index("c")
    assert matrix is not None
    builder = open_index(tmp_path)
    assert builder.build_ann("c")  # another process's build, saved meanwhile
    builds: list[int] = []
    run = vector_ann.AnnSearch._build_locked
    monkeypatch.setattr(vector_ann.AnnSearch, "_build_locked", lambda self, *args: (builds.append(1), run(self, *args)))
    index.ann.start_build("c", matrix, background=False)
    ann, saved = index.ann.current("c"), builder.ann.current("c")
    assert builds == [] and ann is not None and saved is not None and ann.viewed and ann.file == saved.file
    assert index.build_ann("c") and builds == [1]  # asked anew: built


def test_a_build_whose_lock_file_cannot_be_made_builds_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(49)
    vectors = unit(rng, 300)
    index = open_index(tmp_path)
    index.upsert("c", MODEL, DIM, docs(vectors))
    (tmp_path / "db" / "vector-ann").write_text("a file where the folder goes")
    with caplog.at_level("WARNING"):
        assert index.build_ann("c")  # in memory: its save cannot be written
    assert "cannot save the ANN index" in caplog.text and "Traceback" not in caplog.text
    agree(index, open_index(tmp_path, NEVER), vectors[:5])


def test_a_process_whose_build_ended_without_a_file_leaves_the_build_to_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from context_assembly.stores.sqlite import vector_ann

    monkeypatch.setattr(vector_ann, "BUILD_BUSY_S", 0.0)  # (asked again at the next search)
    rng = np.random.default_rng(50)
    vectors = unit(rng, 300)
    index = open_index(tmp_path)
    index.upsert("c", MODEL, DIM, docs(vectors))
    with fold_lock_held(tmp_path, kind="build"):  # it builds, then exits without saving
        index.nearest("c", vectors[0], 10, -1.0)
        index.ann.wait()
        assert index.ann.current("c") is None
    index.nearest("c", vectors[0], 10, -1.0)  # nobody builds: this one does
    index.ann.wait()
    ann = index.ann.current("c")
    assert ann is not None and ann.viewed
    agree(index, open_index(tmp_path, NEVER), vectors[:5])


def test_an_index_saved_in_the_same_clock_tick_as_an_unusable_one_is_viewed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system whose clock is coarse (1-2 s) gives both descriptions the same time."""
    from context_assembly.stores.sqlite.ann import AnnFiles

    monkeypatch.setattr(AnnFiles, "meta_mtime", lambda self, collection: 1.0)
    rng = np.random.default_rng(51)
    vectors = unit(rng, 300)
    built(tmp_path, vectors)
    described, damaged = tmp_path / "db" / "vector-ann" / f"{STEM}.json", f"{STEM}~damaged00000.usearch"
    (described.parent / damaged).write_bytes(b"damaged")  # (the file viewed stays whole)
    described.write_bytes(orjson.dumps({**orjson.loads(described.read_bytes()), "file": damaged}))
    reader = open_index(tmp_path)
    assert reader.ann.current("c") is None  # unusable: not read again until another is named
    assert open_index(tmp_path).build_ann("c")  # named now: another file, "saved at the same time"
    ann = reader.ann.current("c")
    assert ann is not None and ann.viewed
    agree(reader, open_index(tmp_path, NEVER), vectors[:5])
