"""Cache keys name a definition by its JSON, worked out once per definition object."""

from __future__ import annotations

import attrs

from context_assembly.assembly.execute import _fingerprint
from context_assembly.model.converter import structure
from context_assembly.model.definitions import MemoryDefinition


def test_a_definition_is_named_by_its_content() -> None:
    first = structure({"id": "m", "retrieval": {"pipeline": [{"type": "rank"}]}}, MemoryDefinition)
    assert _fingerprint(first) is _fingerprint(first)  # made once
    same = structure({"retrieval": {"pipeline": [{"type": "rank"}]}, "id": "m"}, MemoryDefinition)
    assert _fingerprint(same) == _fingerprint(first)  # key order does not matter
    changed = attrs.evolve(first, status="disabled")
    assert _fingerprint(changed) != _fingerprint(first)
