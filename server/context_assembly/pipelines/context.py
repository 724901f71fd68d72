"""What a step sees: the stores, the request's variables, the items so far, and the step's parameters.

Stores are duck-typed (the protocols below): the embedded stores implement them, tests use small
in-memory fakes, and any member may be None (not configured), which fails only the steps that
need it. Store calls raise on bad input (a path that leaves the workspace, say); the runner turns
that into a failed pipeline, never an exception out of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from attrs import define, field

from ..model.request import AssemblyRequest
from ..registry.values import as_number
from .items import NOT_READ, Item, Readable, admitting, may_read_item
from .templates import Variables, fill

# -- the stores ------------------------------------------------------------------------------------


class KVStore(Protocol):
    def get(self, instance: str, namespace: str, key: str) -> Any:
        """The value, or None when the key does not exist.

        A store may also offer `keys(instance, namespace) -> list[str]`; kv_get without `keys`
        reads the whole namespace through it."""


class JsonDocStore(Protocol):
    def get(self, doc: str, pointer: str | None = None) -> Any | None: ...


class NoteStore(Protocol):
    def read(self, note: str) -> str | None: ...


class EventStore(Protocol):
    def search(self, instance: str, event_type: str | None = None, since: float | None = None,
               fields: list[str] | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Events newest first, each `{id, ts, event_type, payload}`."""


class EpisodicStore(Protocol):
    def recent(self, thread_id: str, limit: int) -> list[dict[str, Any]]:
        """Turns oldest to newest, each `{role, content, ts?}`."""


class FileStore(Protocol):
    def read(self, path: str) -> str | None:
        """A workspace file's text, None when it does not exist; raises on paths leaving the workspace."""


class VectorStore(Protocol):
    def search(self, collection: str, query: str, top_k: int = 5, min_score: float = 0.0,
               mode: str = "vector", admit: Callable[[str, Any], bool] | None = None) -> list[dict[str, Any]]:
        """Hits `{id, doc_uri, chunk, text, score, metadata, source}`, best first. `admit`: the
        documents (source, metadata) a restricted caller may see: ranked as if the others were not there."""


class GraphStore(Protocol):
    def run_view(self, view_id: str, params: dict[str, Any], timeout_ms: int | None = None) -> list[dict[str, Any]]:
        ...

    def neighbors(self, instance: str, node_ids: list[str], depth: int = 1, edge_kinds: list[str] | None = None,
                  limit: int = 50, *, admit: Callable[[str], bool] | None = None) -> list[dict[str, Any]]:
        """`admit`: the node and edge URIs a restricted caller may see; the walk never crosses the others."""


class Stores(Protocol):
    """The store bundle a pipeline reads; any member may be None."""

    @property
    def kv(self) -> KVStore | None: ...
    @property
    def json_docs(self) -> JsonDocStore | None: ...
    @property
    def notes(self) -> NoteStore | None: ...
    @property
    def events(self) -> EventStore | None: ...
    @property
    def episodic(self) -> EpisodicStore | None: ...
    @property
    def files(self) -> FileStore | None: ...
    @property
    def vectors(self) -> VectorStore | None: ...
    @property
    def graph(self) -> GraphStore | None: ...


@define
class StoreBundle:
    """A plain `Stores`: set the members you have."""

    kv: KVStore | None = None
    json_docs: JsonDocStore | None = None
    notes: NoteStore | None = None
    events: EventStore | None = None
    episodic: EpisodicStore | None = None
    files: FileStore | None = None
    vectors: VectorStore | None = None
    graph: GraphStore | None = None


# -- errors a step raises --------------------------------------------------------------------------


class StepError(Exception):
    """A step cannot do its work; the message is shown to the user as is."""


class StepTimeout(StepError):
    """The deadline passed while a step was working."""


class StepCancelled(StepError):
    """The caller cancelled the run (e.g. `$/cancelRequest`)."""


# -- the context -----------------------------------------------------------------------------------

RunSteps = Callable[[list[Any], "StepContext"], None]
# The connected client's model: an `llm/complete` request `{prompt, system?}` -> `{text}` (SPEC §7).
# The sidecar has none of its own; a step that wants one asks through this (model.ask_model).
Llm = Callable[[dict[str, Any]], dict[str, Any]]


@define(eq=False)
class StepContext:
    memory_id: str | None
    request: AssemblyRequest
    lookup: Mapping[str, Any]
    stores: Stores
    items: list[Item] = field(factory=list)
    query: str = ""
    outputs: dict[str, list[Item]] = field(factory=dict)  # alias -> that step's items
    deadline: float | None = None  # time.monotonic() seconds
    cancelled: Callable[[], bool] | None = None
    run_steps: RunSteps | None = None  # set by the runner: control steps run nested steps with it
    llm: Llm | None = None  # None: no client model (a CLI run, a client without llm/complete)
    passing: bool = False  # a step stood in for the model's answer (slow, failing): the result is not kept
    # a restricted caller's read patterns (None: everything): what they do not cover is never added,
    # so counts, later steps, warnings and the cached run know only what the caller may read
    readable: Readable | None = None
    variables_used: set[str] = field(factory=set)
    # per step, reset by the runner before each one:
    step: str = ""  # the current step's label (alias, or type#index)
    produced: list[Item] | None = None  # retrieval and expansion steps: only the items they added
    warnings: list[str] = field(factory=list)
    branch: str | None = None  # conditional: the branch it ran
    stopped: bool = False  # early_exit asked to stop (stays set: the whole pipeline stops)

    def variables(self, item: Item | None = None) -> Variables:
        return Variables(self.lookup, self.query, self.outputs, item, self.variables_used)

    def fill(self, value: Any, item: Item | None = None) -> Any:
        return fill(value, self.variables(item))

    def add(self, items: list[Item]) -> None:
        """Append newly read items; they are this step's output (those the caller may read)."""
        if self.readable is not None:
            items = [i for i in items if self.may_show(i)]
        for item in items:
            if not item.origin:
                item.origin = self.step
        self.items.extend(items)
        self.produced = (self.produced or []) + items

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def may_show(self, item: Item) -> bool:
        """Whether the caller may read every source of `item`."""
        return may_read_item(self.readable, item.source, item.metadata)

    def admit(self) -> Callable[[str, Any], bool] | None:
        """A store's test of what the caller may see (source, metadata), for searches that rank."""
        return admitting(self.readable)

    def withheld(self, uri: str) -> bool:
        """Whether the caller may not read the address `uri` a step names: then the step neither reads
        it nor says whether it exists (the same warning either way)."""
        if self.readable is None or self.readable(uri):
            return False
        self.warn(f"{uri} is {NOT_READ}")
        return True

    def check(self) -> None:
        """Raise when the deadline passed or the run was cancelled (called between steps and in loops)."""
        if self.cancelled is not None and self.cancelled():
            raise StepCancelled("cancelled")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise StepTimeout("the pipeline ran out of time")

    def store(self, name: str) -> Any:
        """A configured store, or a StepError naming the missing one."""
        store = getattr(self.stores, name, None)
        if store is None:
            raise StepError(f"the {name} store is not configured")
        return store

    @property
    def thread_id(self) -> str | None:
        thread = self.request.scope_variables.thread or {}
        value = self.request.thread_id or thread.get("thread_id")
        return value if isinstance(value, str) and value else None


# -- parameters ------------------------------------------------------------------------------------


def text_param(params: Mapping[str, Any], name: str, default: str | None = None) -> str | None:
    value = params.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise StepError(f"'{name}' must be a string")
    return str(value)


def required_text(params: Mapping[str, Any], name: str) -> str:
    value = text_param(params, name)
    if not value:
        raise StepError(f"'{name}' is required")
    return value


def texts_param(params: Mapping[str, Any], name: str) -> list[str] | None:
    """A string or a list of strings, as a list (None when absent)."""
    value = params.get(name)
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise StepError(f"'{name}' must be a string or a list of strings")
        out.append(str(v))
    return out


def number_param(params: Mapping[str, Any], name: str, default: float | None = None) -> float | None:
    value = params.get(name, default)
    if value is None:
        return None
    number = as_number(value)
    if number is None:
        raise StepError(f"'{name}' must be a number, got {value!r}")
    return float(number)


def int_param(params: Mapping[str, Any], name: str, default: int | None = None, minimum: int = 0) -> int | None:
    number = number_param(params, name, default)
    if number is None:
        return None
    if number != int(number) or number < minimum:
        raise StepError(f"'{name}' must be an integer of at least {minimum}, got {params.get(name)!r}")
    return int(number)


def object_param(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StepError(f"'{name}' must be an object")
    return value


def choice_param(params: Mapping[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = params.get(name, default)
    if value not in choices:
        raise StepError(f"'{name}' must be one of {', '.join(choices)}, got {value!r}")
    return str(value)
