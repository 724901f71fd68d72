"""The knowledge-graph store interface (SPEC §5.1 `graph://`, §5.2 graph steps, §5.3).

Nodes and edges live in named instances (`graph://<instance>/node/<id>`); an edge joins two nodes of
its own instance. Named views (`.codebolt/knowledgegraph/views/{id}.json`) are read-only Cypher
queries whose parameters are bound, never spliced (embedded only), or portable declarative views
(`stores.graph_views`) that every backend runs. Implementations: `stores.kuzu.KuzuGraph`
(embedded) and `stores.postgres.graph.PgGraph`.

Every method returns plain JSON-ready dicts (the `as_dict()` of the shapes below), so callers never
depend on a backend's row types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from attrs import Factory, frozen

from .uri import render


@frozen
class GraphNode:
    instance: str
    id: str
    kind: str
    name: str
    attributes: dict[str, Any] = Factory(dict)

    def as_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, "id": self.id, "kind": self.kind, "name": self.name,
                "attributes": self.attributes}


@frozen
class GraphEdge:
    instance: str
    id: str
    kind: str
    from_id: str
    to_id: str
    attributes: dict[str, Any] = Factory(dict)

    def as_dict(self) -> dict[str, Any]:
        # `from`/`to` are the wire names (SPEC §5.1 edge `{kind, from, to}`).
        return {"instance": self.instance, "id": self.id, "kind": self.kind, "from": self.from_id,
                "to": self.to_id, "attributes": self.attributes}


Admit = Callable[[str], bool]  # graph://<instance>/node|edge/<id> -> may the walk go there


def admitted(admit: Admit | None, edge: GraphEdge, node_id: str) -> bool:
    """Whether a walk may take `edge` to the node `node_id` (always, without `admit`)."""
    return admit is None or (admit(render("graph", (edge.instance, "edge", edge.id)))
                             and admit(render("graph", (edge.instance, "node", node_id))))


@frozen
class NeighborHit:
    """A node reached by expansion: the edges walked from a seed node, in order, and their count.

    As a dict it is the node's own fields plus `seed`, `distance` and `path`, so a caller that only
    wants nodes can read it as one.
    """

    node: GraphNode
    seed: str
    path: tuple[GraphEdge, ...]

    @property
    def distance(self) -> int:
        return len(self.path)

    def as_dict(self) -> dict[str, Any]:
        return {**self.node.as_dict(), "seed": self.seed, "distance": self.distance,
                "path": [edge.as_dict() for edge in self.path]}


@runtime_checkable
class GraphStore(Protocol):
    """What the URI layer and the pipeline steps need from a knowledge graph.

    Errors: InvalidParamsError for bad input (ids, kinds, view params, write clauses in a view),
    NotFoundError for an unknown view or a missing edge endpoint, StorageError when the database
    cannot be reached, TimeoutError_ when a query runs too long.
    """

    def upsert_node(self, instance: str, node_id: str, kind: str, name: str,
                    attributes: dict[str, Any]) -> dict[str, Any]: ...

    def upsert_edge(self, instance: str, edge_id: str, kind: str, from_id: str, to_id: str,
                    attributes: dict[str, Any]) -> dict[str, Any]: ...

    def get_node(self, instance: str, node_id: str) -> dict[str, Any] | None: ...

    def get_edge(self, instance: str, edge_id: str) -> dict[str, Any] | None: ...

    def delete_node(self, instance: str, node_id: str) -> bool: ...

    def delete_edge(self, instance: str, edge_id: str) -> bool: ...

    def list_nodes(self, instance: str, kind: str | None = None, limit: int = 100) -> list[dict[str, Any]]: ...

    def find_nodes(self, instance: str, *, kind: str | None = None, name: str | None = None,
                   limit: int = 100) -> list[GraphNode]:
        """Entity lookup: nodes of a kind and/or with an exact name, by id."""
        ...

    def run_view(self, view_id: str, params: dict[str, Any], timeout_ms: int | None = None) -> list[dict[str, Any]]:
        ...

    def neighbors(self, instance: str, node_ids: list[str], depth: int = 1, edge_kinds: list[str] | None = None,
                  limit: int = 50, *, admit: Admit | None = None) -> list[dict[str, Any]]:
        """Breadth-first from the seeds: `NeighborHit.as_dict()` rows, nearest first, seeds left out.
        `admit`: the node and edge URIs a restricted caller may see; the walk never crosses the others."""
        ...

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """`{"nodes", "edges"}`: every node and edge of every instance, as dicts (for export)."""
        ...

    def generation(self) -> int: ...

    def close(self) -> None: ...
