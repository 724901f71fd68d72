"""Reference patterns are gitignore-style: `*` stays within a path segment, `**` crosses them."""

from __future__ import annotations

import pytest

from context_assembly.rules.globs import is_pattern, reference_matches


@pytest.mark.parametrize(("pattern", "reference", "expected"), [
    ("kv://*", "kv://theme", True),
    ("kv://*", "kv://users/u-1", False),  # `*` does not cross `/`
    ("kv://**", "kv://users/u-1", True),
    ("kv://users/*", "kv://users/u-1", True),
    ("file://generated/**", "file://generated/deep/x.py", True),
    ("file://generated/**", "file://src/generated/x.py", False),
    ("file://*.py", "file://a.py", True),
    ("file://*.py", "file://src/a.py", False),
    ("file://**/*.py", "file://src/a/b.py", True),
    ("kv://*", "vector://docs", False),  # the scheme is matched on its own
    ("*://docs", "vector://docs", True),
    ("vector://**", "vector://docs/a", True),
    ("m?", "m1", True),
    ("arch-*", "arch-docs", True),
    ("KV://*", "kv://x", False),  # case-sensitive everywhere
    ("kv://theme", "kv://theme", True),
    ("kv://theme", "kv://themes", False),
])
def test_reference_patterns(pattern: str, reference: str, expected: bool) -> None:
    assert reference_matches(pattern, reference) is expected


def test_what_is_a_pattern() -> None:
    assert is_pattern("kv://*") and is_pattern("m?") and is_pattern("file://[ab].py")
    assert not is_pattern("kv://users/u-1")
