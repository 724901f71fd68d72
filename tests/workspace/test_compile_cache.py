"""The workspace loader through the compile cache: the same answers as without it, before and
after edits, and every way an entry or its folder can be wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, structure, unstructure
from context_assembly.rules import cache as cache_module
from context_assembly.rules.cache import ENV, CompileCache
from context_assembly.workspace.loader import WorkspaceLoader

from ..rules.test_compile_cache import typed_requests, typed_rules
from .builder import write

RULE = {"id": "r", "when": [{"field": "input.text", "operator": "regex", "value": "fi+x"}],
        "then": {"add_memories": ["m"]}}
REQUEST = structure({"input": {"text": "please fiix it"}}, AssemblyRequest)


def answers(loader: WorkspaceLoader, requests: list[AssemblyRequest]) -> str:
    """Everything a client reads of the workspace's rules, as JSON: every mode and trace format,
    problems, engines."""
    workspace = loader.load()
    out: list[Any] = [[unstructure(p) for p in workspace.problems],
                      {k: unstructure(v) for k, v in workspace.engines.items()}]
    for request in requests:
        out += [workspace.rule_set.evaluate_wire(request, explain=mode, trace_format=form)
                for mode, form in (("none", "full"), ("matched", "full"), ("all", "full"), ("matched", "compact"),
                                   ("all", "compact"))]
    return json.dumps(out)


def touch(path: Path) -> None:
    """A new mtime, so a long-lived loader sees a rewrite of the same size in the same tick."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def write_version(root: Path, version: dict[str, Any]) -> None:
    """The rule files as `version` has them: the others removed, each written with a new mtime."""
    folder = root / ".codebolt" / "context-rule-engines"
    for old in folder.glob("*.json") if folder.exists() else []:
        if old.stem not in version:
            old.unlink()
    for name, doc in version.items():
        touch(write(root, f"context-rule-engines/{name}.json", doc))


def entries(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


files = st.dictionaries(st.sampled_from(["a", "b", "c"]),
                        st.fixed_dictionaries({"rules": st.lists(typed_rules, max_size=5)},
                                              optional={"id": st.sampled_from(["a", "x"]),
                                                        "enabled": st.booleans()})
                        | st.just("{ not json") | st.just({"rules": "no"}), min_size=1, max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(files, min_size=1, max_size=3), st.lists(typed_requests, min_size=1, max_size=2))
def test_cached_loaders_answer_as_a_plain_one_through_edits(versions: list[dict[str, Any]],
                                                            request_docs: list[dict]) -> None:
    requests = [structure(r, AssemblyRequest) for r in request_docs]
    with tempfile.TemporaryDirectory() as scratch:
        root, store = Path(scratch) / "ws", CompileCache(Path(scratch) / "cache")
        long_lived = WorkspaceLoader(root, cache=store)
        for version in versions:
            write_version(root, version)
            plain = answers(WorkspaceLoader(root, cache=False), requests)
            assert answers(long_lived, requests) == plain  # after an edit: stored or restored
            assert answers(WorkspaceLoader(root, cache=store), requests) == plain  # a new process, warm


def test_a_warm_start_restores_and_an_edit_recompiles_only_its_engine(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    path = write(root, "context-rule-engines/e.json", {"id": "e", "rules": [RULE]})
    write(root, "context-rule-engines/f.json", {"id": "f", "rules": [RULE]})
    cold = WorkspaceLoader(root, cache=store).load()
    assert len(entries(store.directory)) == 2
    assert all(source._unread is None for source in cold.files.values())  # compiled from the parsed file
    loader = WorkspaceLoader(root, cache=store)
    warm = loader.load()
    assert all(source._unread is not None for source in warm.files.values())  # restored, not yet parsed
    assert warm.rule_set.evaluate_wire(REQUEST, explain="none")["matched_memories"] == ["m"]
    assert all(source._unread is not None for source in warm.files.values())  # "none" needed no rule
    before = {e.id: e for e in warm.rule_set.engines}
    touch(write(root, "context-rule-engines/e.json", {"id": "e", "rules": [{**RULE, "id": "r2"}]}))
    after = {e.id: e for e in loader.load().rule_set.engines}
    assert after["f"] is before["f"] and after["e"] is not before["e"]
    assert len(entries(store.directory)) == 3  # the edited version's entry next to the old one
    assert path.stem in loader.load().engines and loader.load().engines["e"].rules[0].id == "r2"
    # a restored file reads as the plain one wherever something asks for it
    plain = WorkspaceLoader(root, cache=False).load().files[".codebolt/context-rule-engines/f.json"]
    restored = warm.files[".codebolt/context-rule-engines/f.json"]
    assert restored.value == plain.value and restored.document.text == plain.document.text
    assert unstructure(restored.engine) == unstructure(plain.engine)


def test_an_edited_file_is_never_traced_from_its_old_entries(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    write(root, "context-rule-engines/e.json", {"id": "e", "rules": [RULE]})
    write(root, "context-rule-engines/f.json", {"id": "f", "rules": [RULE]})
    answers(WorkspaceLoader(root, cache=store), [REQUEST])  # every trace built and stored
    loader = WorkspaceLoader(root, cache=store)
    loader.load().rule_set.evaluate_wire(REQUEST, explain="all")
    before = {e.id: e.trace for e in loader.load().rule_set.engines}
    edited = {**RULE, "when": [{**RULE["when"][0], "value": "pl(e)ase"}]}  # the same shape, another value
    touch(write(root, "context-rule-engines/e.json", {"id": "e", "rules": [edited]}))
    wire = loader.load().rule_set.evaluate_wire(REQUEST, explain="all")
    after = {e.id: e.trace for e in loader.load().rule_set.engines}
    assert after["f"] is before["f"] and after["e"] is not before["e"]  # only the edited engine's is made
    values = {r["engine_id"]: r["rules"][0]["conditions"][0]["value"] for r in wire["engine_results"]}
    assert values == {"e": "pl(e)ase", "f": "fi+x"}
    plain = answers(WorkspaceLoader(root, cache=False), [REQUEST])
    assert answers(loader, [REQUEST]) == plain == answers(WorkspaceLoader(root, cache=store), [REQUEST])


def test_an_engine_without_id_is_named_by_its_file_even_with_equal_bytes(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    for name in ("one", "two"):
        write(root, f"context-rule-engines/{name}.json", {"rules": [RULE]})
    WorkspaceLoader(root, cache=store).load()
    warm = WorkspaceLoader(root, cache=store).load()
    assert sorted(e.id for e in warm.rule_set.engines) == ["one", "two"]
    assert [d["rule"] for d in warm.rule_set.evaluate_wire(REQUEST, explain="none")["decisions"]] in (
        [], ["one/r", "two/r"], ["one/r"])


def _load_twice(root: Path, store: CompileCache) -> tuple[str, str]:
    """(answers of a loader that finds the cache as it is, of the plain loader)."""
    return (answers(WorkspaceLoader(root, cache=store), [REQUEST]),
            answers(WorkspaceLoader(root, cache=False), [REQUEST]))


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "foreign", "not-an-engine"])
def test_a_damaged_entry_is_ignored_and_written_again(tmp_path: Path, damage: str) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    write(root, "context-rule-engines/e.json", {"id": "e", "rules": [RULE]})
    WorkspaceLoader(root, cache=store).load()
    [entry] = entries(store.directory)
    good = entry.read_bytes()
    if damage == "flip":
        entry.write_bytes(good[:-10] + bytes([good[-10] ^ 0xFF]) + good[-9:])
    elif damage == "truncate":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "foreign":  # another key's entry under this name
        other = CompileCache(tmp_path / "other")
        other.put("ab" * 32, b"payload")
        entry.write_bytes(entries(other.directory)[0].read_bytes())
    else:  # a well-formed entry whose payload is no compiled engine
        store.put(entry.name, b"\x00not marshal")
    assert store.get(entry.name) == (b"\x00not marshal" if damage == "not-an-engine" else None)
    cached, plain = _load_twice(root, store)
    assert cached == plain and json.loads(cached)[2]["matched_memories"] == ["m"]
    assert entry.read_bytes() == good and store.get(entry.name) is not None  # rebuilt


def test_an_unwritable_cache_is_no_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    store = CompileCache(blocker / "sub")
    root = tmp_path / "ws"
    write(root, "context-rule-engines/e.json", {"id": "e", "rules": [RULE]})
    assert store.put("00" * 32, b"x") is False
    cached, plain = _load_twice(root, store)
    assert cached == plain
    assert blocker.read_text() == "a file where the folder should be"


def test_a_change_of_version_or_compiler_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    write(root, "context-rule-engines/e.json", {"id": "e", "rules": [RULE]})
    WorkspaceLoader(root, cache=store).load()
    key = store.key((root / ".codebolt" / "context-rule-engines" / "e.json").read_bytes(), "e")
    assert store.get(key) is not None
    monkeypatch.setattr(cache_module, "__version__", "999.0")
    monkeypatch.setattr(cache_module, "_fingerprint", None)  # as a new process of that version
    assert store.key(b"same", "e") != key and store.get(store.key(b"x", "e")) is None
    cached, plain = _load_twice(root, store)
    # its own entry and its trace program's (the program, its functions `outcomes`, `all_rules` and
    # the compact trace's `bits`), the old one untouched
    assert cached == plain and len(entries(store.directory)) == 6 and store.path(key).exists()


def test_the_environment_chooses_or_disables_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for off in ("0", "off", ""):
        monkeypatch.setenv(ENV, off)
        assert CompileCache.from_environment() is None
    monkeypatch.setenv(ENV, str(tmp_path / "chosen"))
    store = CompileCache.from_environment()
    assert store is not None and store.directory == tmp_path / "chosen"
    write(tmp_path / "ws", "context-rule-engines/e.json", {"id": "e", "rules": [RULE]})
    WorkspaceLoader(tmp_path / "ws").load()
    assert len(entries(tmp_path / "chosen")) == 1
    monkeypatch.delenv(ENV)
    default = CompileCache.from_environment()
    assert default is not None and default.directory.name == "compiled-rules"


def test_a_lower_rule_limit_than_the_entry_was_made_under_is_still_enforced(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache")
    root = tmp_path / "ws"
    write(root, "context-rule-engines/e.json", {"id": "e", "rules": [RULE, {**RULE, "id": "r2"}]})
    WorkspaceLoader(root, cache=store).load()
    write(root, "context-assembly.json", {"limits": {"rules_per_engine": 1}})
    workspace = WorkspaceLoader(root, cache=store).load()
    assert "e" not in workspace.engines
    assert any("rules_per_engine" in p.message for p in workspace.problems)


def test_writers_racing_on_one_key_leave_a_whole_entry(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache")
    key, payload = "cd" * 32, os.urandom(200_000)
    threads = [threading.Thread(target=store.put, args=(key, payload)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.get(key) == payload
    assert [p.name for p in entries(store.directory)] == [key]  # no temporary file left behind


def test_two_processes_loading_one_workspace_share_the_cache(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for name in "abcdef":
        write(root, f"context-rule-engines/{name}.json", {"id": name, "rules": [RULE, {**RULE, "id": "r2"}]})
    script = ("import sys, json; from context_assembly.workspace.loader import WorkspaceLoader;"
              "from context_assembly.model import AssemblyRequest, structure;"
              "w = WorkspaceLoader(sys.argv[1]).load();"
              "print(json.dumps(w.rule_set.evaluate_wire(structure({'input': {'text': 'fiix'}}, AssemblyRequest),"
              " explain='all')))")
    env = {**os.environ, ENV: str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, "-c", script, str(root)], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert all(run.returncode == 0 for run in runs)
    after = subprocess.run([sys.executable, "-c", script, str(root)], env=env, capture_output=True, text=True,
                           check=True).stdout
    assert outputs[0] == outputs[1] == after
    store = CompileCache(tmp_path / "cache")
    stored = entries(store.directory)
    # per engine: its entry, its trace program's and the code of the function `"all"` runs
    assert len(stored) == 18 and all(store.get(p.name) is not None for p in stored)


def test_entries_unused_for_a_month_are_pruned_by_the_first_write(tmp_path: Path) -> None:
    store = CompileCache(tmp_path / "cache", max_age_days=30)
    old_key, used_key, fresh_key = "aa" * 32, "ab" * 32, "ac" * 32
    for key in (old_key, used_key):
        store.put(key, b"payload")
    long_ago = time.time() - 40 * 86_400
    for key in (old_key, used_key):
        os.utime(store.path(key), (long_ago, long_ago))
    stray = store.path(old_key).parent / ".xyz.tmp"  # an interrupted write of long ago
    stray.write_bytes(b"half")
    os.utime(stray, (long_ago, long_ago))
    other = store.path(old_key).parent / "notes.txt"  # not the cache's: never touched
    other.write_text("mine")
    os.utime(other, (long_ago, long_ago))
    assert store.get(used_key) == b"payload"  # a hit marks it used
    later = CompileCache(tmp_path / "cache", max_age_days=30)  # another process
    assert later.get(old_key) == b"payload"  # reading an old entry keeps it (and marks it)
    os.utime(later.path(old_key), (long_ago, long_ago))
    later.put(fresh_key, b"new")  # its first write prunes
    assert later.get(old_key) is None and not stray.exists()
    assert later.get(used_key) == b"payload" and later.get(fresh_key) == b"new" and other.read_text() == "mine"
