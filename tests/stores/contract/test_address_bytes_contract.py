"""On every backend: the longest names the URI layer takes are stored, and longer ones are refused
with the same clear error (PostgreSQL once failed with a storage error on names the embedded
store took: its index entries hold at most 2,704 bytes)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.stores.memory import MAX_ADDRESS_BYTES, MemoryRouter
from context_assembly.stores.store_set import StoreSet
from context_assembly.workspace.layout import WorkspaceLayout


def _cjk(n: int, seed: int) -> str:
    """Random CJK characters (3 bytes each): text no index compression shrinks."""
    rng = random.Random(seed)
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n))


def _writes(third: int) -> list[tuple[str, object, str | None]]:
    a, b, c = (_cjk(third, seed) for seed in (1, 2, 3))
    return [(f"kv://{a}/{b}/{c}", 1, None), (f"json://{a}{b}{c}", {"x": 1}, None),
            (f"working://{a}/{b}{c}", 1, None), (f"blob://{a}/{b}{c}", "aGk=", None),
            (f"log://{a}{b}", {"event_type": "e"}, c), (f"episodic://{a}{b}", {"role": "user", "content": "x"}, c)]


@pytest.fixture
def memory(stores: StoreSet, tmp_path: Path) -> MemoryRouter:
    return MemoryRouter(WorkspaceLayout(tmp_path / "workspace"), stores=stores)


def test_the_longest_names_are_stored_and_read_back(memory: MemoryRouter) -> None:
    third = MAX_ADDRESS_BYTES // 3 // 3  # three names of this many 3-byte characters: the limit
    for uri, value, key in _writes(third):
        assert memory.write(uri, value, key=key)["written"] is True, uri
        assert memory.read(uri)["exists"] is True, uri
        if key is not None:
            assert memory.write(uri, value, key=key)["duplicate"] is True


def test_longer_names_are_refused_before_any_store_sees_them(memory: MemoryRouter) -> None:
    third = MAX_ADDRESS_BYTES // 3 // 3 + 1
    for uri, value, key in _writes(third):
        with pytest.raises(InvalidParamsError) as refused:
            memory.write(uri, value, key=key)
        assert f"at most {MAX_ADDRESS_BYTES}" in refused.value.message, uri
        assert memory.read(uri.split("?")[0])["value"] in (None, []), uri


def test_event_types_and_graph_names_have_the_same_limits_on_every_backend(memory: MemoryRouter) -> None:
    """A 3,000-byte event type, node kind or name was stored on the embedded backend and a storage
    error on PostgreSQL (its indexes)."""
    fits, over = _cjk(MAX_ADDRESS_BYTES // 3 - 2, 4), _cjk(MAX_ADDRESS_BYTES // 3 + 1, 5)
    assert memory.write("log://ab", {"event_type": fits})["written"] is True
    with pytest.raises(InvalidParamsError):
        memory.write("log://ab", {"event_type": over})
    kind, name = _cjk(1024 // 3, 6), _cjk(2048 // 3, 7)
    assert memory.write("graph://g/node/" + _cjk(1024 // 3, 8), {"kind": kind, "name": name})["written"] is True
    for node in ({"kind": kind + "x" * 3, "name": "n"}, {"kind": "k", "name": name + "x" * 3}):
        with pytest.raises(InvalidParamsError):
            memory.write("graph://g/node/n1", node)


def test_a_document_named_in_the_value_has_the_same_limit(memory: MemoryRouter) -> None:
    """`{"uri": <name>}` in the value skipped the check the URI's names get."""
    assert memory.vectors is not None
    over = _cjk(MAX_ADDRESS_BYTES // 3, 9)
    with pytest.raises(InvalidParamsError) as refused:
        memory.write("vector://notes", {"uri": over, "text": "release checklist"})
    assert refused.value.errors[0]["path"] == "/value/uri"
    assert memory.write("vector://notes", {"uri": over[:600], "text": "release checklist"})["written"] is True
