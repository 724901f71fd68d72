"""Regular expressions that run in linear time (RE2), compiled once and shared.

Rule files are committed by anyone, so a pattern must never be able to stall the server: RE2 has
no backtracking. A pattern RE2 cannot run (backreferences, lookaround) is a `PatternError`, which
the caller reports; there is deliberately no fallback to a backtracking engine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import re2

# A cap on the compiled program size: a pathological pattern is refused instead of eating memory.
_MAX_MEM = 8 << 20
_MEMO_LIMIT = 4096
# Texts remembered at most this long: short values (a phase, a path) repeat; a 100 KB task text
# remembered by each of 20 patterns kept ~300 MB alive in a long session
_MEMO_TEXT = 256


class PatternError(ValueError):
    """A pattern the linear-time engine cannot compile."""


def _options(ignore_case: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    options.max_mem = _MAX_MEM
    options.never_capture = True
    return options


def check_pattern(pattern: str) -> str | None:
    """Why `pattern` cannot run safely, or None when it can."""
    try:
        compile_search(pattern, False)
    except PatternError as exc:
        return str(exc)
    return None


class Search(dict[str, bool]):
    """A pattern's `search` as a predicate that remembers its answers: the same few request
    strings meet the same pattern turn after turn, and RE2's Python wrapper costs about a
    microsecond a call. Call it, or subscript it (what the generated matchers do: a remembered
    answer is then a dict lookup in C, no Python call); a text not seen before is searched by
    `__missing__`. At most `_MEMO_LIMIT` answers are kept, of texts up to `_MEMO_TEXT` characters."""

    __slots__ = ("_search",)

    def __init__(self, search: Callable[[str], object]) -> None:
        super().__init__()
        self._search = search

    def __missing__(self, text: str) -> bool:
        try:
            hit = self._search(text) is not None
        except UnicodeEncodeError:  # a text with a lone surrogate: RE2 reads UTF-8 only
            hit = self._search(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")) is not None
        if len(text) > _MEMO_TEXT:  # a prompt, a file: rarely seen twice, and kept it costs its size
            return hit
        if len(self) >= _MEMO_LIMIT:
            self.clear()
        self[text] = hit
        return hit

    def __call__(self, text: str) -> bool:
        return self[text]


@functools.lru_cache(maxsize=2048)
def compile_search(pattern: str, ignore_case: bool) -> Search:
    """A memoising `search` predicate for `pattern`; raises PatternError when RE2 refuses it."""
    try:
        regexp = re2.compile(pattern, _options(ignore_case))
    except UnicodeEncodeError:  # a lone surrogate (the standard library's JSON reads "\ud800")
        raise PatternError("the pattern holds a lone surrogate, which is not valid Unicode") from None
    except re2.error as exc:
        message = exc.args[0] if exc.args else exc
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise PatternError(f"pattern cannot run in linear time or is invalid: {message}") from None
    return Search(regexp.search)
