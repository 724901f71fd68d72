"""Shortening items for the budget ladder: cuts with the marker (shortening.py), and summaries —
through the client's model when it offers one, under a deadline, else extractive (the lead sentence
plus the sentences sharing most words with the task).

Summaries are cached by content hash (with the task and the target size), so a turn that assembles
twice, or the next turn over the same long tool output, does not pay twice.
"""

from __future__ import annotations

import concurrent.futures as futures
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from attrs import evolve

from ..model.context import ContextItem
from ..shortening import TRUNCATION_PREFIX, extractive, shorten
from .tokens import Counter

Llm = Callable[[dict[str, Any]], dict[str, Any]]
_CACHE_SIZE = 2048
MIN_CUT_TOKENS = 8  # a cut that keeps less than this is no use to the model: drop instead


def shorten_item(item: ContextItem, room: int, count: Counter, min_tokens: int = MIN_CUT_TOKENS) -> ContextItem | None:
    """`item` cut to `room` tokens with the marker (metadata says so), or None when too little would be left."""
    if room < min_tokens:
        return None
    total = int(item.metadata.get("original_tokens") or item.tokens)
    text = shorten(item.content, room, count, total)
    if text is None or count(text.rsplit("\n" + TRUNCATION_PREFIX, 1)[0]) < min_tokens:
        return None
    return evolve(item, content=text, tokens=count(text),
                  metadata={**item.metadata, "truncated": True, "original_tokens": total})


class Summariser:
    """Summaries for one assembly; the cache it fills is shared across assemblies."""

    def __init__(self, cache: SummaryCache, count: Counter, task: str, llm: Llm | None, timeout_s: float,
                 tokenizer: str = "estimate") -> None:
        self.cache = cache
        self.count = count
        self.tokenizer = tokenizer  # in the cache key: a summary is sized in its counter's tokens
        self.task = task
        self.llm = llm
        self.timeout_s = timeout_s

    def summarise(self, text: str, max_tokens: int) -> tuple[str, str] | None:
        """(summary, method) within `max_tokens`, or None when nothing useful fits."""
        key = hashlib.sha1(f"{self.tokenizer}\0{max_tokens}\0{self.task}\0{self.llm is not None}\0{text}".encode(
            "utf-8", "surrogatepass")).hexdigest()
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        result = self._from_model(text, max_tokens)
        if result is None:
            summary = extractive(text, self.task, max_tokens, self.count)
            note = "extractive" if self.llm is None else f"extractive ({self._why})"
            result = (summary, note) if summary else None
        if result is not None and (self.llm is None or result[1] == "llm"):
            # an extractive summary standing in for a model that failed or was slow this once is
            # not kept: the next turn asks the model again (kept, it said "timed out" for good)
            self.cache.put(key, result)
        return result

    _why = "the model was not asked"

    def _from_model(self, text: str, max_tokens: int) -> tuple[str, str] | None:
        if self.llm is None:
            return None
        request = {"system": "You summarise context for a coding agent. Keep facts, names, numbers and errors.",
                   "prompt": f"Summarise the following in at most {max_tokens} tokens, keeping what matters for "
                             f"the task \"{self.task}\".\n\n{text}"}
        try:
            answer = self.cache.pool.submit(self.llm, request).result(timeout=self.timeout_s)
        except futures.TimeoutError:
            self._why = f"the model did not answer within {self.timeout_s * 1000:.0f} ms"
            return None
        except Exception as exc:  # no model after all, an error: the extractive summary still fits
            self._why = f"the model failed: {getattr(exc, 'message', exc)}"
            return None
        summary = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(summary, str) or not summary.strip():
            self._why = "the model gave no text"
            return None
        summary = summary.strip()
        if self.count(summary) > max_tokens:  # a longer answer than asked: cut, the marker telling of the item
            summary = shorten(summary, max_tokens, self.count, self.count(text)) or ""
        return (summary, "llm") if summary else None


class SummaryCache:
    """Summaries by content hash (LRU), and the threads that wait for the client's model."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()
        self.pool = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="summary")

    def get(self, key: str) -> tuple[str, str] | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def put(self, key: str, value: tuple[str, str]) -> None:
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
