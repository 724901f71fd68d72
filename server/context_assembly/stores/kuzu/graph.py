"""The embedded knowledge graph at `.codebolt/knowledgegraph/kuzu/graph.kuzu` (SPEC §2, §5.1, §11).

The engine is LadybugDB (package `ladybug`), the maintained fork of Kuzu: the same Cypher and Python
API. The folder keeps the name the seeds give it; a graph written by Kuzu 0.11 is converted on first
open (`migrate`). Why the fork, with measurements: README "Decisions where the SPEC is silent".

Schema (created on first use, idempotently):

    NODE TABLE Entity(key STRING PRIMARY KEY,  -- "<instance>/<id>"
                      instance STRING, id STRING, kind STRING, name STRING,
                      attributes STRING)         -- a JSON object
    REL TABLE Relates(FROM Entity TO Entity,
                      key STRING,                -- "<instance>/<edge id>", unique (kept so by upsert_edge)
                      instance STRING, id STRING, kind STRING,
                      from_id STRING, to_id STRING,  -- the endpoints' node ids, so a returned edge is self-contained
                      attributes STRING)         -- a JSON object

One relationship table with a `kind` property, rather than a table per kind: kinds come from
extraction (`calls`, `depends-on`, ...) and need not be identifiers, and a view that names a kind no
edge has yet still runs (it returns nothing instead of failing on a missing table). Instance names
contain no '/', so the key is unambiguous. Views are written against this schema, e.g.

    MATCH (m:Entity {name: $name})<-[r:Relates {kind: 'DEPENDS_ON'}]-(d:Entity)
    RETURN d.name AS name, d.kind AS kind LIMIT $limit

Whole nodes, edges and paths in a view's result come back as the store's dicts (see `rows`).
Every write bumps a counter file `kuzu/generation` (before committing, under the lock), which other
processes read without opening the database to tell whether their caches are stale.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import ladybug
import orjson

from ...errors import ContextAssemblyError, InvalidParamsError, NotFoundError, StorageError, TimeoutError_
from ...limits import current
from ...workspace.atomic import write_atomic
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
    invalid,
)
from ..graph_views import run_portable
from .rows import NODE_TABLE, REL_TABLE, edge_from, node_from, to_json
from .session import KuzuSessions, SessionSettings
from .views import load_view

T = TypeVar("T")

NODE_DDL = (f"CREATE NODE TABLE IF NOT EXISTS {NODE_TABLE}(key STRING, instance STRING, id STRING, kind STRING, "
            "name STRING, attributes STRING, PRIMARY KEY(key))")
REL_DDL = (f"CREATE REL TABLE IF NOT EXISTS {REL_TABLE}(FROM {NODE_TABLE} TO {NODE_TABLE}, key STRING, "
           "instance STRING, id STRING, kind STRING, from_id STRING, to_id STRING, attributes STRING)")

GENERATION_FILE = "generation"
# Rows per UNWIND statement in `load`: bounds the size of one parameter list.
LOAD_BATCH = 1000

_NODE_COLUMNS = "n.instance AS instance, n.id AS id, n.kind AS kind, n.name AS name, n.attributes AS attributes"
_EDGE_COLUMNS = ("r.instance AS instance, r.id AS id, r.kind AS kind, r.from_id AS from_id, r.to_id AS to_id, "
                 "r.attributes AS attributes")


class KuzuGraph:
    """`GraphStore` on the embedded graph database (LadybugDB) shared by the workspace's processes."""

    def __init__(self, layout: WorkspaceLayout | Path | str, instance_default: str = "default",
                 settings: SessionSettings | None = None) -> None:
        self.layout = layout if isinstance(layout, WorkspaceLayout) else WorkspaceLayout(layout)
        self.instance_default = check_instance(instance_default)
        self._schema_ready = False
        self._sessions = KuzuSessions(self.layout, settings, on_open=self._ensure_schema)

    # -- nodes and edges ----------------------------------------------------------------------

    def upsert_node(self, instance: str, node_id: str, kind: str, name: str,
                    attributes: dict[str, Any]) -> dict[str, Any]:
        node = GraphNode(instance=self._instance(instance), id=check_text(node_id, "/id"),
                         kind=check_text(kind, "/kind"), name=check_name(name, "/name"),
                         attributes=check_attributes(attributes))
        return self._write(lambda conn: _put_node(conn, node)).as_dict()

    def upsert_edge(self, instance: str, edge_id: str, kind: str, from_id: str, to_id: str,
                    attributes: dict[str, Any]) -> dict[str, Any]:
        edge = GraphEdge(instance=self._instance(instance), id=check_text(edge_id, "/id"),
                         kind=check_text(kind, "/kind"), from_id=check_text(from_id, "/from"),
                         to_id=check_text(to_id, "/to"),
                         attributes=check_attributes(attributes))
        return self._write(lambda conn: _put_edge(conn, edge)).as_dict()

    def get_node(self, instance: str, node_id: str) -> dict[str, Any] | None:
        key = _key(self._instance(instance), check_text(node_id, "/id"))
        rows = self._read(lambda conn: _query(conn, f"MATCH (n:{NODE_TABLE} {{key: $key}}) RETURN {_NODE_COLUMNS}",
                                              {"key": key}))
        return node_from(rows[0]).as_dict() if rows else None

    def get_edge(self, instance: str, edge_id: str) -> dict[str, Any] | None:
        key = _key(self._instance(instance), check_text(edge_id, "/id"))
        rows = self._read(lambda conn: _find_edge(conn, key))
        return edge_from(rows[0]).as_dict() if rows else None

    def delete_node(self, instance: str, node_id: str) -> bool:
        """Remove the node and every edge that touches it."""
        key = _key(self._instance(instance), check_text(node_id, "/id"))
        rows = self._write(lambda conn: _query(
            conn, f"MATCH (n:{NODE_TABLE} {{key: $key}}) DETACH DELETE n RETURN count(*) AS removed", {"key": key}))
        return bool(rows and rows[0]["removed"])

    def delete_edge(self, instance: str, edge_id: str) -> bool:
        key = _key(self._instance(instance), check_text(edge_id, "/id"))
        rows = self._write(lambda conn: _query(
            conn, f"MATCH ()-[r:{REL_TABLE} {{key: $key}}]->() DELETE r RETURN count(*) AS removed", {"key": key}))
        return bool(rows and rows[0]["removed"])

    def list_nodes(self, instance: str, kind: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return [node.as_dict() for node in self.find_nodes(instance, kind=kind, limit=limit)]

    def find_nodes(self, instance: str, *, kind: str | None = None, name: str | None = None,
                   limit: int = 100) -> list[GraphNode]:
        """Entity lookup: the instance's nodes of a kind and/or with an exact name, by id."""
        params: dict[str, Any] = {"instance": self._instance(instance),
                                  "limit": check_graph_limit(limit)}
        where = "n.instance = $instance"
        if kind is not None:
            params["kind"] = check_text(kind, "/kind")
            where += " AND n.kind = $kind"
        if name is not None:
            params["name"] = check_name(name, "/name")
            where += " AND n.name = $name"
        cypher = f"MATCH (n:{NODE_TABLE}) WHERE {where} RETURN {_NODE_COLUMNS} ORDER BY n.id LIMIT $limit"
        return [node_from(row) for row in self._read(lambda conn: _query(conn, cypher, params))]

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """Every node and edge of every instance (for `memory export`), sorted by instance and id."""
        # sorted here, not by the database: its sort holds every row in the buffer pool, which a graph
        # of some tens of megabytes filled ("buffer pool is full"), and no export was possible
        nodes = self._read(lambda conn: _query(conn, f"MATCH (n:{NODE_TABLE}) RETURN {_NODE_COLUMNS}"))
        edges = self._read(lambda conn: _query(conn, f"MATCH ()-[r:{REL_TABLE}]->() RETURN {_EDGE_COLUMNS}"))
        node_list = sorted((node_from(row).as_dict() for row in nodes), key=lambda n: (n["instance"], n["id"]))
        edge_list = sorted((edge_from(row).as_dict() for row in edges), key=lambda e: (e["instance"], e["id"]))
        return {"nodes": node_list, "edges": edge_list}

    # -- views and expansion ------------------------------------------------------------------

    def run_view(self, view_id: str, params: dict[str, Any], timeout_ms: int | None = None) -> list[dict[str, Any]]:
        """Rows of the named view as dicts (at most limits.graph_view_rows), params bound as Kuzu parameters.

        `timeout_ms` (a pipeline's remaining time) interrupts the query inside the database, so the
        work a deadline abandons stops too instead of running on in a worker thread."""
        view = load_view(self.layout, view_id)
        bound = view.bind(params if params is not None else {})
        if view.portable is not None:
            return run_portable(self, view.id, view.portable, bound)
        default_ms = int(self._sessions.settings.query_timeout_s * 1000)
        max_rows = current().graph_view_rows  # read here: `work` runs on the session's own thread

        def work(conn: ladybug.Connection) -> list[dict[str, Any]]:
            if timeout_ms is not None:
                conn.set_query_timeout(max(1, min(timeout_ms, default_ms)))
            # Second guard after the keyword check: the database itself refuses writes here.
            conn.execute("BEGIN TRANSACTION READ ONLY")
            try:
                return _query(conn, view.cypher, bound, max_rows=max_rows, view_id=view.id)
            finally:
                with contextlib.suppress(RuntimeError):
                    conn.execute("ROLLBACK")
                if timeout_ms is not None:
                    conn.set_query_timeout(default_ms)

        return [{name: to_json(value) for name, value in row.items()} for row in self._read(work)]

    def neighbors(self, instance: str, node_ids: list[str], depth: int = 1, edge_kinds: list[str] | None = None,
                  limit: int = 50, direction: str = "both", *, admit: Admit | None = None) -> list[dict[str, Any]]:
        """Breadth-first expansion from `node_ids`: each node reached once, by its shortest path.

        Results are ordered by distance, then by edge id and node id; the seeds themselves are not
        included. `edge_kinds` None or empty means every kind; `direction` is `both`, `out` or `in`.
        """
        space = self._instance(instance)
        seeds, depth, kinds, limit = check_expansion(node_ids, depth, edge_kinds, limit, direction)
        if not seeds or not depth or not limit:
            return []
        hits = self._read(lambda conn: _expand(conn, space, seeds, depth, kinds, limit, direction, admit))
        return [hit.as_dict() for hit in hits]

    # -- bookkeeping --------------------------------------------------------------------------

    def generation(self) -> int:
        """Counts writes from every process; read without opening the database."""
        try:
            return int((self.layout.kuzu_dir / GENERATION_FILE).read_text(encoding="ascii").strip() or 0)
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        self._sessions.close()

    def load(self, nodes: list[GraphNode], edges: list[GraphEdge]) -> None:
        """Upsert many nodes then edges in one transaction: all land or none.

        Same outcome as upserting them one by one in order (the last of duplicate ids wins), in
        batches of LOAD_BATCH rows per statement.
        """
        def work(conn: ladybug.Connection) -> None:
            # Checked before any write, so a refused load rolls back nothing: in stress tests Kuzu
            # 0.11.3 failed ("write-write conflict") or crashed on keys a rolled-back load had written.
            _check_endpoints(conn, edges, loaded={_key(node.instance, node.id) for node in nodes})
            _put_nodes(conn, nodes)
            _put_edges(conn, edges)
        self._write(work)

    def __enter__(self) -> KuzuGraph:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _instance(self, instance: str | None) -> str:
        return check_instance(instance) if instance else self.instance_default

    def _read(self, work: Callable[[ladybug.Connection], T]) -> T:
        try:
            return self._sessions.run(work)
        except RuntimeError as exc:
            raise StorageError(f"knowledge graph read failed: {exc}") from exc

    def _write(self, work: Callable[[ladybug.Connection], T]) -> T:
        def job(conn: ladybug.Connection) -> T:
            self._bump_generation()  # before the commit: a crash in between only costs a cache refill
            conn.execute("BEGIN TRANSACTION")
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(RuntimeError):
                    conn.execute("ROLLBACK")
                raise
            return result
        try:
            return self._sessions.run(job)
        except RuntimeError as exc:
            raise StorageError(f"knowledge graph write failed: {exc}") from exc

    def _bump_generation(self) -> None:
        # Runs under the kuzu lock, so read-increment-write cannot lose a count.
        write_atomic(self.layout.kuzu_dir / GENERATION_FILE, str(self.generation() + 1).encode("ascii"))

    def _ensure_schema(self, conn: ladybug.Connection, created: bool) -> None:
        if self._schema_ready and not created:
            return
        tables = {row["name"] for row in _query(conn, "CALL show_tables() RETURN name")}
        for table, ddl in ((NODE_TABLE, NODE_DDL), (REL_TABLE, REL_DDL)):
            if table not in tables:
                conn.execute(ddl)
        self._schema_ready = True


def load_graph_json(graph: Any, path: Path | str, instance: str | None = None) -> dict[str, int]:
    """Upsert the nodes and edges of a JSON file into `graph`; returns how many of each.

    The file is `{"instance"?, "nodes": [{id, kind, name, attributes}], "edges": [{id?, kind, from, to,
    attributes}]}`; `instance` (argument, else the file's, else the graph's default) names the graph
    instance. The whole file is checked first; a store with `load` then takes it in one transaction.
    """
    try:
        document = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InvalidParamsError(f"cannot read graph data {path}: {exc}", [{"path": "", "message": str(exc)}]) from exc
    return load_graph_entries(graph, *graph_entries(graph, document, instance))


def graph_entries(graph: Any, document: Any, instance: str | None = None) -> tuple[list[GraphNode], list[GraphEdge]]:
    """The checked nodes and edges of graph data `{instance?, nodes, edges}`, nothing written.
    An edge without an `id` gets one made of its kind and ends, so loading twice gives one edge."""
    if not isinstance(document, dict):
        raise invalid("", "expected an object {nodes, edges}")
    space = instance or document.get("instance") or getattr(graph, "instance_default", "default")
    space = check_instance(space)
    nodes = [_node_entry(space, entry, f"/nodes/{index}") for index, entry in enumerate(_list(document, "nodes"))]
    edges = [_edge_entry(space, entry, f"/edges/{index}") for index, entry in enumerate(_list(document, "edges"))]
    return nodes, edges


def load_graph_entries(graph: Any, nodes: list[GraphNode], edges: list[GraphEdge]) -> dict[str, int]:
    if callable(getattr(graph, "load", None)):  # one transaction where the store offers it
        graph.load(nodes, edges)
    else:
        for node in nodes:
            graph.upsert_node(node.instance, node.id, node.kind, node.name, node.attributes)
        for edge in edges:
            graph.upsert_edge(edge.instance, edge.id, edge.kind, edge.from_id, edge.to_id, edge.attributes)
    return {"nodes": len(nodes), "edges": len(edges)}


# -- queries (run on the session's owner thread) --------------------------------------------------


def _query(conn: ladybug.Connection, cypher: str, params: dict[str, Any] | None = None, *,
           max_rows: int | None = None, view_id: str | None = None) -> list[dict[str, Any]]:
    try:
        result = conn.execute(cypher, parameters=params or {})
        if isinstance(result, list):  # several statements; views are refused earlier, so never expected
            for extra in result[1:]:
                extra.close()
            result = result[0]
        try:
            names = result.get_column_names()
            rows: list[dict[str, Any]] = []
            while result.has_next() and (max_rows is None or len(rows) < max_rows):
                rows.append(dict(zip(names, result.get_next(), strict=True)))
            return rows
        finally:
            result.close()
    except (RuntimeError, ValueError, TypeError) as exc:
        raise _query_error(exc, view_id) from exc


# what the engine says of a parameter value it cannot type (a mixed list, null in a struct, a cast)
_VALUE_PROBLEMS = ("Cannot convert Python object", "is incompatible with", "Unable to cast Python instance",
                   "UNREACHABLE_CODE", "Conversion exception", "invalid literal for")


def _query_error(exc: Exception, view_id: str | None) -> ContextAssemblyError:
    message = str(exc)
    if "Interrupted" in message:
        return TimeoutError_(f"knowledge graph query ran too long{_named(view_id)}: {message}")
    if view_id is not None and (not isinstance(exc, RuntimeError) or any(p in message for p in _VALUE_PROBLEMS)):
        return InvalidParamsError(f"graph view {view_id!r}: a parameter value the graph cannot take "
                                  "(a list mixing types, null inside a list or object, an integer past 64 bits, "
                                  "a text it casts to a number?)",
                                  [{"path": "/params", "message": message.splitlines()[0][:300]}])
    if view_id is not None:
        if message.startswith(("Parser exception", "Binder exception", "Catalog exception")) or \
                "read-only transaction" in message:
            return InvalidParamsError(f"graph view {view_id!r} cannot run: {message}",
                                      [{"path": "/cypher", "message": message}])
        if "ANY type" in message:  # an empty list bound to a parameter has no element type in Kuzu
            return InvalidParamsError(f"graph view {view_id!r}: a parameter value has no type (empty list?)",
                                      [{"path": "/params", "message": message}])
    return StorageError(f"knowledge graph query failed{_named(view_id)}: {message}")


def _named(view_id: str | None) -> str:
    return f" (view {view_id!r})" if view_id else ""


def _put_node(conn: ladybug.Connection, node: GraphNode) -> GraphNode:
    _query(conn, f"MERGE (n:{NODE_TABLE} {{key: $key}}) SET n.instance = $instance, n.id = $id, n.kind = $kind, "
                 "n.name = $name, n.attributes = $attributes",
           {"key": _key(node.instance, node.id), "instance": node.instance, "id": node.id, "kind": node.kind,
            "name": node.name, "attributes": attributes_json(node.attributes)})
    return node


def _put_edge(conn: ladybug.Connection, edge: GraphEdge) -> GraphEdge:
    _check_endpoints(conn, [edge])
    key = _key(edge.instance, edge.id)
    params = {"key": key, "kind": edge.kind, "attributes": attributes_json(edge.attributes)}
    current = _find_edge(conn, key)
    if current and (current[0]["from_id"], current[0]["to_id"]) == (edge.from_id, edge.to_id):
        _query(conn, f"MATCH ()-[r:{REL_TABLE} {{key: $key}}]->() SET r.kind = $kind, r.attributes = $attributes",
               params)
        return edge
    if current:  # moved to other endpoints: a relationship cannot be re-pointed, so replace it
        _query(conn, f"MATCH ()-[r:{REL_TABLE} {{key: $key}}]->() DELETE r", {"key": key})
    _query(conn, f"MATCH (a:{NODE_TABLE} {{key: $from_key}}), (b:{NODE_TABLE} {{key: $to_key}}) "
                 f"CREATE (a)-[:{REL_TABLE} {{key: $key, instance: $instance, id: $id, kind: $kind, "
                 "from_id: $from_id, to_id: $to_id, attributes: $attributes}]->(b)",
           {**params, "from_key": _key(edge.instance, edge.from_id), "to_key": _key(edge.instance, edge.to_id),
            "instance": edge.instance, "id": edge.id, "from_id": edge.from_id, "to_id": edge.to_id})
    return edge


def _find_edge(conn: ladybug.Connection, key: str) -> list[dict[str, Any]]:
    return _query(conn, f"MATCH ()-[r:{REL_TABLE} {{key: $key}}]->() RETURN {_EDGE_COLUMNS}", {"key": key})


# -- bulk load: the same upserts as `_put_node`/`_put_edge`, LOAD_BATCH rows per statement ----------
# Keys are bound through `WITH row.x AS x` before each MATCH: Kuzu 0.11 plans a key taken straight
# from the row struct as a cross product of node scans (minutes per 1,000 rows), a plain variable as
# a hash join (milliseconds).

_MERGE_NODES = (f"UNWIND $rows AS row MERGE (n:{NODE_TABLE} {{key: row.key}}) SET n.instance = row.instance, "
                "n.id = row.id, n.kind = row.kind, n.name = row.name, n.attributes = row.attributes")
_FIND_NODES = f"UNWIND $keys AS k MATCH (n:{NODE_TABLE} {{key: k}}) RETURN n.key AS key"
_FIND_EDGES = (f"UNWIND $keys AS k MATCH ()-[r:{REL_TABLE} {{key: k}}]->() "
               "RETURN r.key AS key, r.from_id AS from_id, r.to_id AS to_id")
_UPDATE_EDGES = (f"UNWIND $rows AS row WITH row, row.key AS k MATCH ()-[r:{REL_TABLE} {{key: k}}]->() "
                 "SET r.kind = row.kind, r.attributes = row.attributes")
_DELETE_EDGES = f"UNWIND $keys AS k MATCH ()-[r:{REL_TABLE} {{key: k}}]->() DELETE r"
_CREATE_EDGES = (f"UNWIND $rows AS row WITH row, row.from_key AS fk MATCH (a:{NODE_TABLE} {{key: fk}}) "
                 f"WITH a, row, row.to_key AS tk MATCH (b:{NODE_TABLE} {{key: tk}}) "
                 f"CREATE (a)-[:{REL_TABLE} {{key: row.key, instance: row.instance, id: row.id, kind: row.kind, "
                 "from_id: row.from_id, to_id: row.to_id, attributes: row.attributes}]->(b)")


def _put_nodes(conn: ladybug.Connection, nodes: list[GraphNode]) -> None:
    latest = {_key(node.instance, node.id): node for node in nodes}  # duplicates: the last one wins
    rows = [{"key": key, "instance": node.instance, "id": node.id, "kind": node.kind, "name": node.name,
             "attributes": attributes_json(node.attributes)} for key, node in latest.items()]
    _run_batches(conn, _MERGE_NODES, "rows", rows)


def _put_edges(conn: ladybug.Connection, edges: list[GraphEdge]) -> None:
    """Upsert edges whose endpoints are known to exist."""
    latest = {_key(edge.instance, edge.id): edge for edge in edges}  # duplicates: the last one wins
    stored = _stored_ends(conn, list(latest))
    kept = {key for key, edge in latest.items() if stored.get(key) == {(edge.from_id, edge.to_id)}}
    # A relationship cannot be re-pointed: one whose endpoints moved is deleted and created anew.
    _run_batches(conn, _DELETE_EDGES, "keys", [key for key in stored if key not in kept])
    _run_batches(conn, _UPDATE_EDGES, "rows", [{"key": key, "kind": latest[key].kind,
                                                "attributes": attributes_json(latest[key].attributes)} for key in kept])
    _run_batches(conn, _CREATE_EDGES, "rows", [_edge_row(key, edge) for key, edge in latest.items()
                                               if key not in kept])


def _check_endpoints(conn: ladybug.Connection, edges: list[GraphEdge], loaded: set[str] | None = None) -> None:
    """NotFoundError naming the first edge, in order, with an endpoint neither stored nor in `loaded`."""
    found = set(loaded or ())
    ends = sorted({_key(edge.instance, node_id) for edge in edges for node_id in (edge.from_id, edge.to_id)} - found)
    found.update(row["key"] for batch in _batches(ends) for row in _query(conn, _FIND_NODES, {"keys": batch}))
    for edge in edges:
        missing = [node_id for node_id in dict.fromkeys((edge.from_id, edge.to_id))
                   if _key(edge.instance, node_id) not in found]
        if missing:
            raise NotFoundError(f"edge {edge.id!r}: no node {', '.join(map(repr, missing))} in graph instance "
                                f"{edge.instance!r}", {"missing": missing})


def _stored_ends(conn: ladybug.Connection, keys: list[str]) -> dict[str, set[tuple[str, str]]]:
    """The (from_id, to_id) of each stored edge among `keys`."""
    ends: dict[str, set[tuple[str, str]]] = {}
    for batch in _batches(keys):
        for row in _query(conn, _FIND_EDGES, {"keys": batch}):
            ends.setdefault(row["key"], set()).add((row["from_id"], row["to_id"]))
    return ends


def _edge_row(key: str, edge: GraphEdge) -> dict[str, Any]:
    return {"key": key, "from_key": _key(edge.instance, edge.from_id), "to_key": _key(edge.instance, edge.to_id),
            "instance": edge.instance, "id": edge.id, "kind": edge.kind, "from_id": edge.from_id,
            "to_id": edge.to_id, "attributes": attributes_json(edge.attributes)}


def _run_batches(conn: ladybug.Connection, cypher: str, name: str, values: list[Any]) -> None:
    for batch in _batches(values):
        _query(conn, cypher, {name: batch})


def _batches(values: list[T]) -> list[list[T]]:
    # Never an empty batch: Kuzu cannot type an empty list parameter.
    return [values[start:start + LOAD_BATCH] for start in range(0, len(values), LOAD_BATCH)]


def _expand(conn: ladybug.Connection, instance: str, seeds: list[str], depth: int, kinds: list[str], limit: int,
            direction: str, admit: Admit | None = None) -> list[NeighborHit]:
    arrow = {"both": "-[r:{rel}]-", "out": "-[r:{rel}]->", "in": "<-[r:{rel}]-"}[direction].format(rel=REL_TABLE)
    kind_filter = " AND r.kind IN $kinds" if kinds else ""
    columns = (f"RETURN s.id AS source, {_NODE_COLUMNS}, r.instance AS e_instance, r.id AS e_id, r.kind AS e_kind, "
               "r.from_id AS e_from_id, r.to_id AS e_to_id, r.attributes AS e_attributes LIMIT $cap")
    # Measured on 10k nodes: `s.key = $key` uses the primary-key index (~2 ms), `IN $keys` scans
    # (~8 ms, flat in the list's length), UNWIND + key lookups is slower still.
    one = f"MATCH (s:{NODE_TABLE}){arrow}(n:{NODE_TABLE}) WHERE s.key = $key{kind_filter} {columns}"
    many = f"MATCH (s:{NODE_TABLE}){arrow}(n:{NODE_TABLE}) WHERE s.key IN $keys{kind_filter} {columns}"
    paths: dict[str, tuple[str, tuple[GraphEdge, ...]]] = {seed: (seed, ()) for seed in seeds}
    frontier = list(dict.fromkeys(seeds))
    hits: list[NeighborHit] = []
    for _ in range(depth):
        keys = [_key(instance, node_id) for node_id in frontier]
        params: dict[str, Any] = {"cap": MAX_LEVEL_EDGES, **({"key": keys[0]} if len(keys) == 1 else {"keys": keys})}
        if kinds:
            params["kinds"] = kinds
        rows = _query(conn, one if len(keys) == 1 else many, params)
        order = {node_id: index for index, node_id in enumerate(frontier)}
        rows.sort(key=lambda row: (order[row["source"]], row["e_id"], row["id"]))
        frontier = []
        for row in rows:
            if row["id"] in paths:
                continue
            seed, path = paths[row["source"]]
            edge = edge_from({name[2:]: value for name, value in row.items() if name.startswith("e_")})
            if not admitted(admit, edge, row["id"]):
                continue
            paths[row["id"]] = (seed, (*path, edge))
            hits.append(NeighborHit(node=node_from(row), seed=seed, path=(*path, edge)))
            frontier.append(row["id"])
            if len(hits) >= limit:
                return hits
        if not frontier:
            break
    return hits


# -- input checks ---------------------------------------------------------------------------------


def _key(instance: str, item_id: str) -> str:
    return f"{instance}/{item_id}"


def _list(document: dict[str, Any], name: str) -> list[Any]:
    value = document.get(name, [])
    if not isinstance(value, list):
        raise invalid(f"/{name}", "expected a list")
    return value


def _node_entry(instance: str, entry: Any, path: str) -> GraphNode:
    if not isinstance(entry, dict):
        raise invalid(path, "expected an object {id, kind, name, attributes}")
    return GraphNode(instance=instance, id=check_text(entry.get("id"), f"{path}/id"),
                     kind=check_text(entry.get("kind"), f"{path}/kind"),
                     name=check_name(entry.get("name", entry.get("id")), f"{path}/name"),
                     attributes=check_attributes(entry.get("attributes")))


def _edge_entry(instance: str, entry: Any, path: str) -> GraphEdge:
    if not isinstance(entry, dict):
        raise invalid(path, "expected an object {id, kind, from, to, attributes}")
    kind = check_text(entry.get("kind"), f"{path}/kind")
    from_id, to_id = check_text(entry.get("from"), f"{path}/from"), check_text(entry.get("to"), f"{path}/to")
    the_id = check_text(entry["id"], f"{path}/id") if "id" in entry else generated_edge_id(kind, from_id, to_id)
    return GraphEdge(instance=instance, id=the_id, kind=kind, from_id=from_id, to_id=to_id,
                     attributes=check_attributes(entry.get("attributes")))


def generated_edge_id(kind: str, from_id: str, to_id: str) -> str:
    """A stable id for an edge given without one: the same edge imported twice is one edge."""
    digest = hashlib.sha256("\0".join((kind, from_id, to_id)).encode()).hexdigest()[:16]
    return f"edge-{digest}"

