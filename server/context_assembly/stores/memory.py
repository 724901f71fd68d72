"""The URI layer (SPEC §5.1, §8 `memory/*`): read, write, delete and list any store by its URI.

One `MemoryRouter` per workspace. It only routes: the stores are a `StoreSet` (one per kind,
typed by the interfaces) that `stores.factory.open_stores` built from the settings' backend, and
each store reports its own write generation. The result shapes are exactly those of
`memory/read|write|delete|list`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

from ..errors import ConflictError, ContextAssemblyError, StorageError
from ..registry.values import json_equal
from ..workspace.layout import WorkspaceLayout
from .checks import MAX_ADDRESS_BYTES, check_append_key, utf8_size
from .confine import check_key, check_relative_path, refuse
from .event import event_fields
from .graph import GraphStore
from .graph_views import QueryText
from .interfaces import BlobStore, EpisodicStore, EventLog, FileReader, JsonStore, KVStore, NoteStore, WorkingMemory
from .store_set import StoreSet
from .uri import DEFAULT, SCHEMES, MemoryUri, normalize_prefix, parse_before, parse_limit, parse_uri, render
from .vector import VectorStore

DEFAULT_READ_LIMIT = 20
APPEND_ONLY = "the event log is append-only: events are never updated or deleted (write log://<instance> to append)"

T = TypeVar("T")
Result = dict[str, Any]
Items = list[Result]


class MemoryRouter:
    """Routes URIs to `stores`. Without `stores`, the embedded stores of `layout` with the given
    vector store and graph (None: not configured)."""

    def __init__(self, layout: WorkspaceLayout | Path | str, *, stores: StoreSet | None = None,
                 vectors: Any = None, graph: Any = None) -> None:
        self.layout = layout if isinstance(layout, WorkspaceLayout) else WorkspaceLayout(Path(layout))
        if stores is None:
            from .factory import open_embedded_stores  # late: the factory imports every backend

            stores = open_embedded_stores(self.layout, components=False)
            stores.vectors, stores.graph = vectors, graph
        self.stores = stores

    @property
    def backend(self) -> str:
        return self.stores.backend

    @property
    def kv(self) -> KVStore:
        return self.stores.kv

    @property
    def json_docs(self) -> JsonStore:
        return self.stores.json_docs

    @property
    def events(self) -> EventLog:
        return self.stores.events

    @property
    def episodic(self) -> EpisodicStore:
        return self.stores.episodic

    @property
    def working(self) -> WorkingMemory:
        return self.stores.working

    @property
    def blobs(self) -> BlobStore:
        return self.stores.blobs

    @property
    def notes(self) -> NoteStore:
        return self.stores.notes

    @property
    def files(self) -> FileReader:
        return self.stores.files

    @property
    def vectors(self) -> VectorStore | None:
        return self.stores.vectors

    @property
    def graph(self) -> GraphStore | None:
        return self.stores.graph

    def close(self) -> None:
        self.stores.close()

    # -- memory/read, write, delete, list

    def read(self, uri: str) -> Result:
        parsed = parse_uri(uri)
        exists, value = getattr(self, f"_read_{parsed.scheme}")(parsed)
        return {"uri": uri, "exists": exists, "value": value}

    def write(self, uri: str, value: Any, *, key: str | None = None, same_value: bool = True) -> Result:
        """`key`: an idempotency key. It matters to appends (`log://`, `episodic://`): a second
        append with the key of one already there appends nothing and answers `duplicate: true`;
        with another value it is a ConflictError (unless not `same_value`: an ingestion retry, whose
        model may answer otherwise). Every other write replaces its value, which a retry repeats
        harmlessly: the key is ignored."""
        parsed = parse_uri(uri)
        if parsed.params:
            raise refuse(f"{uri!r}: query parameters only apply to reads")
        check_append_key(key)
        _check_address_bytes(parsed, key)
        if parsed.scheme in ("log", "episodic"):
            stored = getattr(self, f"_write_{parsed.scheme}")(parsed, value, key)
            if not stored.get("duplicate"):
                return {"uri": uri, "written": True}
            if same_value and not _same_append(parsed.scheme, stored, value):
                raise ConflictError(f"idempotency key {key!r} was already used for another value in {uri}: "
                                    "send a new key for a new append", {"uri": uri, "idempotency_key": key})
            return {"uri": uri, "written": True, "duplicate": True}
        getattr(self, f"_write_{parsed.scheme}")(parsed, value)
        return {"uri": uri, "written": True}

    def delete(self, uri: str) -> Result:
        parsed = parse_uri(uri)
        if parsed.scheme == "log":
            raise refuse(APPEND_ONLY)
        if parsed.params:
            raise refuse(f"{uri!r}: query parameters only apply to reads")
        deleted = getattr(self, f"_delete_{parsed.scheme}")(parsed)
        return {"uri": uri, "deleted": bool(deleted)}

    def list(self, prefix: str, *, limit: int | None = None) -> Result:
        """Every item whose URI starts with `prefix` (as URIs are rendered), sorted by URI."""
        scheme, wanted = normalize_prefix(prefix)
        items = getattr(self, f"_list_{scheme}")(wanted)
        if scheme != "kv":  # kv:// matches its longer spellings too, so it filters itself
            items = [item for item in items if item["uri"].startswith(wanted)]
        items.sort(key=lambda item: item["uri"])
        return {"items": items if limit is None else items[:limit]}

    def generation(self, scheme: str) -> int:
        """The write generation of a scheme's store: it changes with every write, in any process."""
        if scheme not in SCHEMES:
            raise refuse(f"unknown memory URI scheme '{scheme}://' (known: {', '.join(SCHEMES)})", "/scheme")
        return self.stores.generation(scheme)

    def clear_working(self, thread_id: str) -> int:
        """End of a thread's turn: its scratchpad goes. The number of entries removed."""
        return self.working.clear(thread_id)

    # -- kv://

    def _read_kv(self, uri: MemoryUri) -> tuple[bool, Any]:
        entry = self.kv.get(*uri.parts)
        return (entry is not None, entry.value if entry else None)

    def _write_kv(self, uri: MemoryUri, value: Any) -> None:
        instance, namespace, key = uri.parts
        self.kv.set(instance, namespace, key, value)

    def _delete_kv(self, uri: MemoryUri) -> bool:
        return self.kv.delete(*uri.parts)

    def _list_kv(self, wanted: str) -> Items:
        # kv://k, kv://default/k and kv://default/default/k are one entry: a prefix may follow any spelling
        # (kv://default/ lists the default instance), the item shows the shortest.
        items = []
        for e in self.kv.list(values=False):
            forms = [render("kv", (e.instance, e.namespace, e.key))]
            forms += [f"kv://{_seg(e.namespace)}/{_seg(e.key)}"] if e.instance == DEFAULT else []
            forms += [f"kv://{_seg(e.instance)}/{_seg(e.namespace)}/{_seg(e.key)}"]
            if any(form.startswith(wanted) for form in forms):
                items.append({"uri": forms[0], "instance": e.instance, "namespace": e.namespace, "key": e.key,
                              "updated_at": e.updated_at})
        return items

    # -- json://

    def _read_json(self, uri: MemoryUri) -> tuple[bool, Any]:
        return self.json_docs.get(uri.parts[0], uri.pointer)

    def _write_json(self, uri: MemoryUri, value: Any) -> None:
        self.json_docs.put(uri.parts[0], value, uri.pointer)

    def _delete_json(self, uri: MemoryUri) -> bool:
        return self.json_docs.delete(uri.parts[0], uri.pointer)

    def _list_json(self, wanted: str) -> Items:
        return [{"uri": render("json", (d.name,)), "name": d.name, "size": d.size, "updated_at": d.updated_at}
                for d in self.json_docs.list()]

    # -- markdown://

    def _read_markdown(self, uri: MemoryUri) -> tuple[bool, Any]:
        text = self.notes.read(uri.parts[0])
        return (text is not None, text)

    def _write_markdown(self, uri: MemoryUri, value: Any) -> None:
        if not isinstance(value, str):
            raise refuse("a markdown note is written from a string (use --text on the command line)", "/value")
        self.notes.write(uri.parts[0], value)

    def _delete_markdown(self, uri: MemoryUri) -> bool:
        return self.notes.delete(uri.parts[0])

    def _list_markdown(self, wanted: str) -> Items:
        _check_path_prefix(wanted, "markdown note", allow_hidden=False)
        return [{"uri": render("markdown", (n.name,)), "name": n.name, "size": n.size, "modified": n.modified}
                for n in self.notes.list()]

    # -- file:// (read-only)

    def _read_file(self, uri: MemoryUri) -> tuple[bool, Any]:
        text = self.files.read(uri.parts[0])
        return (text is not None, text)

    def _write_file(self, uri: MemoryUri, value: Any) -> None:
        raise refuse("file:// is read-only: workspace files are never written through memory")

    def _delete_file(self, uri: MemoryUri) -> bool:
        raise refuse("file:// is read-only: workspace files are never deleted through memory")

    def _list_file(self, wanted: str) -> Items:
        body = _check_path_prefix(wanted, "file path", allow_hidden=True)
        directory, _, name = body.rpartition("/")
        return [{"uri": render("file", (f.path,)) + ("/" if f.is_dir else ""), "path": f.path, "is_dir": f.is_dir,
                 "size": f.size, "modified": f.modified} for f in self.files.list(directory, name)]

    # -- log:// (append-only)

    def _read_log(self, uri: MemoryUri) -> tuple[bool, Any]:
        if len(uri.parts) == 2:
            event_id = int(uri.parts[1])
            event = self.events.get(uri.parts[0], event_id) if event_id < 2**63 else None  # ids are 64-bit
            return (event is not None, event)
        limit, before = uri.param("limit"), uri.param("before")
        events = self.events.search(
            uri.parts[0], event_type=uri.param_list("event_type", "eventType") or None, since=uri.since,
            fields=uri.param_list("fields") or None,
            limit=parse_limit(limit) if limit is not None else DEFAULT_READ_LIMIT,
            before=parse_before(before) if before is not None else None)
        return (True, events)

    def _write_log(self, uri: MemoryUri, value: Any, key: str | None) -> Result:
        if len(uri.parts) == 2:
            raise refuse(APPEND_ONLY)
        return self.events.append(uri.parts[0], *event_fields(value), key=key)

    def _list_log(self, wanted: str) -> Items:
        return [{"uri": render("log", (i.name,)), "instance": i.name, "count": i.count, "last_ts": i.last_ts}
                for i in self.events.instances()]

    # -- episodic://

    def _read_episodic(self, uri: MemoryUri) -> tuple[bool, Any]:
        limit, before = uri.param("limit"), uri.param("before")
        turns = self.episodic.recent(uri.parts[0], parse_limit(limit) if limit is not None else DEFAULT_READ_LIMIT,
                                     before=parse_before(before) if before is not None else None)
        return (True, turns)

    def _write_episodic(self, uri: MemoryUri, value: Any, key: str | None) -> Result:
        return self.episodic.append(uri.parts[0], value, key=key)

    def _delete_episodic(self, uri: MemoryUri) -> bool:
        return self.episodic.clear(uri.parts[0]) > 0

    def _list_episodic(self, wanted: str) -> Items:
        return [{"uri": render("episodic", (t.name,)), "thread_id": t.name, "count": t.count, "last_ts": t.last_ts}
                for t in self.episodic.threads()]

    # -- working://

    def _read_working(self, uri: MemoryUri) -> tuple[bool, Any]:
        if len(uri.parts) == 1:
            scratch = self.working.list(uri.parts[0])  # none left (the turn ended): it does not exist
            return (bool(scratch), scratch or None)
        entry = self.working.get(*uri.parts)
        return (entry is not None, entry.value if entry else None)

    def _write_working(self, uri: MemoryUri, value: Any) -> None:
        if len(uri.parts) == 1:
            raise refuse("name a key to write: working://<thread_id>/<key>")
        thread_id, key = uri.parts
        self.working.set(thread_id, key, value)

    def _delete_working(self, uri: MemoryUri) -> bool:
        if len(uri.parts) == 1:
            return self.working.clear(uri.parts[0]) > 0
        return self.working.delete(*uri.parts)

    def _list_working(self, wanted: str) -> Items:
        return [{"uri": render("working", (e.thread_id, e.key)), "thread_id": e.thread_id, "key": e.key,
                 "updated_at": e.updated_at} for e in self.working.entries()]

    # -- blob:// (base64 on the wire)

    def _read_blob(self, uri: MemoryUri) -> tuple[bool, Any]:
        data = self.blobs.get(*uri.parts)
        return (data is not None, base64.b64encode(data).decode("ascii") if data is not None else None)

    def _write_blob(self, uri: MemoryUri, value: Any) -> None:
        bucket, key = uri.parts
        self.blobs.put(bucket, key, blob_data(value))

    def _delete_blob(self, uri: MemoryUri) -> bool:
        return self.blobs.delete(*uri.parts)

    def _list_blob(self, wanted: str) -> Items:
        return [{"uri": render("blob", (b.bucket, b.key)), "bucket": b.bucket, "key": b.key, "size": b.size,
                 "sha256": b.sha256, "updated_at": b.updated_at} for b in self.blobs.list()]

    # -- vector:// (delegated)

    def _vector_store(self) -> Any:
        return self.stores.store("vector")

    def _read_vector(self, uri: MemoryUri) -> tuple[bool, Any]:
        vectors = self._vector_store()
        collection = uri.parts[0]
        if len(uri.parts) == 2:
            docs = _delegate("vector", lambda: vectors.list(collection))
            found = [d for d in docs if isinstance(d, dict) and uri.parts[1] in (d.get("doc_uri"), d.get("uri"))]
            return (bool(found), found[0] if found else None)
        query = uri.param("q", "query")
        if query is None:
            return (True, _delegate("vector", lambda: vectors.list(collection)))
        top_k = _number(uri.param("top_k", "topK"), int, 5, "top_k")
        min_score = _number(uri.param("min_score", "minScore"), float, 0.0, "min_score")
        mode = uri.param("mode") or "vector"
        if mode not in ("vector", "hybrid"):
            raise refuse(f"mode must be vector or hybrid (got {mode!r})")
        return (True, _delegate("vector", lambda: vectors.search(collection, query, top_k=top_k,
                                                                  min_score=min_score, mode=mode)))

    def _write_vector(self, uri: MemoryUri, value: Any) -> None:
        vectors = self._vector_store()
        doc_uri, text, metadata = vector_document(uri, value)
        _delegate("vector", lambda: vectors.upsert(uri.parts[0], doc_uri, text, metadata))

    def _delete_vector(self, uri: MemoryUri) -> bool:
        vectors = self._vector_store()
        if len(uri.parts) == 1:
            raise refuse("name the document to delete: vector://<collection>/<doc uri>")
        return bool(_delegate("vector", lambda: vectors.delete(uri.parts[0], uri.parts[1])))

    def _list_vector(self, wanted: str) -> Items:
        vectors = self._vector_store()
        body = wanted[len("vector://"):]
        collection = unquote(body.split("/", 1)[0]) if "/" in body else None
        items = []
        for item in _delegate("vector", lambda: vectors.list(collection)):
            if not isinstance(item, dict):
                continue
            name = item.get("collection", collection)
            doc = item.get("doc_uri")
            if not isinstance(name, str):
                continue
            items.append({**item, "uri": render("vector", (name, doc) if isinstance(doc, str) else (name,))})
        return items

    # -- graph:// (delegated; views are named queries, read-only)

    def _graph_store(self) -> Any:
        return self.stores.store("graph")

    def _read_graph(self, uri: MemoryUri) -> tuple[bool, Any]:
        graph = self._graph_store()
        if len(uri.parts) == 1:
            params = {key: _param_value(value) for key, value in uri.params}
            return (True, _delegate("graph", lambda: graph.run_view(uri.parts[0], params)))
        instance, kind, ident = uri.parts
        getter = graph.get_node if kind == "node" else graph.get_edge
        found = _delegate("graph", lambda: getter(instance, ident))
        return (found is not None, found)

    def _write_graph(self, uri: MemoryUri, value: Any) -> None:
        graph = self._graph_store()
        if len(uri.parts) == 1:
            raise refuse("graph views are read-only: write graph://<instance>/node/<id> or …/edge/<id>")
        instance, kind, ident = uri.parts
        if not isinstance(value, dict) or not isinstance(value.get("kind"), str) or not value["kind"]:
            shape = "{kind, name, attributes}" if kind == "node" else "{kind, from, to, attributes}"
            raise refuse(f"a graph {kind} is written as {shape}", "/value")
        attributes = value.get("attributes")
        attributes = {} if attributes is None else attributes
        if not isinstance(attributes, dict):
            raise refuse("attributes must be an object", "/value/attributes")
        if kind == "node":
            name = value.get("name", ident)
            _delegate("graph", lambda: graph.upsert_node(instance, ident, value["kind"], name, attributes))
            return
        ends = [value.get("from"), value.get("to")]
        for end, field in zip(ends, ("from", "to"), strict=True):
            if not isinstance(end, str) or not end:
                raise refuse(f"an edge needs '{field}': a node id", f"/value/{field}")
        _delegate("graph", lambda: graph.upsert_edge(instance, ident, value["kind"], ends[0], ends[1], attributes))

    def _delete_graph(self, uri: MemoryUri) -> bool:
        graph = self._graph_store()
        if len(uri.parts) == 1:
            raise refuse("graph views are not deleted through memory: edit .codebolt/knowledgegraph/views/")
        instance, kind, ident = uri.parts
        remove = graph.delete_node if kind == "node" else graph.delete_edge
        return bool(_delegate("graph", lambda: remove(instance, ident)))

    def _list_graph(self, wanted: str) -> Items:
        views_dir = self.layout.graph_views_dir
        if not views_dir.is_dir():
            return []
        return [{"uri": render("graph", (path.stem,)), "view": path.stem}
                for path in sorted(views_dir.glob("*.json")) if path.is_file() and not path.name.startswith(".")]


def blob_data(value: Any) -> bytes:
    """The bytes of a value written to `blob://`: a base64 string."""
    if not isinstance(value, str):
        raise refuse("a blob is written as a base64 string", "/value")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise refuse("the blob value is not valid base64", "/value") from None


def vector_document(uri: MemoryUri, value: Any) -> tuple[str, str, dict[str, Any]]:
    """(doc uri, text, metadata) of a value written to `vector://<collection>[/<doc uri>]`."""
    metadata: Any
    if isinstance(value, str):
        text, metadata, named = value, {}, None
    elif isinstance(value, dict) and isinstance(value.get("text"), str):
        text, metadata, named = value["text"], value.get("metadata"), value.get("uri") or value.get("doc_uri")
        metadata = {} if metadata is None else metadata
    else:
        raise refuse("a vector document is written as {text, metadata} or a string", "/value")
    if not isinstance(metadata, dict):
        raise refuse("the document metadata must be an object", "/value/metadata")
    if len(uri.parts) == 2:
        doc_uri = uri.parts[1]
    elif named is not None:
        doc_uri = check_key(named, what="document URI", pointer="/value/uri")
        if utf8_size(uri.parts[0]) + utf8_size(doc_uri) > MAX_ADDRESS_BYTES:  # named in the value, not the URI
            raise refuse(f"the collection and document names are more than {MAX_ADDRESS_BYTES} bytes of UTF-8 "
                         "together", "/value/uri")
    else:  # an unnamed document is named by its content, so writing it again does not duplicate it
        doc_uri = "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return doc_uri, text, metadata


def _seg(part: str) -> str:
    return render("kv", (DEFAULT, DEFAULT, part))[len("kv://"):]


def _delegate(component: str, call: Callable[[], T]) -> T:
    """Call the vector store or graph; a failure that is not one of ours becomes a StorageError."""
    try:
        return call()
    except ContextAssemblyError:
        raise
    except Exception as exc:
        name = "vector store" if component == "vector" else "knowledge graph"
        raise StorageError(f"the {name} failed: {exc}") from exc


def _same_append(scheme: str, stored: Result, value: Any) -> bool:
    """Whether a retried append brings what the first one stored (a time the store gave it aside)."""
    if scheme == "log":
        event_type, payload, ts = event_fields(value)
        return bool(stored["event_type"] == event_type and json_equal(stored["payload"], payload)
                    and (ts is None or stored["ts"] == ts))
    # a turn (the store checked that it is an object before it answered the first one)
    if value.get("ts") is not None and value["ts"] != stored["ts"]:
        return False
    kept = {k: v for k, v in stored.items() if k not in ("seq", "ts", "duplicate")}
    return json_equal(kept, {k: v for k, v in value.items() if k != "ts"})


def _check_address_bytes(uri: MemoryUri, key: str | None) -> None:
    """What a write names, whatever the backend: at most MAX_ADDRESS_BYTES of UTF-8, so a name the
    embedded store takes never fails only on a shared database (checks.py)."""
    if uri.scheme in ("markdown", "file"):
        return  # files, named by path (each segment checked against the file system's limit)
    size = sum(utf8_size(part) for part in (*uri.parts, key or ""))
    if size > MAX_ADDRESS_BYTES:
        raise refuse(f"the names in this URI{' and the idempotency key' if key else ''} are {size} bytes of "
                     f"UTF-8 together; at most {MAX_ADDRESS_BYTES}")


def _check_path_prefix(wanted: str, what: str, *, allow_hidden: bool) -> str:
    """The decoded path part of a markdown:// or file:// prefix, refused when it tries to leave its base."""
    body = unquote(wanted.split("://", 1)[1])
    stem = body.rstrip("/")
    if stem:
        check_relative_path(stem, what=what, pointer="/prefix", allow_hidden=allow_hidden)
    return body


def _number(text: str | None, kind: type[int] | type[float], default: Any, name: str) -> Any:
    if text is None:
        return default
    try:
        return kind(text)
    except ValueError:
        raise refuse(f"{name} must be a number (got {text!r})") from None


def _param_value(text: str) -> QueryText:
    """A view parameter from a query string, read as the view declares it (`QueryText`)."""
    return QueryText(text)

