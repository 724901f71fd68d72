"""Names at the edges of the URI layer: what `memory/list` shows is what `memory/read` and
`memory/delete` act on, and odd names get a clear refusal, never an internal error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.stores.memory import MemoryRouter


@pytest.fixture
def memory(tmp_path: Path) -> MemoryRouter:
    (tmp_path / ".codebolt" / "memory").mkdir(parents=True)
    return MemoryRouter(tmp_path)


def _uris(memory: MemoryRouter, prefix: str) -> list[str]:
    return [item["uri"] for item in memory.list(prefix)["items"]]


def test_a_note_whose_name_ends_in_md_is_listed_read_and_deleted_as_itself(memory: MemoryRouter,
                                                                             tmp_path: Path) -> None:
    notes = tmp_path / ".codebolt" / "memory"
    (notes / "x.md.md").write_text("the note x.md")
    (notes / "x.md").write_text("the note x")
    assert _uris(memory, "markdown://") == ["markdown://x", "markdown://x.md.md"]
    assert memory.read("markdown://x.md.md")["value"] == "the note x.md"
    assert memory.read("markdown://x.md")["value"] == "the note x"  # one written `.md` is dropped
    assert memory.delete("markdown://x.md.md") == {"uri": "markdown://x.md.md", "deleted": True}
    assert sorted(os.listdir(notes)) == ["x.md"]  # the note x is still there
    memory.write("markdown://y.md.md", "written")
    assert (notes / "y.md.md").read_text() == "written"


def test_files_no_name_can_read_are_not_listed_and_do_not_break_the_list(memory: MemoryRouter,
                                                                          tmp_path: Path) -> None:
    notes = tmp_path / ".codebolt" / "memory"
    (notes / "ok.md").write_text("x")
    for name in (b"caf\xe9.md", b"v:1.md", b"a\\b.md", b"tab\there.md"):
        (Path(os.fsdecode(os.path.join(os.fsencode(notes), name)))).write_bytes(b"x")
    (Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"r\xe9sum\xe9.txt")))).write_bytes(b"x")
    listed = _uris(memory, "markdown://")
    assert listed == ["markdown://ok"]
    assert all(memory.read(uri)["exists"] for uri in listed)
    assert "file://.codebolt/" in _uris(memory, "file://")  # the file no URI names is left out, not fatal


def test_a_note_name_past_the_file_system_limit_is_refused_clearly(memory: MemoryRouter, tmp_path: Path) -> None:
    longest = "a" * 252  # with `.md`, the 255 bytes a file name holds; the atomic write's temp file fits too
    assert memory.write(f"markdown://{longest}", "x")["written"] is True
    assert memory.read(f"markdown://{longest}")["value"] == "x"
    assert f"markdown://{longest}" in _uris(memory, "markdown://")
    (tmp_path / ".codebolt" / "memory" / ("é" * 126 + ".md")).write_text("by hand")  # 252 bytes
    assert memory.read("markdown://" + "é" * 126)["value"] == "by hand"
    for call in (lambda uri: memory.read(uri), lambda uri: memory.write(uri, "x"), lambda uri: memory.delete(uri)):
        with pytest.raises(InvalidParamsError) as refused:
            call("markdown://" + "a" * 253)
        assert "more than 252 bytes" in refused.value.message
    with pytest.raises(InvalidParamsError):
        memory.write("markdown://" + "é" * 127, "x")  # 254 bytes
    assert memory.delete(f"markdown://{longest}")["deleted"] is True


def test_deleting_a_note_below_a_note_is_nothing_deleted(memory: MemoryRouter) -> None:
    memory.write("markdown://x", "note")
    assert memory.read("markdown://x.md/y")["exists"] is False
    assert memory.delete("markdown://x.md/y") == {"uri": "markdown://x.md/y", "deleted": False}


@pytest.mark.parametrize(("uri", "exists"), [("log://audit/99999999999999999999", False),
                                              ("log://audit/9223372036854775807", False), ("log://audit/1", True)])
def test_an_event_id_out_of_range_is_not_found(memory: MemoryRouter, uri: str, exists: bool) -> None:
    memory.write("log://audit", {"event_type": "e"})
    assert memory.read(uri)["exists"] is exists


@pytest.mark.parametrize("digit", ["%C2%B2", "%D9%A1"])
def test_an_event_id_in_other_digits_is_refused(memory: MemoryRouter, digit: str) -> None:
    memory.write("log://audit", {"event_type": "e"})
    with pytest.raises(InvalidParamsError):
        memory.read(f"log://audit/{digit}")


def test_a_narrow_file_prefix_finds_its_file_in_a_big_folder(memory: MemoryRouter, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for n in range(1200):
        (data / f"a{n:04}.txt").write_text("x")
    (data / "zeta.txt").write_text("x")
    assert _uris(memory, "file://data/zeta") == ["file://data/zeta.txt"]
    assert len(_uris(memory, "file://data/")) == 1000  # a folder lists its first 1,000 entries


def test_a_listed_uri_always_reads_back(memory: MemoryRouter) -> None:
    memory.write("blob://b/" + "日" * 600, "aGk=")
    [uri] = _uris(memory, "blob://")
    assert len(uri) > 5000 and memory.read(uri)["exists"] is True


@pytest.mark.parametrize(("encoded", "plain"), [
    ("json://a%2F", "json://a/"), ("blob://bk/dir%2F", "blob://bk/dir/"), ("working://t/x%2F", "working://t/x/"),
    ("markdown://n%2F", "markdown://n/")])
def test_a_slash_in_a_prefix_lists_alike_however_it_is_written(memory: MemoryRouter, encoded: str,
                                                               plain: str) -> None:
    memory.write("json://a/b", 1)
    memory.write("blob://bk/dir/file", "aGk=")
    memory.write("working://t/x/y", 1)
    memory.write("markdown://n/z", "x")
    assert _uris(memory, encoded) == _uris(memory, plain) != []


def test_a_slash_stays_encoded_where_render_encodes_it(memory: MemoryRouter) -> None:
    memory.write("working://t%2F1/k", 1)
    memory.write("working://t/k", 2)
    assert _uris(memory, "working://t%2F1/") == ["working://t%2F1/k"]
    assert _uris(memory, "working://t/") == ["working://t/k"]


@pytest.mark.parametrize("since", ["nan", "inf", "-inf"])
def test_a_since_that_is_no_time_is_refused(memory: MemoryRouter, since: str) -> None:
    with pytest.raises(InvalidParamsError):
        memory.read(f"log://audit?since={since}")


def test_log_and_thread_reads_page_back_with_before(memory: MemoryRouter) -> None:
    for n in range(30):
        memory.write("log://paged", {"event_type": "tick", "n": n})
        memory.write("episodic://paged", {"role": "user", "content": str(n)})
    newest = memory.read("log://paged?limit=20")["value"]
    older = memory.read(f"log://paged?limit=20&before={newest[-1]['id']}")["value"]
    assert [e["payload"]["n"] for e in newest + older] == list(range(29, -1, -1))
    turns = memory.read("episodic://paged?limit=20")["value"]
    earlier = memory.read(f"episodic://paged?limit=20&before={turns[0]['seq']}")["value"]
    assert [int(t["content"]) for t in earlier + turns] == list(range(30))
    for bad in ("log://paged?before=x", "log://paged?before=-1", "episodic://paged?before=%C2%B2",
                "log://paged?before=999999"):
        with pytest.raises(InvalidParamsError):
            memory.read(bad)
