"""`value_too_deep`: a value nested deeper than the limit is found, one at the limit is not,
whichever walk answers (orjson's own limit, or the level-by-level walk)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from context_assembly.documents.nesting import _walk_exceeds, value_too_deep
from tests.schemas.test_depth_once import JSON, depth


@given(JSON, st.integers(min_value=1, max_value=7))
def test_deeper_than_the_limit_is_found(value: Any, limit: int) -> None:
    assert value_too_deep(value, limit) is (depth(value) > limit)
    if isinstance(value, dict | list):
        assert _walk_exceeds(value, limit) is (depth(value) > limit)


def test_the_boundary_on_a_long_chain() -> None:
    chain: Any = {}
    for n in range(99):  # lists and objects in turn, one level each
        chain = {"k": chain} if n % 2 else [chain]
    assert depth(chain) == 100
    assert not value_too_deep(chain, 100) and value_too_deep(chain, 99)
    assert not _walk_exceeds(chain, 100) and _walk_exceeds(chain, 99)
