"""The knowledge graph on PostgreSQL: node and edge tables, the graph steps in SQL.

Same validation (`stores.graph_checks`), shapes and expansion order as the embedded Kuzu graph: an
edge's endpoints must exist (NotFoundError), deleting a node deletes its edges (a cascading foreign
key), and `neighbors` walks breadth-first, one indexed query per level, each node reached once by
its first shortest path in (seed order, edge id, node id) order. Named views in the portable form
(`stores.graph_views`) run here as on the embedded graph; Cypher views run on the embedded graph
only: `run_view` refuses them here (and `check` reports them).
"""

from __future__ import annotations

import builtins
from typing import Any

import orjson

from ...errors import InvalidParamsError, NotFoundError
from ...workspace.layout import WorkspaceLayout
from ..graph import Admit, GraphEdge, GraphNode, NeighborHit, admitted
from ..graph_checks import (
    MAX_LEVEL_EDGES,
    attributes_json,
    check_attributes,
    check_expansion,
    check_graph_limit,
    check_instance,
    check_name,
    check_text,
)
from ..graph_views import run_portable
from ..kuzu.views import load_view
from .database import PgDatabase

STORE = "graph"
_NODE = "instance, id, kind, name, attributes"
_EDGE = "instance, id, kind, from_id, to_id, attributes"


def _node(row: tuple[Any, ...]) -> GraphNode:
    return GraphNode(row[0], row[1], row[2], row[3], orjson.loads(row[4]))


def _edge(row: tuple[Any, ...]) -> GraphEdge:
    return GraphEdge(row[0], row[1], row[2], row[3], row[4], orjson.loads(row[5]))


class PgGraph:
    def __init__(self, db: PgDatabase, layout: WorkspaceLayout, instance_default: str = "default") -> None:
        self.db = db
        self.layout = layout
        self.instance_default = check_instance(instance_default)

    def _space(self, instance: str | None) -> str:
        return check_instance(instance) if instance else self.instance_default

    # -- nodes and edges

    def upsert_node(self, instance: str, node_id: str, kind: str, name: str,
                    attributes: dict[str, Any]) -> dict[str, Any]:
        node = GraphNode(self._space(instance), check_text(node_id, "/id"), check_text(kind, "/kind"),
                         check_name(name, "/name"), check_attributes(attributes))
        self.load([node], [])
        return node.as_dict()

    def upsert_edge(self, instance: str, edge_id: str, kind: str, from_id: str, to_id: str,
                    attributes: dict[str, Any]) -> dict[str, Any]:
        edge = GraphEdge(self._space(instance), check_text(edge_id, "/id"), check_text(kind, "/kind"),
                         check_text(from_id, "/from"), check_text(to_id, "/to"), check_attributes(attributes))
        self.load([], [edge])
        return edge.as_dict()

    def load(self, nodes: builtins.list[GraphNode], edges: builtins.list[GraphEdge]) -> None:
        """Upsert many nodes then edges in one transaction: all land or none."""
        project = self.db.project
        with self.db.connection() as conn:
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO ca_graph_nodes(project, instance, id, kind, name, attributes) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (project, instance, id) DO UPDATE SET "
                    "kind = excluded.kind, name = excluded.name, attributes = excluded.attributes",
                    [(project, n.instance, n.id, n.kind, n.name, attributes_json(n.attributes)) for n in nodes])
            if edges:
                self._check_endpoints(conn, edges)
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO ca_graph_edges(project, instance, id, kind, from_id, to_id, attributes) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (project, instance, id) DO UPDATE SET "
                        "kind = excluded.kind, from_id = excluded.from_id, to_id = excluded.to_id, "
                        "attributes = excluded.attributes",
                        [(project, e.instance, e.id, e.kind, e.from_id, e.to_id, attributes_json(e.attributes))
                         for e in edges])
            if nodes or edges:
                self.db.bump(conn, STORE)

    def _check_endpoints(self, conn: Any, edges: builtins.list[GraphEdge]) -> None:
        wanted = sorted({(e.instance, end) for e in edges for end in (e.from_id, e.to_id)})
        rows = conn.execute("SELECT instance, id FROM ca_graph_nodes WHERE project = %s AND (instance, id) IN "
                            "(SELECT * FROM unnest(%s::text[], %s::text[])) FOR SHARE",
                            (self.db.project, [w[0] for w in wanted], [w[1] for w in wanted])).fetchall()
        found = {(row[0], row[1]) for row in rows}
        for edge in edges:
            missing = [n for n in dict.fromkeys((edge.from_id, edge.to_id)) if (edge.instance, n) not in found]
            if missing:
                raise NotFoundError(f"edge {edge.id!r}: no node {', '.join(map(repr, missing))} in graph instance "
                                    f"{edge.instance!r}", {"missing": missing})

    def get_node(self, instance: str, node_id: str) -> dict[str, Any] | None:
        rows = self.db.read(f"SELECT {_NODE} FROM ca_graph_nodes WHERE project = %s AND instance = %s AND id = %s",
                            (self.db.project, self._space(instance), check_text(node_id, "/id")))
        return _node(rows[0]).as_dict() if rows else None

    def get_edge(self, instance: str, edge_id: str) -> dict[str, Any] | None:
        rows = self.db.read(f"SELECT {_EDGE} FROM ca_graph_edges WHERE project = %s AND instance = %s AND id = %s",
                            (self.db.project, self._space(instance), check_text(edge_id, "/id")))
        return _edge(rows[0]).as_dict() if rows else None

    def delete_node(self, instance: str, node_id: str) -> bool:
        """Remove the node and every edge that touches it."""
        return self._delete("ca_graph_nodes", instance, check_text(node_id, "/id"))

    def delete_edge(self, instance: str, edge_id: str) -> bool:
        return self._delete("ca_graph_edges", instance, check_text(edge_id, "/id"))

    def _delete(self, table: str, instance: str, ident: str) -> bool:
        with self.db.connection() as conn:
            gone = conn.execute(f"DELETE FROM {table} WHERE project = %s AND instance = %s AND id = %s",
                                (self.db.project, self._space(instance), ident)).rowcount > 0
            if gone:
                self.db.bump(conn, STORE)
        return gone

    def list_nodes(self, instance: str, kind: str | None = None, limit: int = 100) -> builtins.list[dict[str, Any]]:
        return [n.as_dict() for n in self.find_nodes(instance, kind=kind, limit=limit)]

    def find_nodes(self, instance: str, *, kind: str | None = None, name: str | None = None,
                   limit: int = 100) -> builtins.list[GraphNode]:
        """Entity lookup: the instance's nodes of a kind and/or with an exact name, by id."""
        sql = f"SELECT {_NODE} FROM ca_graph_nodes WHERE project = %s AND instance = %s"
        params: builtins.list[Any] = [self.db.project, self._space(instance)]
        if kind is not None:
            sql += " AND kind = %s"
            params.append(check_text(kind, "/kind"))
        if name is not None:
            sql += " AND name = %s"
            params.append(check_name(name, "/name"))
        params.append(check_graph_limit(limit))
        return [_node(row) for row in self.db.read(sql + " ORDER BY id COLLATE \"C\" LIMIT %s", tuple(params))]

    def dump(self) -> dict[str, builtins.list[dict[str, Any]]]:
        """Every node and edge of every instance (for `memory export`), sorted by instance and id."""
        nodes = self.db.read(f"SELECT {_NODE} FROM ca_graph_nodes WHERE project = %s "
                             "ORDER BY instance COLLATE \"C\", id COLLATE \"C\"", (self.db.project,))
        edges = self.db.read(f"SELECT {_EDGE} FROM ca_graph_edges WHERE project = %s "
                             "ORDER BY instance COLLATE \"C\", id COLLATE \"C\"", (self.db.project,))
        return {"nodes": [_node(row).as_dict() for row in nodes], "edges": [_edge(row).as_dict() for row in edges]}

    # -- views and expansion

    def run_view(self, view_id: str, params: dict[str, Any],
                 timeout_ms: int | None = None) -> builtins.list[dict[str, Any]]:
        # `timeout_ms` is not needed here: only portable views run, as indexed lookups bounded by
        # their `limit` and limits.graph_depth, unlike a free Cypher query on the embedded graph.
        view = load_view(self.layout, view_id)
        bound = view.bind(params if params is not None else {})
        if view.portable is not None:
            return run_portable(self, view.id, view.portable, bound)
        raise InvalidParamsError(
            f"graph view {view_id!r} is Cypher, which runs on the embedded graph only (stores.backend is "
            "\"postgres\"); write it in the portable form (match, expand) to run it on every backend",
            [{"path": "/view", "message": "Cypher views need stores.backend \"embedded\""}])

    def neighbors(self, instance: str, node_ids: builtins.list[str], depth: int = 1,
                  edge_kinds: builtins.list[str] | None = None, limit: int = 50,
                  direction: str = "both", *, admit: Admit | None = None) -> builtins.list[dict[str, Any]]:
        space = self._space(instance)
        seeds, depth, kinds, limit = check_expansion(node_ids, depth, edge_kinds, limit, direction)
        if not seeds or not depth or not limit:
            return []
        return [hit.as_dict() for hit in self._expand(space, seeds, depth, kinds, limit, direction, admit)]

    def _expand(self, space: str, seeds: builtins.list[str], depth: int, kinds: builtins.list[str], limit: int,
                direction: str, admit: Admit | None = None) -> builtins.list[NeighborHit]:
        paths: dict[str, tuple[str, tuple[GraphEdge, ...]]] = {seed: (seed, ()) for seed in seeds}
        frontier = list(dict.fromkeys(seeds))
        hits: builtins.list[NeighborHit] = []
        for _ in range(depth):
            order = {node_id: index for index, node_id in enumerate(frontier)}
            rows = sorted(self._level(space, frontier, kinds, direction),
                          key=lambda row: (order[row[0]], row[2], row[8]))
            frontier = []
            for row in rows:
                source, reached = row[0], row[8]
                if reached in paths:
                    continue
                seed, path = paths[source]
                edge = _edge(row[1:7])
                if not admitted(admit, edge, reached):
                    continue
                paths[reached] = (seed, (*path, edge))
                hits.append(NeighborHit(node=_node(row[7:12]), seed=seed, path=(*path, edge)))
                frontier.append(reached)
                if len(hits) >= limit:
                    return hits
            if not frontier:
                break
        return hits

    def _level(self, space: str, frontier: builtins.list[str], kinds: builtins.list[str],
               direction: str) -> builtins.list[tuple[Any, ...]]:
        """(source, edge columns…, reached node columns…) of every edge leaving the frontier."""
        legs = {"out": [("from_id", "to_id")], "in": [("to_id", "from_id")],
                "both": [("from_id", "to_id"), ("to_id", "from_id")]}[direction]
        kind_filter = " AND e.kind = ANY(%s)" if kinds else ""
        parts, params = [], []
        for near, far in legs:
            parts.append(f"SELECT e.{near}, e.instance, e.id, e.kind, e.from_id, e.to_id, e.attributes, "
                         "n.instance, n.id, n.kind, n.name, n.attributes FROM ca_graph_edges e JOIN ca_graph_nodes n "
                         f"ON n.project = e.project AND n.instance = e.instance AND n.id = e.{far} "
                         f"WHERE e.project = %s AND e.instance = %s AND e.{near} = ANY(%s){kind_filter}")
            params += [self.db.project, space, frontier, *([kinds] if kinds else [])]
        return self.db.read(" UNION ALL ".join(parts) + " LIMIT %s", (*params, MAX_LEVEL_EDGES))

    def generation(self) -> int:
        return self.db.generation(STORE)

    def close(self) -> None:
        """The database closes with the store set."""
