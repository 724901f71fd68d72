"""The method table: its index of names is exactly what the families declare, and a look-up
imports only the family that declares the method."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from context_assembly.methods import METHODS, CallContext, MethodSpec, call, table
from context_assembly.methods.session import Session


def test_the_index_names_exactly_the_methods_each_family_declares() -> None:
    declared = {spec.name: name for name in table.FAMILIES for spec in table.family(name).METHODS}
    assert declared == table.NAMES


def test_the_table_answers_every_declared_spec_by_name() -> None:
    for name in table.FAMILIES:
        for spec in table.family(name).METHODS:
            assert METHODS[spec.name] is spec
    assert list(METHODS) == list(table.NAMES)
    assert len(METHODS) == len(table.NAMES)


def test_an_unknown_method_is_a_key_error() -> None:
    assert "memory/readAll" not in METHODS
    with pytest.raises(KeyError):
        METHODS["memory/readAll"]


def test_an_added_method_is_served_and_removed_like_a_dict_entry() -> None:
    spec = MethodSpec("test/echo", lambda session, params, ctx: params)
    METHODS["test/echo"] = spec
    try:
        assert METHODS["test/echo"] is spec and "test/echo" in list(METHODS)
    finally:
        del METHODS["test/echo"]
    assert "test/echo" not in METHODS


def test_names_need_no_family_and_a_look_up_imports_only_its_own() -> None:
    code = """
import sys
from context_assembly.methods import METHODS
families = [f"context_assembly.methods.{name}" for name in
            ("assembly", "rule_engines", "persistent_memory", "ingestion", "memory", "testing", "replay")]
before = [name for name in families if name in sys.modules]
assert "memory/read" in METHODS and len(list(METHODS)) > 40
METHODS["memory/read"]
after = [name for name in families if name in sys.modules]
print(before, after, "context_assembly.methods.session" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # the memory family imports the Session type it is written against, but no other family
    assert out.split() == ["[]", "['context_assembly.methods.memory']", "True"]


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    session = Session(tmp_path)
    yield session
    session.runtime.close()


def test_a_handler_learns_how_deep_call_checked_its_params(session: Session) -> None:
    seen: list[int | None] = []
    METHODS["test/depth"] = MethodSpec("test/depth", lambda session, params, ctx: seen.append(ctx.params_depth))
    try:
        given = CallContext()
        call(session, "test/depth", {"a": [[1]]}, given)
        call(session, "test/depth", {})
    finally:
        del METHODS["test/depth"]
    depth = session.limits().nesting_depth
    assert seen == [depth, depth]
    assert given.params_depth is None  # the caller's context is left as it was
