"""`serve` asks glibc for two allocator arenas before any thread starts, unless MALLOC_ARENA_MAX says otherwise."""

from __future__ import annotations

import platform
import sys

import pytest

from context_assembly.cli.serve import limit_malloc_arenas


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_serve_limits_the_allocator_arenas_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() is True


def test_an_explicit_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False
