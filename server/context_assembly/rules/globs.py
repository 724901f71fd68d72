"""Reference patterns: `kv://users/*`, `file://generated/**` (exclusions, cap and boost targets).

A pattern is any reference holding `*`, `?` or `[`. Matching is gitignore-style over the path
after the scheme (wcmatch globbing): `*` and `?` never cross `/`, `**` matches any number of
segments (`file://generated/**` covers everything under generated/, `vector://**` every vector
source), `[abc]` is a character class. The scheme is matched on its own (`kv://*` is one KV key
segment, never `vector://…`), case-sensitively, on every platform.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from wcmatch import glob

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.CASE
_SEPARATOR = "://"


def is_pattern(reference: str) -> bool:
    return any(ch in reference for ch in "*?[")


@functools.lru_cache(maxsize=4096)
def _matcher(pattern: str) -> Callable[[str], bool]:
    compiled = glob.compile(pattern, flags=_FLAGS)
    return lambda text: bool(compiled.match(text))


def reference_matches(pattern: str, reference: str) -> bool:
    if not is_pattern(pattern):
        return pattern == reference
    scheme, separator, rest = pattern.partition(_SEPARATOR)
    if not separator:  # a pattern over whole references: `m?`, `**`
        return _matcher(pattern)(reference)
    their_scheme, their_separator, their_rest = reference.partition(_SEPARATOR)
    return bool(their_separator) and _matcher(scheme)(their_scheme) and _matcher(rest)(their_rest)
