"""The KV store and working memory contract (SPEC §5.3), on every backend."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.errors import InvalidParamsError
from context_assembly.stores.interfaces import KVStore, WorkingMemory
from context_assembly.stores.store_set import StoreSet

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(alphabet=st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\x00")),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8)


def test_the_stores_implement_their_interfaces(stores: StoreSet) -> None:
    assert isinstance(stores.kv, KVStore) and isinstance(stores.working, WorkingMemory)


def test_kv_round_trip_update_delete_and_generation(stores: StoreSet) -> None:
    kv = stores.kv
    start = kv.generation()
    assert kv.get("default", "default", "k") is None
    written = kv.set("default", "default", "k", {"a": [1, 2]})
    entry = kv.get("default", "default", "k")
    assert entry is not None and entry.value == {"a": [1, 2]} and entry.updated_at == pytest.approx(written.updated_at)
    kv.set("default", "default", "k", None)  # null is a value, not a miss
    entry = kv.get("default", "default", "k")
    assert entry is not None and entry.value is None
    assert kv.generation() == start + 2
    assert kv.delete("default", "default", "k") is True and kv.delete("default", "default", "k") is False
    assert kv.get("default", "default", "k") is None and kv.generation() == start + 3


def test_kv_list_filters_and_sorts(stores: StoreSet) -> None:
    kv = stores.kv
    assert kv.set_many([("b", "n", "k2", 2), ("a", "n", "k1", 1), ("a", "m", "x", 3), ("a", "n", "k0", 0)]) == 4
    assert [(e.instance, e.namespace, e.key) for e in kv.list()] == [
        ("a", "m", "x"), ("a", "n", "k0"), ("a", "n", "k1"), ("b", "n", "k2")]
    assert [e.key for e in kv.list("a", "n")] == ["k0", "k1"]
    assert [e.key for e in kv.list(key_prefix="k")] == ["k0", "k1", "k2"]
    assert all(e.value is None for e in kv.list(values=False)) and kv.list("a", "m")[0].value == 3
    assert kv.set_many([]) == 0


def test_kv_refuses_bad_keys_and_values(stores: StoreSet) -> None:
    with pytest.raises(InvalidParamsError):
        stores.kv.set("default", "default", "", 1)
    with pytest.raises(InvalidParamsError):
        stores.kv.set("default", "default", "k", {1, 2})
    assert stores.kv.list() == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON)
def test_kv_keeps_any_json_value(stores: StoreSet, value: object) -> None:
    stores.kv.set("default", "default", "v", value)
    entry = stores.kv.get("default", "default", "v")
    assert entry is not None and entry.value == value


def test_working_memory_per_thread(stores: StoreSet) -> None:
    working = stores.working
    start = working.generation()
    working.set("t1", "plan", ["a", "b"])
    working.set("t1", "step", 2)
    working.set("t2", "plan", "other")
    assert working.list("t1") == {"plan": ["a", "b"], "step": 2}
    entry = working.get("t2", "plan")
    assert entry is not None and entry.value == "other" and working.get("t2", "nope") is None
    assert [(e.thread_id, e.key, e.value) for e in working.entries()] == [
        ("t1", "plan", None), ("t1", "step", None), ("t2", "plan", None)]
    assert [e.key for e in working.entries("t1")] == ["plan", "step"]
    assert working.delete("t1", "step") is True and working.delete("t1", "step") is False
    assert working.clear("t1") == 1 and working.list("t1") == {} and working.clear("t1") == 0
    assert working.generation() == start + 5
