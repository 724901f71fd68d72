"""Reference patterns: `kv://*`, `file://generated/**` (exclusions, cap and boost targets).

A pattern is any reference holding `*`, `?` or `[`. Matching is fnmatch-style over the whole
reference: `*` and `?` match any characters, `/` included, as the seeds' `kv://*` expects.
"""

from __future__ import annotations

from fnmatch import fnmatchcase


def is_pattern(reference: str) -> bool:
    return any(ch in reference for ch in "*?[")


def reference_matches(pattern: str, reference: str) -> bool:
    return fnmatchcase(reference, pattern) if is_pattern(pattern) else pattern == reference
