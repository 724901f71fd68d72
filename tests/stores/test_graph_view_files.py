"""A graph view file is read and checked once per version: whatever is written to it, in place or
replaced, `load_view` answers what checking the file as it is now answers."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.errors import ContextAssemblyError
from context_assembly.stores.kuzu.cypher import parameter_names
from context_assembly.stores.kuzu.views import load_view, parse_view
from context_assembly.workspace.layout import WorkspaceLayout

CYPHERS = (
    "MATCH (m:Entity {name: $name}) RETURN m.id AS id LIMIT $limit",
    "MATCH (m:Entity {key: $key}) RETURN m.name AS name",
    "MATCH (m:Entity) WHERE m.name = '$not_a_parameter' RETURN m.id AS id",
    "MATCH (m:Entity) DELETE m",  # refused: views only read
    "",
)
PARAMS = (
    {"name": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
    {"key": {"type": "string"}},
    {},
)


def document(cypher: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"id": "v", "description": "a view", "cypher": cypher, "params": params}


def plain(path: Path) -> Any:
    """What checking the file as it is now answers (no memo involved)."""
    try:
        return parse_view("v", json.loads(path.read_bytes()))
    except (ContextAssemblyError, ValueError) as exc:
        return type(exc).__name__


def loaded(layout: WorkspaceLayout) -> Any:
    try:
        return load_view(layout, "v")
    except (ContextAssemblyError, ValueError) as exc:
        return type(exc).__name__


WRITES = st.tuples(st.sampled_from(CYPHERS), st.sampled_from(PARAMS), st.booleans())


@settings(max_examples=60, deadline=None)
@given(st.lists(WRITES, min_size=1, max_size=8))
def test_a_view_loaded_again_is_the_file_as_it_is_now(writes: list[tuple[str, dict[str, Any], bool]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        layout = WorkspaceLayout(Path(folder).resolve())
        path = layout.graph_views_dir / "v.json"
        path.parent.mkdir(parents=True)
        tick = 1_700_000_000_000_000_000
        for cypher, params, replace in writes:
            text = json.dumps(document(cypher, params))
            if replace:  # a new file (inode) put in place, as editors and this server write
                fresh = path.with_suffix(".tmp")
                fresh.write_text(text)
                os.replace(fresh, path)
            else:
                with open(path, "w") as handle:  # in place
                    handle.write(text)
            tick += 1_000_000  # edits at distinct moments (a same-size edit within one tick has no stamp)
            os.utime(path, ns=(tick, tick))
            assert loaded(layout) == plain(path)
            assert loaded(layout) == plain(path)  # the memo answers the same


def test_the_memo_hands_out_the_same_checked_view(tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path.resolve())
    layout.graph_views_dir.mkdir(parents=True)
    (layout.graph_views_dir / "v.json").write_text(json.dumps(document(CYPHERS[0], PARAMS[0])))
    assert load_view(layout, "v") is load_view(layout, "v")


def test_a_view_symlinked_out_of_the_workspace_is_still_refused(tmp_path: Path) -> None:
    layout = WorkspaceLayout((tmp_path / "ws").resolve())
    layout.graph_views_dir.mkdir(parents=True)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(document(CYPHERS[0], PARAMS[0])))
    (layout.graph_views_dir / "v.json").symlink_to(outside)
    with pytest.raises(ContextAssemblyError, match="outside the workspace"):
        load_view(layout, "v")


def test_parameter_names_are_those_outside_literals() -> None:
    assert parameter_names(CYPHERS[0]) == {"name", "limit"}
    assert parameter_names(CYPHERS[2]) == frozenset()
