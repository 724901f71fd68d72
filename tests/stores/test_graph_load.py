"""`KuzuGraph.load` (batched) against the outcome of upserting the same items one at a time, in order.

One database serves the whole module (Kuzu databases are slow to create); each test, and each
hypothesis example, writes to graph instances of its own.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.errors import NotFoundError
from context_assembly.stores.graph import GraphEdge, GraphNode
from context_assembly.stores.kuzu import KuzuGraph, SessionSettings
from context_assembly.stores.kuzu import graph as graph_module
from context_assembly.workspace.layout import WorkspaceLayout

FAST = SessionSettings(hold_s=0.05, lock_timeout_s=20.0)
VIEWS = {
    "load-nodes": "MATCH (n:Entity) WHERE n.instance = $instance RETURN n ORDER BY n.id",
    "load-edges": ("MATCH (a:Entity)-[r:Relates]->(b:Entity) WHERE r.instance = $instance "
                   "RETURN a.id AS a, r, b.id AS b ORDER BY r.id"),
}
UNICODE = {"名前": "データ", "emoji": "🙂", "quote": "it's \"x\" \\ y", "nested": {"ü": [1, "ß", None, 2.5]}}
_fresh = itertools.count()

Key = tuple[str, str]


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KuzuGraph]:
    layout = WorkspaceLayout(tmp_path_factory.mktemp("load"))
    layout.graph_views_dir.mkdir(parents=True, exist_ok=True)
    for view_id, cypher in VIEWS.items():
        document = {"id": view_id, "description": "test view", "cypher": cypher,
                    "params": {"instance": {"type": "string"}}}
        (layout.graph_views_dir / f"{view_id}.json").write_text(json.dumps(document), encoding="utf-8")
    with KuzuGraph(layout, settings=FAST) as store:
        yield store


def fresh(name: str) -> str:
    """An instance name no other test or example uses."""
    return f"{name}-{next(_fresh)}"


class Model:
    """The graph as sequential upserts leave it."""

    def __init__(self) -> None:
        self.nodes: dict[Key, GraphNode] = {}
        self.edges: dict[Key, GraphEdge] = {}

    def load(self, nodes: list[GraphNode], edges: list[GraphEdge]) -> tuple[str, list[str]] | None:
        """Apply a load; on a missing endpoint change nothing and return (edge id, missing node ids)."""
        new_nodes = {**self.nodes, **{(node.instance, node.id): node for node in nodes}}
        new_edges = dict(self.edges)
        for edge in edges:
            missing = [node_id for node_id in dict.fromkeys((edge.from_id, edge.to_id))
                       if (edge.instance, node_id) not in new_nodes]
            if missing:
                return edge.id, missing
            new_edges[(edge.instance, edge.id)] = edge
        self.nodes, self.edges = new_nodes, new_edges
        return None

    def state(self, instance: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        nodes = sorted((node for (space, _), node in self.nodes.items() if space == instance), key=lambda n: n.id)
        edges = sorted((edge for (space, _), edge in self.edges.items() if space == instance), key=lambda e: e.id)
        return [node.as_dict() for node in nodes], [edge.as_dict() for edge in edges]


def state(graph: KuzuGraph, instance: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every node and edge of `instance`, checking each edge joins the nodes it names, once."""
    nodes = [row["n"] for row in graph.run_view("load-nodes", {"instance": instance})]
    rows = graph.run_view("load-edges", {"instance": instance})
    for row in rows:
        assert (row["a"], row["b"]) == (row["r"]["from"], row["r"]["to"])
    edges = [row["r"] for row in rows]
    assert len({edge["id"] for edge in edges}) == len(edges), "an edge id stored twice"
    return nodes, edges


def load_both(graph: KuzuGraph, model: Model, nodes: list[GraphNode], edges: list[GraphEdge]) -> None:
    """Load into the graph and the model; the same error, or the same state afterwards."""
    expected = model.load(nodes, edges)
    if expected is None:
        graph.load(nodes, edges)
        return
    edge_id, missing = expected
    with pytest.raises(NotFoundError) as caught:
        graph.load(nodes, edges)
    assert caught.value.message.startswith(f"edge {edge_id!r}: no node {', '.join(map(repr, missing))} ")
    assert caught.value.data == {"missing": missing}


def check(graph: KuzuGraph, model: Model, *instances: str) -> None:
    for instance in instances:
        assert state(graph, instance) == model.state(instance)


def node(instance: str, node_id: str, kind: str = "module", name: str | None = None,
         attributes: dict[str, Any] | None = None) -> GraphNode:
    return GraphNode(instance, node_id, kind, node_id if name is None else name, attributes or {})


def edge(instance: str, edge_id: str, from_id: str, to_id: str, kind: str = "CALLS",
         attributes: dict[str, Any] | None = None) -> GraphEdge:
    return GraphEdge(instance, edge_id, kind, from_id, to_id, attributes or {})


# -- examples -------------------------------------------------------------------------------------


def test_duplicates_in_one_load_last_wins(graph: KuzuGraph) -> None:
    space, model = fresh("dup"), Model()
    nodes = [node(space, "a", attributes={"v": 1}), node(space, "b"), node(space, "c"),
             node(space, "a", kind="package", name="A", attributes={"v": 2})]
    edges = [edge(space, "e1", "a", "b", attributes={"v": 1}), edge(space, "e1", "a", "c", attributes={"v": 2}),
             edge(space, "e2", "b", "c"), edge(space, "e1", "b", "a", kind="OWNS", attributes={"v": 3})]
    load_both(graph, model, nodes, edges)
    check(graph, model, space)
    assert graph.get_node(space, "a") == node(space, "a", kind="package", name="A", attributes={"v": 2}).as_dict()
    assert graph.get_edge(space, "e1") == edge(space, "e1", "b", "a", kind="OWNS", attributes={"v": 3}).as_dict()


def test_updates_in_place_and_moved_edges(graph: KuzuGraph) -> None:
    space, model = fresh("upd"), Model()
    load_both(graph, model, [node(space, name) for name in "abcd"],
              [edge(space, "keep", "a", "b"), edge(space, "move", "a", "b"), edge(space, "back", "c", "d"),
               edge(space, "loop", "d", "d")])
    # `back` moves away and back again within one load: it ends where it started, with new attributes.
    load_both(graph, model, [node(space, "b", kind="file", name="B!", attributes={"x": [1]})],
              [edge(space, "keep", "a", "b", kind="DEPENDS_ON", attributes={"w": 2}),
               edge(space, "move", "a", "c", attributes={"w": 3}),
               edge(space, "back", "d", "c"), edge(space, "back", "c", "d", attributes={"w": 4}),
               edge(space, "new", "b", "d")])
    check(graph, model, space)
    assert [hit["id"] for hit in graph.neighbors(space, ["a"], direction="out")] == ["b", "c"]
    assert graph.neighbors(space, ["c"], direction="in")[0]["path"][0]["id"] == "move"


def test_unicode_attributes_and_names(graph: KuzuGraph) -> None:
    space, model = fresh("uni"), Model()
    load_both(graph, model, [node(space, "ä", name="Ünïcødé 名前 🙂", attributes=UNICODE), node(space, "b")],
              [edge(space, "→", "ä", "b", kind="ÜBER", attributes=UNICODE)])
    check(graph, model, space)
    assert graph.get_edge(space, "→")["attributes"] == UNICODE
    assert graph.get_node(space, "ä")["attributes"] == UNICODE


def test_two_instances_keep_apart(graph: KuzuGraph) -> None:
    left, right, model = fresh("left"), fresh("right"), Model()
    load_both(graph, model, [node(left, "a", name="left a"), node(left, "b"), node(right, "a", name="right a"),
                             node(right, "c")],
              [edge(left, "e", "a", "b"), edge(right, "e", "c", "a", kind="OWNS")])
    check(graph, model, left, right)
    before = model.state(left), model.state(right)
    load_both(graph, model, [], [edge(left, "x", "a", "c")])  # `c` only exists in the other instance
    assert (state(graph, left), state(graph, right)) == before


def test_missing_endpoint_in_a_large_load_rolls_everything_back(graph: KuzuGraph) -> None:
    space, model = fresh("big"), Model()
    load_both(graph, model, [node(space, f"n{i}", attributes={"round": 0}) for i in range(10)],
              [edge(space, f"e{i}", f"n{i}", f"n{i + 1}") for i in range(9)])
    generation = graph.generation()
    count = 2 * graph_module.LOAD_BATCH + 500
    nodes = [node(space, f"n{i}", attributes={"round": 1}) for i in range(count)]
    edges = [edge(space, f"e{i}", f"n{i}", f"n{(i * 7) % count}", attributes={"round": 1}) for i in range(count)]
    edges[1700] = edge(space, "bad-first", "ghost", "n1")
    edges[1800] = edge(space, "bad-second", "n1", "ghost-2")
    edges[2000] = edge(space, "bad-third", "ghost", "ghost")
    with pytest.raises(NotFoundError) as caught:
        graph.load(nodes, edges)
    assert caught.value.message == "edge 'bad-first': no node 'ghost' in graph instance " + repr(space)
    assert caught.value.data == {"missing": ["ghost"]}
    assert model.load(nodes, edges) == ("bad-first", ["ghost"])
    check(graph, model, space)  # nothing from the failed load, not even its nodes

    edges[1700] = edges[1800] = edges[2000] = edge(space, "dup", "n0", "n0")
    load_both(graph, model, nodes, edges)
    check(graph, model, space)
    assert graph.generation() == generation + 2  # one bump per load, the failed one included


def test_bad_edge_names_every_missing_endpoint_once(graph: KuzuGraph) -> None:
    space, model = fresh("miss"), Model()
    load_both(graph, model, [node(space, "a")], [edge(space, "e", "ghost", "ghost"), edge(space, "f", "a", "x")])
    load_both(graph, model, [node(space, "a")], [edge(space, "f", "a", "x"), edge(space, "e", "ghost", "ghost")])
    load_both(graph, model, [node(space, "a")], [edge(space, "g", "y", "z")])
    check(graph, model, space)


def test_empty_load_is_fine(graph: KuzuGraph) -> None:
    graph.load([], [])


# -- property: any sequence of small loads -------------------------------------------------------

_ids = st.sampled_from(["a", "b", "c", "é"])
_attributes = st.dictionaries(st.sampled_from(["k", "ключ", "🙂"]), st.integers(-3, 3) | st.text(max_size=3),
                              max_size=2)
_node = st.tuples(st.sampled_from([0, 1]), _ids, st.sampled_from(["module", "file"]), st.text(max_size=4),
                  _attributes)
_edge = st.tuples(st.sampled_from([0, 1]), st.sampled_from(["e1", "e2", "e3"]), st.sampled_from(["CALLS", "OWNS"]),
                  _ids, _ids, _attributes)
_load = st.tuples(st.lists(_node, max_size=6), st.lists(_edge, max_size=6))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loads=st.lists(_load, min_size=1, max_size=3), batch=st.sampled_from([1, 2, 1000]))
def test_loads_match_sequential_upserts(graph: KuzuGraph, loads: list[Any], batch: int) -> None:
    spaces, model = (fresh("p"), fresh("q")), Model()
    with mock.patch.object(graph_module, "LOAD_BATCH", batch):
        for node_rows, edge_rows in loads:
            nodes = [GraphNode(spaces[space], *rest) for space, *rest in node_rows]
            edges = [GraphEdge(spaces[space], *rest) for space, *rest in edge_rows]
            load_both(graph, model, nodes, edges)
            check(graph, model, *spaces)
