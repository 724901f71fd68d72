"""A long-lived loader trusts its inotify watch only as far as it can: every change under
`.codebolt/` made before a load is seen by that load, exactly as a loader that stats every file."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.runtime import Runtime
from context_assembly.workspace import changes
from context_assembly.workspace.loader import Workspace, WorkspaceLoader

from .builder import memory, write

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def engine(engine_id: str, rules: int, tag: str = "") -> dict[str, Any]:
    return {"id": engine_id, "rules": [{"id": f"r{i}{tag}", "when": [], "then": {"add_memories": [f"m{i}"]}}
                                       for i in range(rules)]}


def bump(path: Path) -> None:
    """A later mtime, as a later write gets (tests run faster than the file system's clock ticks)."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def summary(workspace: Workspace) -> Any:
    return (sorted((e, [r.id for r in engine.rules]) for e, engine in workspace.engines.items()),
            sorted(workspace.memories), workspace.settings.max_tokens)


def fresh(root: Path) -> Any:
    return summary(WorkspaceLoader(root).load())


@linux_only
def test_nothing_changed_is_answered_without_a_scan(tmp_path: Path) -> None:
    write(tmp_path, "context-rule-engines/e.json", engine("e", 1))
    loader = WorkspaceLoader(tmp_path)
    first = loader.load()
    assert loader.load() is first  # the second load arms the watch
    watch = loader._watch
    assert watch is not None and watch.available and watch.armed
    assert watch.unchanged()  # what the next load asks before anything else
    assert loader.load() is first


def test_an_edit_in_place_is_seen_by_the_next_load(tmp_path: Path) -> None:
    path = write(tmp_path, "context-rule-engines/e.json", engine("e", 1))
    loader = WorkspaceLoader(tmp_path)
    loader.load()
    loader.load()
    with path.open("w") as fh:  # no rename: the folder's own mtime does not change
        fh.write('{"id": "e", "rules": []}')
    bump(path)
    assert loader.load().engines["e"].rules == []


def test_a_definition_folder_created_later_is_watched(tmp_path: Path) -> None:
    loader = WorkspaceLoader(tmp_path)  # not even .codebolt/ exists yet
    assert loader.load().engines == {}
    assert loader.load().engines == {}
    write(tmp_path, "context-rule-engines/e.json", engine("e", 2))
    assert [r.id for r in loader.load().engines["e"].rules] == ["r0", "r1"]
    write(tmp_path, "knowledgegraph/views/v.json", {"id": "v"})  # two levels below .codebolt/
    assert list(loader.load().graph_views) == ["v"]
    write(tmp_path, "knowledgegraph/views/w.json", {"id": "w"})
    assert sorted(loader.load().graph_views) == ["v", "w"]


def test_the_settings_file_is_watched(tmp_path: Path) -> None:
    write(tmp_path, "context-rule-engines/e.json", engine("e", 1))
    loader = WorkspaceLoader(tmp_path)
    loader.load()
    loader.load()
    (tmp_path / ".codebolt" / "context-assembly.json").write_text('{"max_tokens": 1234}')
    assert loader.load().settings.max_tokens == 1234


def test_a_linked_definition_file_is_stat_ed_on_every_load(tmp_path: Path) -> None:
    """A change of a link's target is no event of the watched folder: the loader scans instead."""
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"id": "e", "rules": []}')
    folder = tmp_path / "ws" / ".codebolt" / "context-rule-engines"
    folder.mkdir(parents=True)
    (folder / "e.json").symlink_to(outside)
    loader = WorkspaceLoader(tmp_path / "ws")
    loader.load()
    loader.load()
    assert loader._watch is not None and not loader._watch.unchanged()
    outside.write_text('{"id": "e", "rules": [{"id": "r", "when": [], "then": {}}]}')
    bump(outside)
    assert [r.id for r in loader.load().engines["e"].rules] == ["r"]


def test_the_watch_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(changes.ENVIRONMENT, "0")
    path = write(tmp_path, "context-rule-engines/e.json", engine("e", 1))
    loader = WorkspaceLoader(tmp_path)
    loader.load()
    loader.load()
    assert loader._watch is not None and not loader._watch.available
    path.write_text('{"id": "e", "rules": []}')
    bump(path)
    assert loader.load().engines["e"].rules == []


@linux_only
def test_closing_the_runtime_releases_the_inotify_instance(tmp_path: Path) -> None:
    write(tmp_path, "context-rule-engines/e.json", engine("e", 1))
    runtime = Runtime(tmp_path)
    runtime.workspace()
    runtime.workspace()
    watch = runtime.loader._watch
    assert watch is not None and watch.available
    runtime.close()
    assert not watch.available and not watch.unchanged()


# -- any sequence of changes: the watching loader answers what a fresh loader reads ------------------

ENGINES = ("a", "b", "c")
operation = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(ENGINES), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.sampled_from(ENGINES), st.just(0)),
    st.tuples(st.just("rename"), st.sampled_from(ENGINES), st.just(0)),
    st.tuples(st.just("drop-folder"), st.just(""), st.just(0)),
    st.tuples(st.just("memory"), st.sampled_from(ENGINES), st.just(0)),
    st.tuples(st.just("settings"), st.just(""), st.integers(100, 200)),
    st.tuples(st.just("nothing"), st.just(""), st.just(0)),
)


def apply(root: Path, op: tuple[str, str, int], step: int) -> None:
    kind, name, number = op
    folder = root / ".codebolt" / "context-rule-engines"
    if kind == "write":
        path = write(root, f"context-rule-engines/{name}.json", engine(name, number, tag=f"-{step}"))
        bump(path)
    elif kind == "delete":
        (folder / f"{name}.json").unlink(missing_ok=True)
    elif kind == "rename" and (folder / f"{name}.json").exists():
        (folder / f"{name}.json").rename(folder / f"{name}-{step}.json")
    elif kind == "drop-folder":
        shutil.rmtree(folder, ignore_errors=True)
    elif kind == "memory":
        bump(write(root, f"PersistentMemory/{name}.json", memory(f"{name}{step}")))
    elif kind == "settings":
        settings_path = root / ".codebolt" / "context-assembly.json"
        settings_path.parent.mkdir(parents=True, exist_ok=True)
        settings_path.write_text(f'{{"max_tokens": {number}}}')
        bump(settings_path)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(operation, min_size=1, max_size=8))
def test_any_sequence_of_changes_is_seen(operations: list[tuple[str, str, int]]) -> None:
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        write(root, "context-rule-engines/a.json", engine("a", 1))
        loader = WorkspaceLoader(root)
        try:
            loader.load()
            for step, op in enumerate(operations):
                apply(root, op, step)
                assert summary(loader.load()) == fresh(root)
        finally:
            loader.close()
