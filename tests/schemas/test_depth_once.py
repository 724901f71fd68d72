"""The schema check's depth guard trusts a caller that has already walked the document
(`nests_within`, e.g. the params' depth checked by `methods.table.call`): the answer is the same
as walking it again, for any document within that depth."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.schemas.validate import MAX_DEPTH, PYTHON_MAX_DEPTH, validation_errors

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=20)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


REQUEST_PARTS = st.fixed_dictionaries({"scope_variables": st.dictionaries(st.text(max_size=6), JSON, max_size=3)},
                                      optional={"additional_variables": JSON, "explain": JSON, "input": JSON})


@settings(max_examples=150, deadline=None)
@given(REQUEST_PARTS, st.integers(0, 40), st.integers(0, 300), st.sampled_from(["auto", "python"]))
def test_a_known_depth_gives_the_answer_of_walking(document: dict[str, Any], extra: int, slack: int,
                                                   engine: Any) -> None:
    document = {**document, "additional_variables": {"deep": nested(extra)}}
    known = depth(document) + slack
    assert validation_errors("assembly-request", document, engine, nests_within=known) == \
        validation_errors("assembly-request", document, engine)


def test_a_known_depth_past_the_guards_own_limit_still_walks() -> None:
    for engine, limit in (("auto", MAX_DEPTH), ("python", PYTHON_MAX_DEPTH)):
        deep = {"scope_variables": {}, "additional_variables": {"x": nested(limit + 5)}}
        expected = [{"path": "", "message": f"the document is nested more than {limit} levels deep"}]
        assert validation_errors("assembly-request", deep, engine, nests_within=limit + 10) == expected
        assert validation_errors("assembly-request", deep, engine) == expected
