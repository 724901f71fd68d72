"""The pipeline result cache is bounded by count, and expired entries leave when anything is
stored, not only when their own key is asked for again (after a write, old keys never are)."""

from __future__ import annotations

import time

from context_assembly.assembly.cache import ResultCache


def test_expired_entries_leave_on_the_next_put() -> None:
    cache = ResultCache(ttl_s=0.01)
    for generation in range(100):
        cache.put(("pipeline", generation), ["items"])
    time.sleep(0.05)  # every entry is past its TTL
    cache.put(("pipeline", "new"), ["items"])
    assert len(cache) == 1


def test_the_count_bound_evicts_the_least_recently_used() -> None:
    cache = ResultCache(ttl_s=60, max_entries=3)
    for key in "abc":
        cache.put(key, key)
    assert cache.get("a") == "a"  # now the most recent
    cache.put("d", "d")
    assert len(cache) == 3 and cache.get("b") is None and cache.get("a") == "a"
