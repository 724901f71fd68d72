"""The embedded exact search's top k: a tie at the edge is cut by id, so a deeper search's first k
are the same k (a restricted caller's search reads deeper than an unrestricted one)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from context_assembly.stores.sqlite.vector import best_positions


@given(st.lists(st.integers(0, 4), min_size=1, max_size=60), st.integers(1, 60), st.randoms())
def test_the_best_k_are_the_first_k_by_score_then_id(levels: list[int], limit: int, shuffle: object) -> None:
    limit = min(limit, len(levels))
    ids = np.arange(100, 100 + len(levels))
    shuffle.shuffle(ids)  # type: ignore[attr-defined]
    scores = np.array(levels, dtype=np.float32) / 4
    expected = sorted(range(len(levels)), key=lambda i: (-scores[i], ids[i]))[:limit]
    assert sorted(best_positions(scores, ids, limit).tolist()) == sorted(expected)


def test_a_nan_score_is_never_the_edge() -> None:
    """argpartition puts NaN at the top: taken as the edge, it compared false with every score and
    a collection holding one NaN row answered every search with nothing."""
    scores = np.array([0.9, np.nan, 0.5, 0.1], dtype=np.float32)
    assert sorted(best_positions(scores, np.arange(4), 2).tolist()) == [0, 2]
