"""What the files saved beside the database share (stores.sqlite.saved_files): the description
read again when a save tidied its file away meanwhile, block writes that leave nothing half
written, names that keep collections differing in case apart, one lock per collection."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from context_assembly.stores.sqlite import saved_files


def describe(folder: Path, name: str) -> None:
    (folder / name).write_bytes(b"data")
    (folder / "c.json").write_bytes(orjson.dumps({"file": name}))


def test_a_description_whose_file_was_tidied_away_meanwhile_is_read_again(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Between a reader's read of the description and its look at the file, another process saves
    a newer file, names it and removes the old one: the reader takes the new description."""
    describe(tmp_path, "old.bin")
    read = saved_files.read_meta
    reads: list[str] = []

    def racing(path: Path) -> dict[str, Any]:
        meta = read(path)
        reads.append(str(meta["file"]))
        if len(reads) == 1:  # the other process's save lands right after this read
            describe(tmp_path, "new.bin")
            (tmp_path / "old.bin").unlink()
        return meta

    monkeypatch.setattr(saved_files, "read_meta", racing)
    assert saved_files.current_meta(tmp_path / "c.json") == {"file": "new.bin"}
    assert reads == ["old.bin", "new.bin"]


def test_a_description_whose_file_is_there_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    describe(tmp_path, "kept.bin")
    read = saved_files.read_meta
    reads: list[Path] = []
    monkeypatch.setattr(saved_files, "read_meta", lambda path: reads.append(path) or read(path))
    assert saved_files.current_meta(tmp_path / "c.json") == {"file": "kept.bin"}
    assert len(reads) == 1


@pytest.mark.parametrize("content", [b"[1, 2]", b"\"text\"", b"3", b"null"])
def test_a_description_that_is_not_an_object_is_refused(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "c.json").write_bytes(content)
    with pytest.raises(ValueError, match="not a JSON object"):
        saved_files.current_meta(tmp_path / "c.json")


def test_arrays_are_written_one_after_the_other_in_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(saved_files, "WRITE_BLOCK", 7)  # many blocks, one ending mid-item
    arrays = [np.arange(11, dtype="<i8"), np.linspace(0, 1, 5, dtype="<f4").reshape(5, 1), np.zeros(0, "<i4"),
              np.frombuffer(b"words", dtype=np.uint8)]
    saved_files.write_arrays(tmp_path / "a.bin", arrays)
    assert (tmp_path / "a.bin").read_bytes() == b"".join(a.tobytes() for a in arrays)


@contextmanager
def file_size_limit(size: int) -> Iterator[None]:
    """Writes past `size` bytes fail with EFBIG (Python ignores SIGXFSZ; POSIX only)."""
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_write_that_fails_leaves_no_file(tmp_path: Path) -> None:
    with file_size_limit(64 * 1024), pytest.raises(OSError, match="too large"):
        saved_files.write_arrays(tmp_path / "a.bin", [np.arange(3), np.zeros(1 << 20, np.uint8)])
    assert list(tmp_path.iterdir()) == []


def test_collections_differing_in_case_have_files_and_locks_of_their_own(tmp_path: Path) -> None:
    names = ["Docs", "docs", "DOCS", "d~x", "日本"]
    stems = [saved_files.file_stem(name) for name in names]
    assert len({stem.casefold() for stem in stems}) == len(names)
    locks = saved_files.CollectionLocks(tmp_path / "locks", ".lock")
    assert locks("docs") is locks("docs") and locks("docs") is not locks("Docs")
    assert {Path(locks(name).lock_file).name for name in names} == {f".{stem}.lock" for stem in stems}
    with locks("docs"), locks("docs"):  # the holder may take it again
        pass
