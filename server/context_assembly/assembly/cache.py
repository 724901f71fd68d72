"""The pipeline result cache (stage 3): short TTL, keyed so that any relevant change misses.

The key holds the memory definition (its canonical JSON), the derived query, the variables, and
the write generations of the stores the pipeline reads. A write in any process bumps a
generation, so the next lookup misses: no stale result outlives a write, whatever the TTL.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

MAX_ENTRIES = 4096  # a working set of a few hundred requests × memories (measured by bench/assemble)


class ResultCache:
    def __init__(self, ttl_s: float = 30.0, max_entries: int = MAX_ENTRIES) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] < time.monotonic():
                if entry is not None:
                    del self._entries[key]
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def discard(self, key: Hashable) -> None:
        """Forget an entry its reader found stale after all (counted as a miss, not a hit)."""
        with self._lock:
            if self._entries.pop(key, None) is not None:
                self.hits -= 1
                self.misses += 1

    def put(self, key: Hashable, value: Any) -> None:
        if self.ttl_s <= 0:
            return
        now = time.monotonic()
        with self._lock:
            self._entries[key] = (now + self.ttl_s, value)
            self._entries.move_to_end(key)
            # Expired entries go now, not when their key is asked for again: after a write bumps a
            # generation the old keys are never asked for, and would sit here until evicted by count.
            while self._entries:
                oldest = next(iter(self._entries.values()))
                if oldest[0] >= now and len(self._entries) <= self.max_entries:
                    break
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
