"""A pipeline whose note names are templates is cached without fingerprinting the notes folder: the
run records the notes it read and a hit holds while they keep their stamps. Whatever happens to the
notes between assemblies, the cached path answers what a fresh run answers."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import unstructure
from context_assembly.runtime import Runtime

from ..workspace.builder import write
from .test_engine import SCOPES, always, definition, engine

NOTES = ("a", "b", "c")
# the note the request names; then, depending on what that read found, one note or another
PIPELINE = [
    {"type": "markdown_read", "note": "${addVar.note}"},
    {"type": "conditional", "condition": {"field": "items.count", "operator": "gte", "value": 1},
     "then_steps": [{"type": "markdown_read", "note": "c"}],
     "else_steps": [{"type": "markdown_read", "note": "b"}]},
]


class Clock:
    """Distinct mtimes for successive edits, as edits at different moments have (an edit that keeps
    a note's size within one clock tick is invisible to any stamp, with or without this cache)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000_000_000

    def touch(self, path: Path) -> None:
        self.now += 1_000_000
        os.utime(path, ns=(self.now, self.now))


def make_workspace(root: Path) -> Path:
    write(root, "PersistentMemory/picked.json", definition("picked", PIPELINE))
    write(root, "context-rule-engines/main.json", engine([always(["picked"])]))
    write(root, "context-assembly.json", {"cache_ttl_s": 3600})
    (root / ".codebolt/memory").mkdir(parents=True, exist_ok=True)
    return root


def assemble(rt: Runtime, note: str) -> dict[str, Any]:
    request = {"scope_variables": SCOPES, "input": {"text": "t"}, "additional_variables": {"note": note}}
    result = unstructure(rt.assemble(request))
    call = next(c for c in result["trace"]["memory_calls"] if c["reference"] == "picked")
    items = [(i["source"], i["content"]) for i in result["context"]["knowledge"] if i["memory_id"] == "picked"]
    return {"status": call["status"], "items": items}


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = Runtime(make_workspace(tmp_path))
    yield rt
    rt.close()


def test_a_templated_note_is_cached_and_an_edit_by_hand_misses(runtime: Runtime) -> None:
    memory = runtime.root / ".codebolt/memory"
    (memory / "a.md").write_text("Alpha.")
    (memory / "c.md").write_text("Gamma.")
    assert assemble(runtime, "a")["status"] == "ok"
    assert assemble(runtime, "a") == {"status": "cached", "items": [("markdown://a", "Alpha."),
                                                                     ("markdown://c", "Gamma.")]}
    with open(memory / "c.md", "a") as note:  # in place, as an editor might: no folder mtime moves
        note.write(" Edited by hand.")
    assert assemble(runtime, "a") == {"status": "ok", "items": [("markdown://a", "Alpha."),
                                                                 ("markdown://c", "Gamma. Edited by hand.")]}


def test_a_note_created_where_the_run_found_none_misses(runtime: Runtime) -> None:
    assert assemble(runtime, "x") == {"status": "ok", "items": []}  # neither x nor b exists
    assert assemble(runtime, "x")["status"] == "cached"
    (runtime.root / ".codebolt/memory/b.md").write_text("Beta.")
    assert assemble(runtime, "x") == {"status": "ok", "items": [("markdown://b", "Beta.")]}


def test_notes_the_run_did_not_read_do_not_matter(runtime: Runtime) -> None:
    (runtime.root / ".codebolt/memory/a.md").write_text("Alpha.")
    assemble(runtime, "a")
    (runtime.root / ".codebolt/memory/b.md").write_text("Beta, never read for note a.")
    assert assemble(runtime, "a")["status"] == "cached"


def test_a_run_that_lists_notes_is_not_cached(runtime: Runtime) -> None:
    from context_assembly.assembly.notes_read import RecordingStores

    stores = RecordingStores(runtime.stores)
    stores.notes.read("a")
    assert stores.exact and [name for name, _, _ in stores.stamps] == ["a"]
    stores.notes.list()
    assert not stores.exact


EDITS = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NOTES), st.text("xyz. ", min_size=1, max_size=12)),
    st.tuples(st.just("append"), st.sampled_from(NOTES), st.text("xyz. ", min_size=0, max_size=3)),
    st.tuples(st.just("delete"), st.sampled_from(NOTES), st.just("")),
    st.tuples(st.just("assemble"), st.sampled_from((*NOTES, "missing")), st.just("")),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(EDITS, min_size=1, max_size=14))
def test_the_cached_path_answers_what_a_fresh_run_answers(operations: list[tuple[str, str, str]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = make_workspace(Path(folder))
        memory, clock = root / ".codebolt/memory", Clock()
        cached, plain = Runtime(root), Runtime(root)
        try:
            for kind, note, text in operations:
                path = memory / f"{note}.md"
                if kind == "assemble":
                    plain.cache.clear()
                    fresh = assemble(plain, note)
                    assert fresh["status"] == "ok"
                    assert assemble(cached, note)["items"] == fresh["items"]
                elif kind == "delete":
                    path.unlink(missing_ok=True)
                else:
                    with open(path, "w" if kind == "write" else "a") as handle:
                        handle.write(text)
                    clock.touch(path)
        finally:
            cached.close()
            plain.close()


def test_a_stamped_read_is_a_read_and_a_stamp(runtime: Runtime) -> None:
    notes, memory = runtime.memory.notes, runtime.root / ".codebolt/memory"
    (memory / "a.md").write_text("Alpha.")
    (memory / "folder.md").mkdir()
    for name in ("a", "folder", "missing"):
        assert notes.read_stamped(name) == (notes.read(name), notes.stamp([name])[0])
