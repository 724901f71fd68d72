"""The compact trace's per-variable outcome bits (rules/bitmap.py) agree with the plain path (every
outcome slot computed, then packed) on arbitrary engines and a run of requests, with parts kept
from earlier requests reused."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.model import AssemblyRequest, RuleEngine, structure
from context_assembly.rules.bitmap import KEPT, engine_bits, value_key
from context_assembly.rules.compact import pack
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.lookup import build_lookup, complete
from context_assembly.rules.trace import program

from .test_properties import json_values, requests, rules


def plain(made: Any, lookup: dict[str, Any]) -> bytes:
    return base64.b64decode(pack(made.outcomes(complete(lookup, made.keys))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rules | json_values, max_size=6), st.lists(requests, min_size=1, max_size=6))
def test_the_bits_are_the_plain_paths(docs: list[Any], request_docs: list[dict]) -> None:
    made = program(compile_engine(structure({"id": "e", "rules": docs}, RuleEngine)))
    bits = engine_bits(made)
    if bits is None:  # groups: the plain path answers
        assert any(slot.kind == "group" for slot in made.slots)
        return
    lookups = [build_lookup(structure(doc, AssemblyRequest)) for doc in request_docs]
    for lookup in [*lookups, *reversed(lookups)]:  # the second pass reads the kept parts
        assert bits.bitmap(lookup) == plain(made, lookup)


def test_numbers_of_equal_value_and_other_types_keep_their_own_parts() -> None:
    docs = [{"id": f"r{i}", "when": [{"field": "addVar.x", "operator": op, "value": value}]}
            for i, (op, value) in enumerate([("eq", 1), ("eq", True), ("eq", 1.0), ("gt", 0), ("eq", "1"),
                                              ("eq", -0.0), ("lt", 0), ("exists", None)])]
    made = program(compile_engine(structure({"id": "e", "rules": docs}, RuleEngine)))
    bits = engine_bits(made)
    assert bits is not None
    for _ in range(2):
        for value in [1, True, 1.0, "1", 0.0, -0.0, False, 0, [1], {"a": 1}, "x", None]:
            lookup = {} if value is None else {"addVar.x": value}
            assert bits.bitmap(lookup) == plain(made, lookup), value
    assert value_key(1) != value_key(True) != value_key(1.0) and value_key(0.0) != value_key(-0.0)
    assert value_key([1]) is None


def test_a_variable_keeps_at_most_kept_values() -> None:
    docs = [{"id": "r", "when": [{"field": "addVar.x", "operator": "starts_with", "value": "a"}]}]
    made = program(compile_engine(structure({"id": "e", "rules": docs}, RuleEngine)))
    bits = engine_bits(made)
    assert bits is not None
    for i in range(KEPT * 2):
        lookup = {"addVar.x": f"a{i}" if i % 2 else f"b{i}"}
        assert bits.bitmap(lookup) == plain(made, lookup)
    assert [len(kept) for kept in bits.kept] == [KEPT]
