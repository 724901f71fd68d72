"""Python's cyclic garbage collector, set up the same way for tests that count its collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector enabled, with its usual first threshold, for the test; restored after."""
    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        (gc.enable if was_enabled else gc.disable)()


def young_collections() -> int:
    return int(gc.get_stats()[0]["collections"])
