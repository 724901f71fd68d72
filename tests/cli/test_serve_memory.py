"""`serve` tunes glibc's allocator before any thread starts: two arenas, unless MALLOC_ARENA_MAX
says otherwise; and freed memory kept for the next answers, unless MALLOC_TRIM_THRESHOLD_ /
MALLOC_MMAP_THRESHOLD_ say otherwise, so a large answer does not fault its memory in anew."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest

from context_assembly.cli.serve import keep_freed_memory, limit_malloc_arenas
from context_assembly.client import SyncContextAssemblyClient

on_glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                              reason="mallopt is glibc's")


@on_glibc
def test_serve_limits_the_allocator_arenas_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() is True


def test_an_explicit_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


@pytest.mark.parametrize("variable", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"])
def test_an_explicit_trim_or_mmap_threshold_wins(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "131072")
    assert keep_freed_memory() is False


def minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def faults_per_answer(root: Path, env: dict[str, str] | None) -> float:
    """The sidecar's page faults per `"explain": "none"` answer (~0.5 MB, 180 engines), once warm."""
    request = {"scope_variables": {}, "additional_variables": {}, "explain": "none"}
    with SyncContextAssemblyClient(root, env=env) as client:
        pid = client.client.pid
        assert pid is not None
        for _ in range(12):  # compiled, fused, templates encoded, the heap grown
            client.evaluate_rules(request)
        before = minor_faults(pid)
        for _ in range(10):
            answer = client.evaluate_rules(request)
        assert sum(len(engine["rules"]) for engine in answer["engine_results"]) == 180 * 11
        return (minor_faults(pid) - before) / 10


@on_glibc
def test_a_large_answer_reuses_freed_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(variable, raising=False)
    engines = tmp_path / ".codebolt" / "context-rule-engines"
    engines.mkdir(parents=True)
    for e in range(180):  # the shape of the bench's `large` answers: many engines, ~11 matched rules each
        rules = [{"id": f"r{i}", "name": f"rule {i} " + "x" * 150, "when": [],
                  "then": {"add_memories": [f"m{e}-{i}"]}} for i in range(11)]
        (engines / f"e{e:03d}.json").write_text(json.dumps({"id": f"e{e:03d}", "rules": rules}))
    # (glibc's own adaptive thresholds fault ~470 pages in per answer here: the answer's memory is
    # handed back after it is written and taken again by the next)
    assert faults_per_answer(tmp_path, None) < 50
    # explicit thresholds win: a 128 KiB threshold hands every large block back when it is freed
    assert faults_per_answer(tmp_path, {"MALLOC_TRIM_THRESHOLD_": "131072", "MALLOC_MMAP_THRESHOLD_": "131072"}) > 300
