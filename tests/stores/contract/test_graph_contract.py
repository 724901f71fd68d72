"""The knowledge-graph contract on every backend: nodes, edges, entity lookup, k-hop expansion."""

from __future__ import annotations

import pytest

from context_assembly.errors import InvalidParamsError, NotFoundError
from context_assembly.stores.graph import GraphStore
from context_assembly.stores.store_set import StoreSet


@pytest.fixture
def graph(stores: StoreSet) -> GraphStore:
    assert stores.graph is not None
    g = stores.graph
    for node_id, kind in (("a", "Module"), ("b", "Module"), ("c", "Module"), ("d", "Test"), ("e", "Module")):
        g.upsert_node("main", node_id, kind, node_id.upper(), {"n": node_id})
    for edge_id, kind, source, target in (("e1", "imports", "a", "b"), ("e2", "imports", "b", "c"),
                                          ("e3", "tests", "d", "a"), ("e4", "imports", "c", "e")):
        g.upsert_edge("main", edge_id, kind, source, target, {})
    return g


def test_nodes_and_edges_round_trip(graph: GraphStore) -> None:
    assert isinstance(graph, GraphStore)
    assert graph.get_node("main", "a") == {"instance": "main", "id": "a", "kind": "Module", "name": "A",
                                           "attributes": {"n": "a"}}
    assert graph.get_edge("main", "e1") == {"instance": "main", "id": "e1", "kind": "imports", "from": "a", "to": "b",
                                            "attributes": {}}
    assert graph.get_node("other", "a") is None and graph.get_edge("main", "nope") is None
    graph.upsert_node("main", "a", "Module", "A2", {"n": 2})
    assert graph.get_node("main", "a")["name"] == "A2"  # type: ignore[index]
    graph.upsert_edge("main", "e1", "imports", "a", "c", {"w": 1})
    assert graph.get_edge("main", "e1")["to"] == "c"  # type: ignore[index]
    assert [n["id"] for n in graph.list_nodes("main", kind="Module")] == ["a", "b", "c", "e"]
    assert [n["id"] for n in graph.list_nodes("main", limit=2)] == ["a", "b"]


def test_edges_need_their_nodes_and_deleting_a_node_deletes_its_edges(graph: GraphStore) -> None:
    start = graph.generation()
    with pytest.raises(NotFoundError):
        graph.upsert_edge("main", "bad", "imports", "a", "ghost", {})
    assert graph.get_edge("main", "bad") is None
    assert graph.delete_node("main", "b") is True and graph.delete_node("main", "b") is False
    assert graph.get_edge("main", "e1") is None and graph.get_edge("main", "e2") is None
    assert graph.delete_edge("main", "e3") is True and graph.delete_edge("main", "e3") is False
    assert graph.generation() > start
    with pytest.raises(InvalidParamsError):
        graph.upsert_node("main", "", "Module", "x", {})


def test_k_hop_expansion(graph: GraphStore) -> None:
    one = graph.neighbors("main", ["a"], depth=1)
    assert [(h["id"], h["distance"]) for h in one] == [("b", 1), ("d", 1)]
    two = graph.neighbors("main", ["a"], depth=3, edge_kinds=["imports"])
    assert [(h["id"], h["distance"], [e["id"] for e in h["path"]]) for h in two] == [
        ("b", 1, ["e1"]), ("c", 2, ["e1", "e2"]), ("e", 3, ["e1", "e2", "e4"])]
    assert all(h["seed"] == "a" for h in two)
    assert [h["id"] for h in graph.neighbors("main", ["a"], depth=2, direction="in")] == ["d"]
    assert [h["id"] for h in graph.neighbors("main", ["a"], depth=5, limit=2)] == ["b", "d"]
    assert graph.neighbors("main", ["ghost"], depth=2) == [] and graph.neighbors("main", ["a"], depth=0) == []
    with pytest.raises(InvalidParamsError):
        graph.neighbors("main", ["a"], depth=99)


def write_view(stores: StoreSet, view_id: str, body: dict) -> None:
    import json

    views = stores.notes.memory_dir.parent / "knowledgegraph" / "views"  # type: ignore[attr-defined]
    views.mkdir(parents=True, exist_ok=True)
    (views / f"{view_id}.json").write_text(json.dumps({"id": view_id, "description": "d", **body}))


def test_portable_views_run_alike_on_every_backend(stores: StoreSet, graph: GraphStore) -> None:
    write_view(stores, "modules", {"match": {"instance": "main", "kind": "Module"}, "limit": "$limit",
                                   "params": {"limit": {"type": "integer", "default": 3}}})
    write_view(stores, "importers", {
        "params": {"name": {"type": "string"}, "depth": {"type": "integer", "default": 1}},
        "match": {"instance": "main", "name": "$name"},
        "expand": {"depth": "$depth", "edge_kinds": ["imports"], "direction": "in"}})
    assert [row["id"] for row in graph.run_view("modules", {})] == ["a", "b", "c"]
    assert [row["id"] for row in graph.run_view("modules", {"limit": 10})] == ["a", "b", "c", "e"]
    rows = graph.run_view("importers", {"name": "C", "depth": 2})
    assert [(row["id"], row["distance"], row["seed"]) for row in rows] == [("b", 1, "c"), ("a", 2, "c")]
    with pytest.raises(InvalidParamsError):
        graph.run_view("importers", {})  # name is required
    write_view(stores, "broken", {"match": {"colour": "red"}})
    with pytest.raises(InvalidParamsError):
        graph.run_view("broken", {})


def test_the_published_schema_takes_either_form() -> None:
    from context_assembly.schemas import validation_errors

    assert validation_errors("graph-view", {"id": "v", "match": {"kind": "Module"}, "expand": {"depth": 2}}) == []
    assert validation_errors("graph-view", {"id": "v", "cypher": "MATCH (n:Entity) RETURN n.id AS id"}) == []
    assert validation_errors("graph-view", {"id": "v", "description": "neither"}) != []


def test_an_admitted_walk_never_crosses_what_it_may_not_see(graph: GraphStore) -> None:
    """`admit` (a restricted caller's read patterns over node and edge URIs): a node reached only
    through a hidden node or edge is not reached, and no path names either."""
    everything = graph.neighbors("main", ["a"], depth=3)
    assert [h["id"] for h in everything] == ["b", "d", "c", "e"]
    hidden = {"graph://main/node/b", "graph://main/edge/e3"}
    walked = graph.neighbors("main", ["a"], depth=3, admit=lambda uri: uri not in hidden)
    assert walked == []  # b hides c and e behind it; e3 hides d
    assert [h["id"] for h in graph.neighbors("main", ["a"], depth=3, admit=lambda uri: uri != "graph://main/node/c")
            ] == ["b", "d"]
