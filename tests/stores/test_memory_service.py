"""The URI layer: memory/read|write|delete|list over every scheme, with the §8 result shapes."""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import InvalidParamsError, NotFoundError, StorageError
from context_assembly.stores.memory import MemoryRouter
from context_assembly.workspace.layout import WorkspaceLayout


class FakeVectors:
    """The calls the URI layer makes on the vector store, recorded."""

    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.writes = 0

    def upsert(self, collection: str, doc_uri: str, text: str, metadata: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("upsert", collection, doc_uri, text, metadata))
        self.docs[(collection, doc_uri)] = {"collection": collection, "doc_uri": doc_uri, "text": text,
                                            "metadata": metadata}
        self.writes += 1
        return {"collection": collection, "doc_uri": doc_uri, "chunks": 1}

    def delete(self, collection: str, doc_uri: str) -> bool:
        self.calls.append(("delete", collection, doc_uri))
        self.writes += 1
        return self.docs.pop((collection, doc_uri), None) is not None

    def search(self, collection: str, query: str, top_k: int = 5, min_score: float = 0.0,
               mode: str = "vector") -> list[dict[str, Any]]:
        self.calls.append(("search", collection, query, top_k, min_score, mode))
        return [{"doc_uri": d["doc_uri"], "score": 0.9, "text": d["text"]}
                for (c, _), d in self.docs.items() if c == collection and query in d["text"]][:top_k]

    def list(self, collection: str | None) -> list[dict[str, Any]]:
        self.calls.append(("list", collection))
        return [dict(d) for (c, _), d in sorted(self.docs.items()) if collection is None or c == collection]

    def generation(self) -> int:
        return self.writes


class FakeGraph:
    def __init__(self) -> None:
        self.nodes: dict[tuple[str, str], dict[str, Any]] = {}
        self.edges: dict[tuple[str, str], dict[str, Any]] = {}
        self.views: list[tuple[str, dict[str, Any]]] = []

    def upsert_node(self, instance: str, node_id: str, kind: str, name: str, attributes: dict[str, Any]
                    ) -> dict[str, Any]:
        node = {"id": node_id, "kind": kind, "name": name, "attributes": attributes}
        self.nodes[(instance, node_id)] = node
        return node

    def upsert_edge(self, instance: str, edge_id: str, kind: str, from_id: str, to_id: str,
                    attributes: dict[str, Any]) -> dict[str, Any]:
        edge = {"id": edge_id, "kind": kind, "from": from_id, "to": to_id, "attributes": attributes}
        self.edges[(instance, edge_id)] = edge
        return edge

    def get_node(self, instance: str, node_id: str) -> dict[str, Any] | None:
        return self.nodes.get((instance, node_id))

    def get_edge(self, instance: str, edge_id: str) -> dict[str, Any] | None:
        return self.edges.get((instance, edge_id))

    def delete_node(self, instance: str, node_id: str) -> bool:
        return self.nodes.pop((instance, node_id), None) is not None

    def delete_edge(self, instance: str, edge_id: str) -> bool:
        return self.edges.pop((instance, edge_id), None) is not None

    def run_view(self, view_id: str, params: dict[str, Any], timeout_ms: int | None = None) -> list[dict[str, Any]]:
        if view_id == "missing":
            raise NotFoundError(f"no graph view {view_id!r}")
        if view_id == "broken":
            raise RuntimeError("cypher exploded")
        self.views.append((view_id, params))
        return [{"view": view_id, **params}]


@pytest.fixture
def memory(tmp_path: Path) -> Any:
    service = MemoryRouter(tmp_path)
    yield service
    service.close()


def test_nothing_is_created_before_first_use(tmp_path: Path) -> None:
    service = MemoryRouter(WorkspaceLayout(tmp_path))
    assert not (tmp_path / ".codebolt").exists()
    service.read("kv://x")
    assert (tmp_path / ".codebolt" / "db" / "project.db").is_file()
    service.close()


def test_result_shapes(memory: MemoryRouter) -> None:
    assert memory.read("kv://prefs") == {"uri": "kv://prefs", "exists": False, "value": None}
    assert memory.write("kv://prefs", {"theme": "dark"}) == {"uri": "kv://prefs", "written": True}
    assert memory.read("kv://prefs") == {"uri": "kv://prefs", "exists": True, "value": {"theme": "dark"}}
    assert memory.delete("kv://prefs") == {"uri": "kv://prefs", "deleted": True}
    assert memory.delete("kv://prefs") == {"uri": "kv://prefs", "deleted": False}
    assert memory.list("kv://") == {"items": []}


def test_kv_uri_forms_address_the_same_entries(memory: MemoryRouter) -> None:
    memory.write("kv://prefs", 1)
    assert memory.read("kv://default/prefs")["value"] == 1
    assert memory.read("kv://default/default/prefs")["value"] == 1
    memory.write("kv://users/alice", {"a": 1})
    memory.write("kv://team/users/bob", {"b": 2})
    memory.write("kv://users/a%2Fb", 3)
    assert memory.kv.get("default", "users", "a/b") is not None
    uris = [item["uri"] for item in memory.list("kv://")["items"]]
    assert uris == ["kv://prefs", "kv://team/users/bob", "kv://users/a%2Fb", "kv://users/alice"]
    assert [i["uri"] for i in memory.list("kv://users/")["items"]] == ["kv://users/a%2Fb", "kv://users/alice"]
    assert [i["uri"] for i in memory.list("kv://users/al")["items"]] == ["kv://users/alice"]
    assert memory.list("kv://team/users/")["items"][0] | {"updated_at": 0} == {
        "uri": "kv://team/users/bob", "instance": "team", "namespace": "users", "key": "bob", "updated_at": 0}
    assert len(memory.list("kv")["items"]) == 4
    # a prefix may use any spelling of the default instance / namespace; items show the shortest
    assert [i["uri"] for i in memory.list("kv://default/")["items"]] == ["kv://prefs", "kv://users/a%2Fb",
                                                                          "kv://users/alice"]
    assert [i["uri"] for i in memory.list("kv://default/default/")["items"]] == ["kv://prefs"]
    assert [i["uri"] for i in memory.list("kv://default/users/al")["items"]] == ["kv://users/alice"]
    assert len(memory.list("kv://", limit=2)["items"]) == 2


def test_json_documents_and_pointers(memory: MemoryRouter) -> None:
    memory.write("json://project-config", {"conventions": ["pep8"], "owner": {"name": "ana"}})
    assert memory.read("json://project-config#/owner/name")["value"] == "ana"
    assert memory.read("json://project-config#/owner/missing") == {
        "uri": "json://project-config#/owner/missing", "exists": False, "value": None}
    memory.write("json://project-config#/conventions/-", "typed")
    assert memory.read("json://project-config#/conventions")["value"] == ["pep8", "typed"]
    assert memory.delete("json://project-config#/owner")["deleted"] is True
    assert memory.read("json://project-config")["value"] == {"conventions": ["pep8", "typed"]}
    assert [i["uri"] for i in memory.list("json://")["items"]] == ["json://project-config"]


def test_markdown_notes(memory: MemoryRouter, tmp_path: Path) -> None:
    memory.write("markdown://decisions/auth", "# Auth\nJWT.\n")
    assert (tmp_path / ".codebolt" / "memory" / "decisions" / "auth.md").read_text() == "# Auth\nJWT.\n"
    assert memory.read("markdown://decisions/auth.md")["value"] == "# Auth\nJWT.\n"
    assert memory.read("markdown://nope") == {"uri": "markdown://nope", "exists": False, "value": None}
    with pytest.raises(InvalidParamsError, match="string"):
        memory.write("markdown://x", {"not": "text"})
    memory.write("markdown://style-guide", "s")
    assert [i["uri"] for i in memory.list("markdown://")["items"]] == ["markdown://decisions/auth",
                                                                       "markdown://style-guide"]
    assert [i["name"] for i in memory.list("markdown://decisions/")["items"]] == ["decisions/auth"]
    assert memory.delete("markdown://decisions/auth")["deleted"] is True


def test_file_is_read_only(memory: MemoryRouter, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "auth.py").write_text("print('hi')\n")
    assert memory.read("file://src/auth.py") == {"uri": "file://src/auth.py", "exists": True,
                                                 "value": "print('hi')\n"}
    assert memory.read("file://src/none.py")["exists"] is False
    with pytest.raises(InvalidParamsError, match="read-only"):
        memory.write("file://src/auth.py", "x")
    with pytest.raises(InvalidParamsError, match="read-only"):
        memory.delete("file://src/auth.py")
    assert (tmp_path / "src" / "auth.py").read_text() == "print('hi')\n"
    assert [i["uri"] for i in memory.list("file://")["items"]] == ["file://src/"]
    assert [i["uri"] for i in memory.list("file://src/")["items"]] == ["file://src/auth.py"]
    assert [i["uri"] for i in memory.list("file://src/au")["items"]] == ["file://src/auth.py"]
    assert memory.list("file://src/zz")["items"] == []


def test_log_is_append_only(memory: MemoryRouter) -> None:
    assert memory.write("log://default", {"event_type": "tool_error", "payload": {"tool": "grep"}})["written"]
    memory.write("log://default", {"event_type": "message", "payload": {"text": "hi"}})
    memory.write("log://audit", {"event_type": "login"})
    events = memory.read("log://default")["value"]
    assert [e["event_type"] for e in events] == ["message", "tool_error"]
    assert memory.read("log://default?event_type=tool_error")["value"][0]["payload"] == {"tool": "grep"}
    assert len(memory.read("log://default?since=-1h&limit=1")["value"]) == 1
    assert memory.read("log://default?since=2000-01-01&fields=tool")["value"][1]["payload"] == {"tool": "grep"}
    assert memory.read("log://default?since=-1h")["value"] != []
    event_id = events[0]["id"]
    assert memory.read(f"log://default/{event_id}")["value"]["event_type"] == "message"
    assert memory.read("log://default/99999")["exists"] is False
    for refused in (lambda: memory.delete("log://default"),
                    lambda: memory.delete(f"log://default/{event_id}"),
                    lambda: memory.write(f"log://default/{event_id}", {"event_type": "x", "payload": {}})):
        with pytest.raises(InvalidParamsError, match="append-only"):
            refused()
    with pytest.raises(InvalidParamsError):
        memory.write("log://default", {"payload": {}})
    with pytest.raises(InvalidParamsError):
        memory.write("log://default", {"event_type": "x", "payload": "text", "extra": 1})  # extras need an object
    assert len(memory.read("log://default")["value"]) == 2  # nothing changed
    assert [(i["uri"], i["count"]) for i in memory.list("log://")["items"]] == [("log://audit", 1),
                                                                               ("log://default", 2)]


def test_episodic_and_working(memory: MemoryRouter) -> None:
    for i in range(5):
        memory.write("episodic://t-1", {"role": "user", "content": f"turn {i}"})
    assert [t["content"] for t in memory.read("episodic://t-1?limit=2")["value"]] == ["turn 3", "turn 4"]
    assert memory.read("episodic://t-9") == {"uri": "episodic://t-9", "exists": True, "value": []}
    assert [(i["uri"], i["count"]) for i in memory.list("episodic://t-1")["items"]] == [("episodic://t-1", 5)]
    memory.write("working://t-1/plan", ["a"])
    memory.write("working://t-1/notes", "n")
    memory.write("working://t-2/plan", ["b"])
    assert memory.read("working://t-1/plan")["value"] == ["a"]
    assert memory.read("working://t-1")["value"] == {"notes": "n", "plan": ["a"]}
    with pytest.raises(InvalidParamsError, match="key"):
        memory.write("working://t-1", {"x": 1})
    assert [i["uri"] for i in memory.list("working://t-1/")["items"]] == ["working://t-1/notes",
                                                                          "working://t-1/plan"]
    assert memory.clear_working("t-1") == 2
    # the turn is over: its scratchpad does not exist any more (seed 002)
    assert memory.read("working://t-1") == {"uri": "working://t-1", "exists": False, "value": None}
    assert memory.read("working://t-2/plan")["exists"] is True
    assert memory.delete("working://t-2")["deleted"] is True
    assert memory.delete("episodic://t-1")["deleted"] is True
    assert memory.read("episodic://t-1")["value"] == []


def test_blobs_are_base64_on_the_wire(memory: MemoryRouter) -> None:
    data = bytes(range(256))
    encoded = base64.b64encode(data).decode()
    memory.write("blob://attachments/raw.bin", encoded)
    assert memory.read("blob://attachments/raw.bin") == {"uri": "blob://attachments/raw.bin", "exists": True,
                                                         "value": encoded}
    assert memory.blobs.get("attachments", "raw.bin") == data
    for bad in ("not base64!", 123, "abc"):
        with pytest.raises(InvalidParamsError, match="base64"):
            memory.write("blob://attachments/x", bad)
    item = memory.list("blob://attachments/")["items"][0]
    assert item["uri"] == "blob://attachments/raw.bin" and item["size"] == 256


def test_generations_per_scheme(memory: MemoryRouter) -> None:
    schemes = ("kv", "json", "markdown", "log", "episodic", "working", "blob", "file", "vector", "graph")
    before = {scheme: memory.generation(scheme) for scheme in schemes}
    memory.write("kv://a", 1)
    memory.write("markdown://n", "x")
    memory.read("kv://a")
    memory.read("json://nope")
    after = {scheme: memory.generation(scheme) for scheme in schemes}
    assert after["kv"] == before["kv"] + 1
    assert after["markdown"] != before["markdown"]
    assert {s: after[s] for s in schemes if s not in ("kv", "markdown")} == {
        s: before[s] for s in schemes if s not in ("kv", "markdown")}
    with pytest.raises(InvalidParamsError):
        memory.generation("nope")


def test_threads_share_one_service(tmp_path: Path) -> None:
    memory = MemoryRouter(tmp_path)
    memory.read("kv://warm")  # this thread's connection exists before the other tables are used elsewhere
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                memory.write(f"log://t{n}", {"event_type": "e", "payload": {"i": i}})
                memory.write(f"working://t{n}/k{i}", i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            memory.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [i["count"] for i in memory.list("log://")["items"]] == [20, 20, 20, 20]
    assert len(memory.read("working://t3")["value"]) == 20
    memory.close()


def test_a_second_service_sees_writes(tmp_path: Path) -> None:
    first, second = MemoryRouter(tmp_path), MemoryRouter(tmp_path)
    generation = second.generation("kv")
    first.write("kv://shared", {"v": 1})
    assert second.read("kv://shared")["value"] == {"v": 1}
    assert second.generation("kv") == generation + 1
    first.close()
    second.close()


def test_vector_and_graph_without_components(memory: MemoryRouter) -> None:
    for call in (lambda: memory.read("vector://docs?q=x"), lambda: memory.write("vector://docs/a", "t"),
                 lambda: memory.list("vector://")):
        with pytest.raises(StorageError, match="vector store is not configured"):
            call()
    with pytest.raises(StorageError, match="knowledge graph is not configured"):
        memory.read("graph://main/node/x")
    assert memory.generation("vector") == 0


def test_vector_delegation(tmp_path: Path) -> None:
    vectors = FakeVectors()
    memory = MemoryRouter(tmp_path, vectors=vectors)
    memory.write("vector://docs/file://docs/auth.md", {"text": "auth uses JWT", "metadata": {"title": "Auth"}})
    memory.write("vector://docs", "storage uses sqlite")  # named by its content
    assert vectors.calls[0] == ("upsert", "docs", "file://docs/auth.md", "auth uses JWT", {"title": "Auth"})
    assert vectors.calls[1][2].startswith("sha256:")
    result = memory.read("vector://docs?q=JWT&topK=3&min_score=0.2&mode=hybrid")
    assert result["value"] == [{"doc_uri": "file://docs/auth.md", "score": 0.9, "text": "auth uses JWT"}]
    assert vectors.calls[-1] == ("search", "docs", "JWT", 3, 0.2, "hybrid")
    assert memory.read("vector://docs/file://docs/auth.md")["value"]["text"] == "auth uses JWT"
    assert memory.read("vector://docs/nope")["exists"] is False
    assert len(memory.read("vector://docs")["value"]) == 2
    uris = [i["uri"] for i in memory.list("vector://docs/")["items"]]
    assert "vector://docs/file://docs/auth.md" in uris and len(uris) == 2
    assert memory.generation("vector") == 2
    assert memory.delete("vector://docs/file://docs/auth.md") == {"uri": "vector://docs/file://docs/auth.md",
                                                                  "deleted": True}
    with pytest.raises(InvalidParamsError):
        memory.delete("vector://docs")
    with pytest.raises(InvalidParamsError):
        memory.read("vector://docs?q=x&mode=fuzzy")
    with pytest.raises(InvalidParamsError):
        memory.write("vector://docs/x", {"metadata": {}})
    with pytest.raises(InvalidParamsError):
        memory.write("vector://docs?q=1", "t")


def test_graph_delegation(tmp_path: Path) -> None:
    graph = FakeGraph()
    layout = WorkspaceLayout(tmp_path)
    layout.graph_views_dir.mkdir(parents=True)
    (layout.graph_views_dir / "dependents.json").write_text("{}")
    memory = MemoryRouter(layout, graph=graph)
    memory.write("graph://main/node/auth.py", {"kind": "File", "name": "auth.py", "attributes": {"loc": 10}})
    memory.write("graph://main/node/jwt", {"kind": "Concept"})
    memory.write("graph://main/edge/e1", {"kind": "uses", "from": "auth.py", "to": "jwt"})
    assert memory.read("graph://main/node/auth.py")["value"]["attributes"] == {"loc": 10}
    assert graph.nodes[("main", "jwt")]["name"] == "jwt"  # the id names an unnamed node
    assert memory.read("graph://main/edge/e1")["value"]["to"] == "jwt"
    assert memory.read("graph://main/node/nope") == {"uri": "graph://main/node/nope", "exists": False,
                                                      "value": None}
    result = memory.read('graph://dependents?module=auth&depth=2&id="7"')
    # the query's text as given: the view's declared types read it (stores/graph_views.py QueryText)
    assert graph.views[-1] == ("dependents", {"module": "auth", "depth": "2", "id": '"7"'})
    assert result["exists"] is True
    with pytest.raises(NotFoundError):
        memory.read("graph://missing")
    with pytest.raises(StorageError, match="cypher exploded"):
        memory.read("graph://broken")
    for bad in ({"name": "no kind"}, {"kind": "uses", "from": "a"}, {"kind": "k", "from": "a", "to": "b",
                                                                     "attributes": []}):
        with pytest.raises(InvalidParamsError):
            memory.write("graph://main/edge/e2", bad)
    with pytest.raises(InvalidParamsError, match="read-only"):
        memory.write("graph://dependents", {})
    assert memory.list("graph://")["items"] == [{"uri": "graph://dependents", "view": "dependents"}]
    assert memory.delete("graph://main/edge/e1")["deleted"] is True
    assert memory.delete("graph://main/node/jwt")["deleted"] is True
    assert memory.delete("graph://main/node/jwt")["deleted"] is False


@pytest.mark.parametrize("uri", ["", "kv:/x", "unknown://x", "kv://a//b", "json://d#nope"])
def test_malformed_uris(memory: MemoryRouter, uri: str) -> None:
    for call in (memory.read, memory.delete, lambda u: memory.write(u, 1)):
        with pytest.raises(InvalidParamsError) as caught:
            call(uri)
        assert caught.value.errors[0]["path"] == "/uri"


def test_a_listed_uri_reads_back_its_own_item_whatever_the_names(memory: MemoryRouter) -> None:
    """A thread, bucket or log instance with '/' or '%' in its name: `list` rendered the '/' raw,
    so working://t/1/k read another item, a bucket's blob was not found and a log was refused."""
    written = {"working://t%2F1/k": "A", "working://t/1%2Fk": "B", "working://sprint%252024/k": "C",
               "blob://b%2Fx/key": base64.b64encode(b"x").decode(), "episodic://a%2Fb": None,
               "log://ops%2Fprod": None}
    for uri, value in written.items():
        if uri.startswith("episodic://"):
            memory.write(uri, {"role": "user", "content": "hi"})
        elif uri.startswith("log://"):
            memory.write(uri, {"event_type": "deploy"})
        else:
            memory.write(uri, value)
    for scheme in ("working", "blob", "episodic", "log"):
        listed = [item["uri"] for item in memory.list(f"{scheme}://")["items"]]
        assert listed, scheme
        for uri in listed:
            assert memory.read(uri)["exists"], uri
    values = {memory.read(item["uri"])["value"] for item in memory.list("working://")["items"]}
    assert values == {"A", "B", "C"}  # each listed URI reads its own item, none another's
    assert [i["uri"] for i in memory.list("working://t%2F1/")["items"]] == ["working://t%2F1/k"]
    assert memory.read([i["uri"] for i in memory.list("blob://")["items"]][0])["value"] == written["blob://b%2Fx/key"]
