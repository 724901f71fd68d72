"""The Kuzu knowledge graph: nodes, edges, views with bound params, expansion, several processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError, NotFoundError, StorageError, TimeoutError_
from context_assembly.stores.graph import GraphStore
from context_assembly.stores.kuzu import KuzuGraph, SessionSettings, load_graph_json
from context_assembly.stores.kuzu import views as views_module
from context_assembly.workspace.atomic import workspace_lock
from context_assembly.workspace.layout import WorkspaceLayout

SPAWN = multiprocessing.get_context("spawn")
FAST = SessionSettings(hold_s=0.05, lock_timeout_s=20.0)

DEPENDENTS = ("MATCH (m:Entity {name: $name})<-[:Relates {kind: 'DEPENDS_ON'}]-(d:Entity) "
              "RETURN d.name AS name, d.kind AS kind ORDER BY name LIMIT $limit")


@pytest.fixture
def layout(tmp_path: Path) -> WorkspaceLayout:
    return WorkspaceLayout(tmp_path)


@pytest.fixture
def graph(layout: WorkspaceLayout):
    store = KuzuGraph(layout, settings=FAST)
    yield store
    store.close()


def write_view(layout: WorkspaceLayout, view_id: str, cypher: str, params: dict[str, Any] | None = None) -> None:
    layout.graph_views_dir.mkdir(parents=True, exist_ok=True)
    document = {"id": view_id, "description": "test view", "cypher": cypher, "params": params or {}}
    (layout.graph_views_dir / f"{view_id}.json").write_text(json.dumps(document), encoding="utf-8")


def modules(graph: KuzuGraph) -> None:
    """auth → session → db, billing → session, billing → db, auth -OWNED_BY-> ada."""
    for node_id, kind in [("auth", "module"), ("session", "module"), ("db", "module"), ("billing", "module"),
                          ("ada", "person")]:
        graph.upsert_node("default", node_id, kind, node_id, {"label": node_id.upper()})
    for edge_id, kind, src, dst in [("e1", "DEPENDS_ON", "auth", "session"), ("e2", "DEPENDS_ON", "session", "db"),
                                    ("e3", "DEPENDS_ON", "billing", "session"), ("e4", "DEPENDS_ON", "billing", "db"),
                                    ("e5", "OWNED_BY", "auth", "ada")]:
        graph.upsert_edge("default", edge_id, kind, src, dst, {})


def node_ids(graph: KuzuGraph, instance: str = "default") -> list[str]:
    return [node["id"] for node in graph.list_nodes(instance, limit=1000)]


# -- nodes and edges ------------------------------------------------------------------------------


def test_is_a_graph_store(graph: KuzuGraph) -> None:
    assert isinstance(graph, GraphStore)


def test_node_upsert_get_update_delete(graph: KuzuGraph) -> None:
    assert graph.get_node("default", "auth") is None
    created = graph.upsert_node("default", "auth", "module", "auth", {"path": "src/auth", "tags": ["a", 1]})
    assert created == {"instance": "default", "id": "auth", "kind": "module", "name": "auth",
                       "attributes": {"path": "src/auth", "tags": ["a", 1]}}
    assert graph.get_node("default", "auth") == created

    graph.upsert_node("default", "auth", "package", "Auth", {})
    assert graph.get_node("default", "auth") == {"instance": "default", "id": "auth", "kind": "package",
                                                 "name": "Auth", "attributes": {}}
    assert node_ids(graph) == ["auth"]

    assert graph.delete_node("default", "auth") is True
    assert graph.delete_node("default", "auth") is False
    assert graph.get_node("default", "auth") is None


def test_edge_upsert_get_move_delete(graph: KuzuGraph) -> None:
    for node_id in ("a", "b", "c"):
        graph.upsert_node("default", node_id, "module", node_id, {})
    edge = graph.upsert_edge("default", "e1", "CALLS", "a", "b", {"weight": 2})
    assert edge == {"instance": "default", "id": "e1", "kind": "CALLS", "from": "a", "to": "b",
                    "attributes": {"weight": 2}}
    assert graph.get_edge("default", "e1") == edge

    graph.upsert_edge("default", "e1", "DEPENDS_ON", "a", "b", {})
    assert graph.get_edge("default", "e1")["kind"] == "DEPENDS_ON"
    graph.upsert_edge("default", "e1", "DEPENDS_ON", "a", "c", {})  # re-pointed: still one edge e1
    assert graph.get_edge("default", "e1")["to"] == "c"
    assert [hit["id"] for hit in graph.neighbors("default", ["a"])] == ["c"]

    assert graph.delete_edge("default", "e1") is True
    assert graph.delete_edge("default", "e1") is False
    assert graph.get_edge("default", "e1") is None
    assert graph.get_node("default", "a") is not None


def test_delete_node_detaches_its_edges(graph: KuzuGraph) -> None:
    modules(graph)
    assert graph.delete_node("default", "session") is True
    assert graph.get_edge("default", "e1") is None
    assert graph.get_edge("default", "e2") is None
    assert graph.get_edge("default", "e4") is not None


def test_edge_to_missing_node_is_not_found(graph: KuzuGraph) -> None:
    graph.upsert_node("default", "a", "module", "a", {})
    with pytest.raises(NotFoundError, match="'ghost'"):
        graph.upsert_edge("default", "e1", "CALLS", "a", "ghost", {})
    with pytest.raises(NotFoundError):
        graph.upsert_edge("default", "e1", "CALLS", "ghost", "a", {})
    graph.upsert_node("other", "b", "module", "b", {})
    with pytest.raises(NotFoundError):  # an edge never crosses instances
        graph.upsert_edge("default", "e1", "CALLS", "a", "b", {})
    assert graph.get_edge("default", "e1") is None
    assert node_ids(graph) == ["a"]


def test_instances_are_separate(graph: KuzuGraph) -> None:
    graph.upsert_node("default", "x", "module", "in default", {})
    graph.upsert_node("team", "x", "module", "in team", {})
    assert graph.get_node("team", "x")["name"] == "in team"
    assert graph.get_node("", "x")["name"] == "in default"  # empty instance: the default one
    assert graph.delete_node("team", "x") is True
    assert graph.get_node("default", "x") is not None


@pytest.mark.parametrize("call", [
    lambda g: g.upsert_node("a/b", "x", "module", "x", {}),
    lambda g: g.upsert_node("default", "", "module", "x", {}),
    lambda g: g.upsert_node("default", "x", "", "x", {}),
    lambda g: g.upsert_node("default", "x\n", "module", "x", {}),
    lambda g: g.upsert_node("default", "x", "module", "x", ["not", "an", "object"]),
    lambda g: g.upsert_node("default", "x", "module", "x", {"bad": object()}),
    lambda g: g.list_nodes("default", limit=-1),
    lambda g: g.neighbors("default", ["x"], depth=99),
])
def test_bad_input_is_invalid_params(graph: KuzuGraph, call: Any) -> None:
    with pytest.raises(InvalidParamsError):
        call(graph)
    assert node_ids(graph) == []


def test_list_nodes_filters_by_kind_and_limits(graph: KuzuGraph) -> None:
    modules(graph)
    assert node_ids(graph) == ["ada", "auth", "billing", "db", "session"]
    assert [n["id"] for n in graph.list_nodes("default", kind="person")] == ["ada"]
    assert len(graph.list_nodes("default", limit=2)) == 2
    assert graph.list_nodes("elsewhere") == []


# -- views ------------------------------------------------------------------------------------------


def test_view_binds_params(graph: KuzuGraph, layout: WorkspaceLayout) -> None:
    modules(graph)
    write_view(layout, "dependents", DEPENDENTS, {"name": {"type": "string"},
                                                  "limit": {"type": "integer", "default": 20}})
    assert graph.run_view("dependents", {"name": "session"}) == [{"name": "auth", "kind": "module"},
                                                                 {"name": "billing", "kind": "module"}]
    assert graph.run_view("dependents", {"name": "db", "limit": 1}) == [{"name": "billing", "kind": "module"}]
    assert graph.run_view("dependents", {"name": "db", "limit": 1.0}) == [{"name": "billing", "kind": "module"}]


@pytest.mark.parametrize("hostile", [
    "x' }) DETACH DELETE n //",
    "session'}) MATCH (n) DETACH DELETE n RETURN 1 AS name, 1 AS kind //",
    '" OR 1=1 //',
])
def test_param_values_are_data_not_cypher(graph: KuzuGraph, layout: WorkspaceLayout, hostile: str) -> None:
    modules(graph)
    write_view(layout, "by-name", "MATCH (n:Entity) WHERE n.name = $name RETURN n.id AS id", {"name": {}})
    before = graph.generation()
    assert graph.run_view("by-name", {"name": hostile}) == []
    assert node_ids(graph) == ["ada", "auth", "billing", "db", "session"]
    assert graph.get_edge("default", "e1") is not None
    assert graph.generation() == before


@pytest.mark.parametrize(("params", "path", "message"), [
    ({"name": "x", "limt": 3}, "/params/limt", "unknown parameter"),
    ({}, "/params/name", "missing parameter"),
    ({"name": 5}, "/params/name", "expected string, got integer"),
    ({"name": "x", "limit": "5"}, "/params/limit", "expected integer, got string"),
    ({"name": "x", "limit": 2.5}, "/params/limit", "expected integer, got number"),
    ({"name": "x", "limit": True}, "/params/limit", "expected integer, got boolean"),
    ({"name": None}, "/params/name", "expected string, got null"),
])
def test_bad_view_params(graph: KuzuGraph, layout: WorkspaceLayout, params: dict[str, Any], path: str,
                         message: str) -> None:
    write_view(layout, "dependents", DEPENDENTS, {"name": {"type": "string"},
                                                  "limit": {"type": "integer", "default": 20}})
    with pytest.raises(InvalidParamsError) as caught:
        graph.run_view("dependents", params)
    assert [error["path"] for error in caught.value.errors] == [path]
    assert message in caught.value.errors[0]["message"]


def test_view_param_types(graph: KuzuGraph, layout: WorkspaceLayout) -> None:
    write_view(layout, "echo", "RETURN $s AS s, $n AS n, $b AS b, $a AS a, $o.k AS ok, $unused_default AS d",
               {"s": {"type": "string"}, "n": {"type": "number"}, "b": {"type": "boolean"},
                "a": {"type": "array"}, "o": {"type": "object"}, "unused_default": {"default": "dflt"},
                "declared_only": {"type": "integer", "default": 3}})
    rows = graph.run_view("echo", {"s": "x", "n": 1.5, "b": False, "a": [1, 2], "o": {"k": "v"}})
    assert rows == [{"s": "x", "n": 1.5, "b": False, "a": [1, 2], "ok": "v", "d": "dflt"}]
    with pytest.raises(InvalidParamsError):
        graph.run_view("echo", {"s": "x", "n": 1, "b": 1, "a": [1], "o": {"k": "v"}})


def test_view_params_from_a_uri_are_read_as_the_view_declares(graph: KuzuGraph, layout: WorkspaceLayout) -> None:
    """`graph://echo?s=2024&n=2024`: the same text is a string where the view says string and a
    number where it says number (read as JSON first, "2024" and "true" were never strings)."""
    from context_assembly.stores.memory import MemoryRouter

    write_view(layout, "echo", "RETURN $s AS s, $n AS n, $b AS b",
               {"s": {"type": "string"}, "n": {"type": "number"}, "b": {"type": "boolean"}})
    memory = MemoryRouter(layout, graph=graph)
    assert memory.read("graph://echo?s=2024&n=2024&b=true")["value"] == [{"s": "2024", "n": 2024, "b": True}]
    assert memory.read("graph://echo?s=true&n=1.5&b=false")["value"] == [{"s": "true", "n": 1.5, "b": False}]
    assert memory.read('graph://echo?s=%22quoted%22&n=0&b=true')["value"][0]["s"] == "quoted"
    with pytest.raises(InvalidParamsError) as refused:
        memory.read("graph://echo?s=x&n=many&b=true")
    assert refused.value.errors == [{"path": "/params/n", "message": "expected number, got string"}]


def test_view_returns_nodes_edges_and_paths_as_store_dicts(graph: KuzuGraph, layout: WorkspaceLayout) -> None:
    modules(graph)
    write_view(layout, "chain", "MATCH p = (a:Entity {id: $start})-[r:Relates*1..2]->(b:Entity {id: 'db'}) "
                                "RETURN a, b, p ORDER BY length(p)", {"start": {}})
    rows = graph.run_view("chain", {"start": "auth"})
    assert len(rows) == 1
    assert rows[0]["a"] == graph.get_node("default", "auth")
    assert [edge["id"] for edge in rows[0]["p"]["edges"]] == ["e1", "e2"]
    assert rows[0]["p"]["edges"][0] == graph.get_edge("default", "e1")
    assert [node["id"] for node in rows[0]["p"]["nodes"]] == ["auth", "session", "db"]
    json.dumps(rows)  # plain JSON all the way down


@pytest.mark.parametrize("cypher", [
    "MATCH (n:Entity) DETACH DELETE n",
    "match (n:Entity) detach delete n",
    "CREATE (:Entity {key: 'x', id: 'x'})",
    "MERGE (n:Entity {key: 'default/x'}) RETURN n",
    "MATCH (n:Entity) SET n.name = 'owned' RETURN n.name",
    "MATCH (n:Entity) REMOVE n.name RETURN n",
    "MATCH (n:Entity) RETURN n.id; MATCH (n:Entity) DELETE n",
    "DROP TABLE Relates",
    "ALTER TABLE Entity ADD extra STRING",
    "COPY Entity FROM 'nodes.csv'",
    "LOAD FROM 'nodes.csv' RETURN *",
    "INSTALL json",
    "CALL threads = 1",
    "ATTACH 'other.kuzu' AS other (dbtype kuzu)",
])
def test_write_views_are_refused(graph: KuzuGraph, layout: WorkspaceLayout, cypher: str) -> None:
    modules(graph)
    write_view(layout, "evil", cypher)
    with pytest.raises(InvalidParamsError) as caught:
        graph.run_view("evil", {})
    assert caught.value.errors[0]["path"] == "/cypher"
    assert node_ids(graph) == ["ada", "auth", "billing", "db", "session"]
    assert graph.get_node("default", "auth")["name"] == "auth"


def test_write_keywords_inside_literals_and_comments_are_fine(graph: KuzuGraph, layout: WorkspaceLayout) -> None:
    modules(graph)
    write_view(layout, "quoted", "MATCH (n:Entity) WHERE n.name <> 'DETACH DELETE n' "
                                 "RETURN n.id AS `create` ORDER BY n.id LIMIT 1 // SET n.x = 1",)
    assert graph.run_view("quoted", {}) == [{"create": "ada"}]
    write_view(layout, "catalog", "CALL show_tables() RETURN name ORDER BY name")
    assert graph.run_view("catalog", {}) == [{"name": "Entity"}, {"name": "Relates"}]


def test_database_refuses_writes_the_text_check_misses(graph: KuzuGraph, layout: WorkspaceLayout,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    modules(graph)
    monkeypatch.setattr(views_module, "read_only_problems", lambda cypher: [])
    write_view(layout, "sneaky", "MATCH (n:Entity) DETACH DELETE n")
    with pytest.raises(InvalidParamsError, match="read-only"):
        graph.run_view("sneaky", {})
    assert len(node_ids(graph)) == 5


@pytest.mark.parametrize(("view_id", "document", "error"), [
    ("missing", None, NotFoundError),
    ("../escape", None, InvalidParamsError),
    ("broken", "{not json", InvalidParamsError),
    ("undeclared", {"id": "undeclared", "cypher": "MATCH (n:Entity) WHERE n.id = $id RETURN n"}, InvalidParamsError),
    ("mismatch", {"id": "other", "cypher": "RETURN 1 AS one"}, InvalidParamsError),
    ("badtype", {"id": "badtype", "cypher": "RETURN $x AS x", "params": {"x": {"type": "date"}}}, InvalidParamsError),
    ("nocypher", {"id": "nocypher"}, InvalidParamsError),
    ("typo", {"id": "typo", "cypher": "MATCH (n:Entty) RETURN n"}, InvalidParamsError),
])
def test_bad_views(graph: KuzuGraph, layout: WorkspaceLayout, view_id: str, document: Any, error: type) -> None:
    if document is not None:
        layout.graph_views_dir.mkdir(parents=True, exist_ok=True)
        text = document if isinstance(document, str) else json.dumps(document)
        (layout.graph_views_dir / f"{view_id}.json").write_text(text, encoding="utf-8")
    with pytest.raises(error):
        graph.run_view(view_id, {})


def test_slow_view_times_out_and_the_store_keeps_serving(layout: WorkspaceLayout) -> None:
    write_view(layout, "slow", "UNWIND range(1, 20000) AS a UNWIND range(1, 20000) AS b "
                               "WITH a, b WHERE (a * b) % 7 = 3 RETURN count(*) AS c")
    with KuzuGraph(layout, settings=SessionSettings(hold_s=0.05, query_timeout_s=0.1)) as graph:
        with pytest.raises(TimeoutError_):
            graph.run_view("slow", {})
        graph.upsert_node("default", "after", "module", "after", {})
        assert graph.get_node("default", "after") is not None


# -- expansion --------------------------------------------------------------------------------------


def expand(graph: KuzuGraph, seeds: list[str], **options: Any) -> list[tuple[str, int, list[str]]]:
    return [(hit["id"], hit["distance"], [edge["id"] for edge in hit["path"]])
            for hit in graph.neighbors("default", seeds, **options)]


def test_neighbors_depth_kinds_limit_direction(graph: KuzuGraph) -> None:
    modules(graph)
    assert expand(graph, ["auth"]) == [("session", 1, ["e1"]), ("ada", 1, ["e5"])]
    assert expand(graph, ["auth"], depth=2) == [("session", 1, ["e1"]), ("ada", 1, ["e5"]),
                                                ("db", 2, ["e1", "e2"]), ("billing", 2, ["e1", "e3"])]
    assert expand(graph, ["auth"], depth=2, edge_kinds=["OWNED_BY"]) == [("ada", 1, ["e5"])]
    assert expand(graph, ["auth"], depth=3, limit=3) == [("session", 1, ["e1"]), ("ada", 1, ["e5"]),
                                                         ("db", 2, ["e1", "e2"])]
    assert expand(graph, ["db"], depth=2, direction="in") == [("session", 1, ["e2"]), ("billing", 1, ["e4"]),
                                                              ("auth", 2, ["e2", "e1"])]
    assert expand(graph, ["db"], direction="out") == []
    assert expand(graph, ["auth", "billing"]) == [("session", 1, ["e1"]), ("ada", 1, ["e5"]), ("db", 1, ["e4"])]
    assert expand(graph, ["nowhere"], depth=3) == []
    assert expand(graph, ["auth"], depth=0) == []

    hit = graph.neighbors("default", ["auth"], depth=2)[2]
    path = hit.pop("path")
    assert hit == {**graph.get_node("default", "db"), "seed": "auth", "distance": 2}
    assert path == [graph.get_edge("default", "e1"), graph.get_edge("default", "e2")]


# -- generation, sessions, several processes --------------------------------------------------------


def test_generation_bumps_on_writes_and_is_shared(graph: KuzuGraph, layout: WorkspaceLayout) -> None:
    start = graph.generation()
    graph.upsert_node("default", "a", "module", "a", {})
    assert graph.generation() == start + 1
    graph.get_node("default", "a")
    graph.list_nodes("default")
    assert graph.generation() == start + 1
    other = KuzuGraph(layout)
    assert other.generation() == start + 1
    graph.delete_node("default", "a")
    assert other.generation() == start + 2
    other.close()


def _lock_is_free(layout: WorkspaceLayout) -> bool:
    """Probe the graph's lock from another thread without waiting (and so without asking for it)."""
    from filelock import FileLock, Timeout

    free: list[bool] = []

    def probe() -> None:
        lock = FileLock(layout.locks_dir / "kuzu.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            free.append(False)
        else:
            lock.release()
            free.append(True)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return free[0]


def test_session_keeps_the_database_between_uses_while_nobody_waits(layout: WorkspaceLayout) -> None:
    graph = KuzuGraph(layout, settings=SessionSettings(hold_s=0.05, poll_s=0.01))
    graph.upsert_node("default", "a", "module", "a", {})
    time.sleep(0.3)  # long past hold_s: an agent's next turn comes seconds later
    assert not _lock_is_free(layout)  # still open: the next call does not reopen it
    assert graph.get_node("default", "a") is not None
    graph.close()
    assert _lock_is_free(layout)


def test_session_lets_go_of_the_lock_for_a_waiter(layout: WorkspaceLayout) -> None:
    graph = KuzuGraph(layout, settings=SessionSettings(hold_s=0.05))
    graph.upsert_node("default", "a", "module", "a", {})
    time.sleep(0.3)
    taken = threading.Event()

    def take() -> None:  # another thread takes its own OS lock, as another process would
        with workspace_lock(layout, "kuzu", timeout=10.0):
            taken.set()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    assert taken.is_set()
    assert graph.get_node("default", "a") is not None  # and the store opens a new session
    graph.close()


def _hold_graph_open(root: str, ready: Any, done: Any) -> None:
    """Child process: use the graph, then stay alive without closing it (held for idle_hold_s)."""
    graph = KuzuGraph(WorkspaceLayout(root))
    graph.upsert_node("default", "from-child", "module", "child", {})
    ready.set()
    done.wait(60)
    graph.close()


def test_another_process_gets_the_graph_a_process_keeps_open(layout: WorkspaceLayout) -> None:
    ready, done = SPAWN.Event(), SPAWN.Event()
    child = SPAWN.Process(target=_hold_graph_open, args=(str(layout.root), ready, done))
    child.start()
    try:
        assert ready.wait(60)
        assert not _lock_is_free(layout)  # kept open: it would be for a minute
        # a lock timeout far below the child's idle hold: only asking for the lock gets it in time
        with KuzuGraph(layout, settings=SessionSettings(hold_s=0.05, lock_timeout_s=5.0)) as graph:
            assert graph.get_node("default", "from-child") is not None
    finally:
        done.set()
        child.join(60)
    assert child.exitcode == 0


def _run_at_once(target: Any, layout: WorkspaceLayout, prefixes: str, count: int, within: float) -> None:
    """`target(root, prefix, count, start)` in a process per prefix, all let go at once; each must succeed."""
    start = SPAWN.Event()
    workers = [SPAWN.Process(target=target, args=(str(layout.root), prefix, count, start)) for prefix in prefixes]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(within)
        assert worker.exitcode == 0


def _take_turns(root: str, prefix: str, turns: int, start: Any) -> None:
    """Child process: an agent's turns, each a read and a write, with pauses longer than `hold_s`
    (default holds otherwise). Its turns together take longer than its 2 s lock timeout."""
    graph = KuzuGraph(WorkspaceLayout(root), settings=SessionSettings(lock_timeout_s=2.0))
    start.wait(30)
    for turn in range(turns):
        graph.list_nodes("default")
        graph.upsert_node("default", f"{prefix}-{turn}", "module", prefix, {"turn": turn})
        time.sleep(0.25 + 0.1 * (turn % 3))
    graph.close()


def test_processes_taking_turns_share_a_graph_each_keeps_open(layout: WorkspaceLayout) -> None:
    """Two sidecars' agents with pauses between turns: each keeps the graph open after its turn (for
    up to a minute), and each turn of the other still gets it within its 2 s lock timeout."""
    _run_at_once(_take_turns, layout, "xy", 8, within=120)
    with KuzuGraph(layout, settings=FAST) as graph:
        assert set(node_ids(graph)) == {f"{prefix}-{turn}" for prefix in "xy" for turn in range(8)}


def test_session_ends_once_idle_for_idle_hold(layout: WorkspaceLayout) -> None:
    graph = KuzuGraph(layout, settings=SessionSettings(hold_s=0.05, idle_hold_s=0.2, poll_s=0.01))
    graph.upsert_node("default", "a", "module", "a", {})
    deadline = time.monotonic() + 10
    while not _lock_is_free(layout):
        assert time.monotonic() < deadline, "the idle session kept the database"
        time.sleep(0.05)
    assert graph.get_node("default", "a") is not None
    graph.close()


def test_an_exiting_process_ends_its_session(layout: WorkspaceLayout) -> None:
    """Held for idle_hold_s (60 s by default) while the process lives, but its exit does not wait for it."""
    code = ("import sys; from context_assembly.stores.kuzu import KuzuGraph; "
            "from context_assembly.workspace.layout import WorkspaceLayout; "
            "KuzuGraph(WorkspaceLayout(sys.argv[1])).upsert_node('default', 'kept', 'module', 'kept', {})")
    subprocess.run([sys.executable, "-c", code, str(layout.root)], check=True, timeout=30)
    assert _lock_is_free(layout)
    with KuzuGraph(layout, settings=FAST) as graph:
        assert graph.get_node("default", "kept") is not None


def test_busy_lock_is_a_storage_error(layout: WorkspaceLayout) -> None:
    graph = KuzuGraph(layout, settings=SessionSettings(hold_s=0.05, lock_timeout_s=0.2))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with workspace_lock(layout, "kuzu"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    try:
        with pytest.raises(StorageError, match="busy"):
            graph.get_node("default", "a")
    finally:
        release.set()
        thread.join()
    assert graph.get_node("default", "a") is None
    graph.close()


def _write_nodes(root: str, prefix: str, count: int, start: Any) -> None:
    graph = KuzuGraph(WorkspaceLayout(root), settings=SessionSettings(hold_s=0.02, max_hold_s=0.3,
                                                                      lock_timeout_s=30.0))
    start.wait(30)
    for index in range(count):
        graph.upsert_node("default", f"{prefix}-{index}", "file", f"{prefix} {index}", {"i": index})
    graph.close()


def test_two_processes_writing_at_once_lose_nothing(layout: WorkspaceLayout) -> None:
    _run_at_once(_write_nodes, layout, "pq", 15, within=60)
    with KuzuGraph(layout) as graph:
        ids = set(node_ids(graph))
        assert ids == {f"{prefix}-{index}" for prefix in "pq" for index in range(15)}
        assert graph.generation() == 30


def _crash_mid_write(root: str) -> None:
    graph = KuzuGraph(WorkspaceLayout(root), settings=SessionSettings(hold_s=30.0))
    graph.upsert_node("default", "committed", "module", "committed", {})  # in the WAL, not yet checkpointed

    def die(conn: Any) -> None:
        conn.execute("BEGIN TRANSACTION")
        conn.execute("CREATE (:Entity {key: 'default/torn', instance: 'default', id: 'torn', kind: 'module', "
                     "name: 'torn', attributes: '{}'})")
        os._exit(3)

    graph._sessions.run(die)


def test_crash_mid_write_leaves_the_graph_readable(layout: WorkspaceLayout) -> None:
    with KuzuGraph(layout) as graph:
        graph.upsert_node("default", "before", "module", "before", {})
    worker = SPAWN.Process(target=_crash_mid_write, args=(str(layout.root),))
    worker.start()
    worker.join(60)
    assert worker.exitcode == 3
    with KuzuGraph(layout) as graph:
        assert node_ids(graph) == ["before", "committed"]


# -- seed data --------------------------------------------------------------------------------------


def test_example_seed_loads_and_answers_views(example_copy: Path) -> None:
    layout = WorkspaceLayout(example_copy)
    write_view(layout, "dependents-of", DEPENDENTS, {"name": {"type": "string"},
                                                     "limit": {"type": "integer", "default": 20}})
    with KuzuGraph(layout, settings=FAST) as graph:
        counts = load_graph_json(graph, layout.codebolt / "knowledgegraph" / "seed.json")
        assert counts == {"nodes": 12, "edges": 15}
        assert len(graph.list_nodes("default")) == 12
        assert graph.run_view("dependents-of", {"name": "session"}) == [{"name": "auth", "kind": "module"},
                                                                        {"name": "billing", "kind": "module"}]
        owners = [hit["name"] for hit in graph.neighbors("default", ["function:auth.login"], depth=2)
                  if hit["kind"] == "person"]
        assert owners == ["Ada"]
        assert graph.generation() == 1  # one transaction for the whole file


def test_load_graph_json_is_all_or_nothing(graph: KuzuGraph, tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"nodes": [{"id": "a", "kind": "module", "name": "a"}],
                                "edges": [{"id": "e", "kind": "CALLS", "from": "a", "to": "ghost"}]}))
    with pytest.raises(NotFoundError):
        load_graph_json(graph, data)
    assert node_ids(graph) == []
    data.write_text(json.dumps({"nodes": [{"id": "a", "kind": "module"}, "oops"]}))
    with pytest.raises(InvalidParamsError) as caught:
        load_graph_json(graph, data)
    assert caught.value.errors[0]["path"] == "/nodes/1"


def test_objects_of_a_list_parameter_bind_by_key_and_odd_values_are_invalid_params(
        graph: KuzuGraph, layout: WorkspaceLayout) -> None:
    """The engine binds the objects of one list as one struct by position: a different key order
    swapped their values (rows went missing), and a value it cannot type was a storage error full
    of its internals."""
    modules(graph)
    write_view(layout, "annotated", "UNWIND $items AS it MATCH (n:Entity {id: it.id}) RETURN n.id AS id, "
               "it.note AS note", {"items": {"type": "array"}})
    swapped = [{"note": "hot", "id": "auth"}, {"id": "session", "note": "cold"}]
    assert sorted(graph.run_view("annotated", {"items": swapped}), key=lambda r: r["id"]) == [
        {"id": "auth", "note": "hot"}, {"id": "session", "note": "cold"}]
    with pytest.raises(InvalidParamsError, match="bad parameters"):
        graph.run_view("annotated", {"items": [{"id": "auth"}, {"id": "session", "note": "x"}]})
    write_view(layout, "echo", "RETURN $a AS a", {"a": {"type": "array"}})
    for odd in ([1, "x"], [True, 1]):
        with pytest.raises(InvalidParamsError, match="a parameter value the graph cannot take"):
            graph.run_view("echo", {"a": odd})


def test_portable_views_expand_with_defaults_and_keep_the_row_limits(graph: KuzuGraph,
                                                                      layout: WorkspaceLayout) -> None:
    from attrs import evolve

    from context_assembly.limits import DEFAULT, applied

    modules(graph)
    layout.graph_views_dir.mkdir(parents=True, exist_ok=True)
    for view_id, document in (("near", {"match": {"id": "session"}, "expand": {}}),
                              ("mods", {"match": {"kind": "module"}, "limit": 100}),
                              ("owned", {"match": {"kind": "module"}, "expand": {"edge_kinds": ["OWNED_BY"]},
                                         "limit": 3})):
        (layout.graph_views_dir / f"{view_id}.json").write_text(json.dumps({"id": view_id, **document}))
    # `"expand": {}` runs the defaults (depth 1, both directions): it returned the node itself
    assert sorted(r["id"] for r in graph.run_view("near", {})) == ["auth", "billing", "db"]
    with applied(evolve(DEFAULT, graph_view_rows=2)):  # as a Cypher view's rows
        assert len(graph.run_view("mods", {})) == 2
    with applied(evolve(DEFAULT, graph_limit=50)):  # the seeds were asked 1,000 at a time: refused
        assert [r["id"] for r in graph.run_view("owned", {})] == ["ada"]
