"""The agent-side Python client: starts a sidecar, initialises it on a workspace, and offers every
custom method of SPEC §8 as an async method returning plain JSON.

    async with ContextAssemblyClient("path/to/workspace") as client:
        client.on("contextAssembly/complete", lambda method, params: print(params["meta"]))
        context = await client.assemble(request)
        await client.memory.write("kv://prefs/theme", {"dark": True})

Errors come back as the domain exceptions of `context_assembly.errors` (InvalidParamsError with
`.errors`, NotFoundError, ConflictError, TimeoutError_, StorageError, CancelledError), each with
`.code`, `.message` and `.data`; other JSON-RPC errors as `RpcError`. An `llm` callback, when
given, answers the server's `llm/complete` requests (`{prompt, system?, schema?}` → `{text}`, or
the text as a string):
the client advertises it with `initializationOptions.llm = true`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import ConflictError, TimeoutError_
from .compact_trace import TraceLayouts
from .connection import Connection, Listener, freeze_once

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
Items = list[JSON]  # an alias: the `list` methods shadow the builtin in class bodies
LlmCallback = Callable[[JSON], Any]  # request -> {"text": ...} or the text itself (or an awaitable of either)


def _llm_answer(llm: LlmCallback) -> Callable[[JSON], Any]:
    """`llm` answering `llm/complete`: a plain string is the answer's text (as the TypeScript client
    takes it; it failed the step with "answer is not an object")."""

    async def answer(request: JSON) -> Any:
        result = await llm(request) if inspect.iscoroutinefunction(llm) else await asyncio.to_thread(llm, request)
        if inspect.isawaitable(result):
            result = await result
        return {"text": result} if isinstance(result, str) else result

    return answer

ASSEMBLY_EVENTS = "contextAssembly/"
INGESTION_EVENTS = "memoryIngestion/"


def default_command() -> list[str]:
    return [sys.executable, "-m", "context_assembly", "serve"]


class _Family:
    def __init__(self, client: ContextAssemblyClient, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    async def _call(self, name: str, params: Any = None) -> Any:
        return await self._client.request(self._prefix + name, {} if params is None else params)


class RuleEngines(_Family):
    """`contextRuleEngine/*`."""

    def __init__(self, client: ContextAssemblyClient) -> None:
        super().__init__(client, "contextRuleEngine/")

    async def list(self) -> Items:
        return (await self._call("list"))["items"]

    async def get(self, engine_id: str) -> JSON:
        return await self._call("get", {"id": engine_id})

    async def create(self, engine: JSON) -> JSON:
        return await self._call("create", engine)

    async def update(self, engine_id: str, updates: JSON) -> JSON:
        return await self._call("update", {"id": engine_id, "updates": updates})

    async def delete(self, engine_id: str) -> JSON:
        return await self._call("delete", {"id": engine_id})

    async def add_rule(self, engine_id: str, rule: JSON) -> JSON:
        return await self._call("addRule", {"engine_id": engine_id, "rule": rule})

    async def update_rule(self, engine_id: str, rule_id: str, updates: JSON) -> JSON:
        return await self._call("updateRule", {"engine_id": engine_id, "rule_id": rule_id, "updates": updates})

    async def delete_rule(self, engine_id: str, rule_id: str) -> JSON:
        return await self._call("deleteRule", {"engine_id": engine_id, "rule_id": rule_id})

    async def evaluate(self, request: JSON, engine_id: str | None = None, *, compact_trace: bool = False) -> JSON:
        """`compact_trace`: see `ContextAssemblyClient.evaluate_rules`."""
        params = request if engine_id is None else {**request, "id": engine_id}
        if compact_trace:
            return await self._client._expanded(self._prefix + "evaluate", params)
        return await self._call("evaluate", params)

    async def trace_layout(self, engine_id: str, layout: str | None = None) -> JSON:
        """The static layout of the engine's compact trace (ConflictError when `layout` is no longer current)."""
        return await self._call("traceLayout", _present(id=engine_id, layout=layout))

    async def possible_variables(self) -> Items:
        return (await self._call("possibleVariables"))["items"]

    async def validate(self, draft: JSON, uri: str | None = None) -> JSON:
        return await self._call("validate", draft if uri is None else {**draft, "uri": uri})


class PersistentMemory(_Family):
    """`persistentMemory/*`."""

    def __init__(self, client: ContextAssemblyClient) -> None:
        super().__init__(client, "persistentMemory/")

    async def list(self) -> Items:
        return (await self._call("list"))["items"]

    async def get(self, memory_id: str) -> JSON:
        return await self._call("get", {"id": memory_id})

    async def create(self, definition: JSON) -> JSON:
        return await self._call("create", definition)

    async def update(self, memory_id: str, updates: JSON) -> JSON:
        return await self._call("update", {"id": memory_id, "updates": updates})

    async def delete(self, memory_id: str) -> JSON:
        return await self._call("delete", {"id": memory_id})

    async def validate(self, definition: JSON) -> JSON:
        return await self._call("validate", definition)

    async def execute(self, memory_id: str, request: JSON) -> JSON:
        return await self._call("execute", {"id": memory_id, "request": request})

    async def step_specs(self) -> Items:
        return (await self._call("stepSpecs"))["items"]


class Ingestion(_Family):
    """`memoryIngestion/*`."""

    def __init__(self, client: ContextAssemblyClient) -> None:
        super().__init__(client, "memoryIngestion/")

    async def list(self, active_only: bool = False) -> Items:
        return (await self._call("list", {"active_only": active_only}))["items"]

    async def get(self, pipeline_id: str) -> JSON:
        return await self._call("get", {"id": pipeline_id})

    async def create(self, pipeline: JSON) -> JSON:
        return await self._call("create", pipeline)

    async def update(self, pipeline_id: str, updates: JSON) -> JSON:
        return await self._call("update", {"id": pipeline_id, "updates": updates})

    async def delete(self, pipeline_id: str) -> JSON:
        return await self._call("delete", {"id": pipeline_id})

    async def validate(self, pipeline: JSON) -> JSON:
        return await self._call("validate", pipeline)

    async def execute(self, pipeline_id: str, payload: JSON | None = None, *, trigger: str | None = None,
                      scope_variables: JSON | None = None, additional_variables: JSON | None = None,
                      idempotency_key: str | None = None, on_event: Listener | None = None) -> JSON:
        """Run one pipeline. `on_event` gets this pipeline's `memoryIngestion/*` notifications of the run.
        `idempotency_key`: send it again with the same key after a lost answer, and it runs once."""
        params = _present(id=pipeline_id, payload=payload, trigger=trigger, scope_variables=scope_variables,
                          additional_variables=additional_variables, idempotency_key=idempotency_key)
        with self._client._routed(INGESTION_EVENTS, "pipeline_id", pipeline_id, on_event):
            return await self._call("execute", params)

    async def activate(self, pipeline_id: str) -> JSON:
        return await self._call("activate", {"id": pipeline_id})

    async def disable(self, pipeline_id: str) -> JSON:
        return await self._call("disable", {"id": pipeline_id})

    async def processor_specs(self) -> Items:
        return (await self._call("processorSpecs"))["items"]


class Memory(_Family):
    """`memory/*`: the stores by URI, and the event bus feeding ingestion."""

    def __init__(self, client: ContextAssemblyClient) -> None:
        super().__init__(client, "memory/")

    async def read(self, uri: str) -> JSON:
        return await self._call("read", {"uri": uri})

    async def write(self, uri: str, value: Any, *, idempotency_key: str | None = None) -> JSON:
        """`idempotency_key`: an append (`log://`, `episodic://`) sent again with it lands once."""
        params = {"uri": uri, "value": value}  # a null value is a value: sent as it is
        return await self._call("write", {**params, **_present(idempotency_key=idempotency_key)})

    async def delete(self, uri: str) -> JSON:
        return await self._call("delete", {"uri": uri})

    async def list(self, prefix: str) -> Items:
        return (await self._call("list", {"prefix": prefix}))["items"]

    async def event(self, trigger: str, payload: JSON | None = None, *, scope_variables: JSON | None = None,
                    additional_variables: JSON | None = None, idempotency_key: str | None = None,
                    on_event: Listener | None = None) -> JSON:
        """An application event (`onTaskCompleted`, …); `on_event` gets the ingestion notifications of the runs.
        `idempotency_key`: send it again with the same key after a lost answer, and each pipeline runs once."""
        params = _present(trigger=trigger, payload=payload, scope_variables=scope_variables,
                          additional_variables=additional_variables, idempotency_key=idempotency_key)
        with self._client._routed(INGESTION_EVENTS, None, None, on_event):
            return await self._call("event", params)


def _present(**values: Any) -> JSON:
    return {k: v for k, v in values.items() if v is not None}


class _Route:
    """While a call is in flight, hand the notifications that belong to it to its `on_event`."""

    def __init__(self, client: ContextAssemblyClient, prefix: str, key: str | None, value: Any,
                 listener: Listener | None) -> None:
        self.client, self.prefix, self.key, self.value, self.listener = client, prefix, key, value, listener

    def matches(self, method: str, params: Any) -> bool:
        return method.startswith(self.prefix) and (
            self.key is None or (isinstance(params, dict) and params.get(self.key) == self.value))

    def __enter__(self) -> _Route:
        if self.listener is not None:
            self.client._routes.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in self.client._routes:
            self.client._routes.remove(self)


class ContextAssemblyClient:
    def __init__(self, workspace: Path | str, *, command: Sequence[str] | None = None,
                 llm: LlmCallback | None = None, settings: JSON | None = None, env: dict[str, str] | None = None,
                 stderr: Any = None, timeout: float = 10.0, freeze_imports: bool = True) -> None:
        """`workspace`: the root holding `.codebolt/`. `command`: how to start the sidecar (default
        `python -m context_assembly serve` with this interpreter). `settings`: overrides of
        `.codebolt/context-assembly.json`. `stderr`: where the sidecar's log goes (default: inherited;
        `subprocess.PIPE`: read on, its tail in `stderr_tail`, its last line in a ConnectionLost).
        `timeout`: for start-up and shutdown. `freeze_imports`: once the sidecar answered, move the
        objects alive in this process out of the cyclic collector's way, once per process (see
        `connection.freeze_once`; False leaves the collector as it is)."""
        self.workspace = Path(workspace).resolve()
        self.command = list(command or default_command())
        self.llm = llm
        self.settings = dict(settings or {})
        self.env = env
        self.stderr = stderr
        self.timeout = timeout
        self.freeze_imports = freeze_imports
        self.initialized: bool | None = None  # None: not started; False: initialize went unanswered
        self.connection = Connection()
        self.server_info: JSON = {}
        self._routes: list[_Route] = []
        self.connection.on("*", self._route)
        self.rule_engines = RuleEngines(self)
        self.persistent_memory = PersistentMemory(self)
        self.ingestion = Ingestion(self)
        self.memory = Memory(self)
        self.trace_layouts = TraceLayouts()  # the compact trace's layouts seen (see `expand_trace`)

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> JSON:
        """Spawn the sidecar and initialise it on the workspace; the `initialize` result."""
        env = None if self.env is None else {**os.environ, **self.env}
        await self.connection.spawn(self.command, cwd=self.workspace, env=env, stderr=self.stderr)
        if self.llm is not None:
            self.connection.handle("llm/complete", _llm_answer(self.llm))
        initialize = self.request("initialize", {
            "processId": os.getpid(),
            "clientInfo": {"name": "context-assembly-python-client"},
            "rootUri": self.workspace.as_uri(),
            "workspaceFolders": [{"uri": self.workspace.as_uri(), "name": self.workspace.name}],
            "capabilities": {"experimental": {"contextAssembly": {"llm": self.llm is not None}}},
            "initializationOptions": {"llm": self.llm is not None, "settings": self.settings},
        })
        try:
            result = await asyncio.wait_for(initialize, self.timeout)
        except TimeoutError:
            self.initialized = False
            raise TimeoutError_(f"the sidecar did not answer initialize within {self.timeout:g} s") from None
        self.initialized = True
        self.server_info = result.get("serverInfo") or {} if isinstance(result, dict) else {}
        self.connection.notify("initialized", {})
        if self.freeze_imports:
            freeze_once()
        return result

    async def close(self) -> int | None:
        """`shutdown` + `exit`; the process is reaped (killed if it does not exit in time). Its exit status.
        A sidecar that never answered `initialize` is not asked to shut down: it is stopped at once."""
        return await self.connection.close(self.timeout if self.initialized else 0.0)

    async def __aenter__(self) -> ContextAssemblyClient:
        try:
            await self.start()
        except BaseException:
            try:
                await self.close()
            except Exception:  # noqa: BLE001 - never in place of why the start failed
                logger.debug("closing after a failed start failed", exc_info=True)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    @property
    def pid(self) -> int | None:
        return self.connection.process.pid if self.connection.process else None

    @property
    def stderr_tail(self) -> str:
        """The tail of the sidecar's stderr (64 KiB) when started with `stderr=subprocess.PIPE`, else ""."""
        return self.connection.stderr

    @property
    def returncode(self) -> int | None:
        return self.connection.process.returncode if self.connection.process else None

    # -- events -----------------------------------------------------------------------------------

    def on(self, method: str, listener: Listener) -> Callable[[], None]:
        """`listener(method, params)` for every notification `method` (e.g. "contextAssembly/complete"; "*" = all).
        Listeners run on the client's event loop; an async listener is scheduled. Returns an unsubscribe."""
        return self.connection.on(method, listener)

    def set_settings(self, settings: JSON) -> None:
        """Replace the settings pushed after start-up (workspace/didChangeConfiguration). They lie
        over those given at start (`settings`, sent in `initialize`), which stay: the server layers
        the file, then the start-up settings, then the pushed ones, so `{}` drops only what was
        pushed before; to change a start-up setting, push the new value."""
        self.settings = dict(settings)
        self.connection.notify("workspace/didChangeConfiguration", {"settings": {"contextAssembly": self.settings}})

    def _route(self, method: str, params: Any) -> None:
        for route in list(self._routes):
            if route.matches(method, params) and route.listener is not None:
                result = route.listener(method, params)
                if inspect.isawaitable(result):  # an async on_event, scheduled as `on` does
                    self.connection.schedule(result)

    def _routed(self, prefix: str, key: str | None, value: Any, listener: Listener | None) -> _Route:
        return _Route(self, prefix, key, value, listener)

    # -- calls ------------------------------------------------------------------------------------

    async def request(self, method: str, params: Any = None) -> Any:
        """Any method by name, plain JSON in and out."""
        return await self.connection.request(method, params)

    async def assemble(self, request: JSON, *, on_event: Listener | None = None) -> JSON:
        """`contextAssembly/assemble`. `on_event(method, params)` gets this assembly's notifications
        (started, rulesEvaluated, pipelineComplete…, complete or error), all before this returns."""
        params = dict(request)
        if params.get("assembly_id") is None:  # absent or null: the events are routed by the id given here
            params["assembly_id"] = uuid.uuid4().hex
        with self._routed(ASSEMBLY_EVENTS, "assembly_id", params["assembly_id"], on_event):
            return await self.request("contextAssembly/assemble", params)

    async def validate(self, request: JSON) -> JSON:
        return await self.request("contextAssembly/validate", request)

    async def memory_types(self) -> Items:
        return (await self.request("contextAssembly/memoryTypes", {}))["items"]

    async def evaluate_rules(self, request: JSON, *, compact_trace: bool = False) -> JSON:
        """`contextAssembly/evaluateRules`. `compact_trace`: ask for `"trace_format": "compact"` and
        expand the answer here (the layouts fetched once per engine version): the same answer as
        without, much less to encode, send and decode."""
        if compact_trace:
            return await self._expanded("contextAssembly/evaluateRules", request)
        return await self.request("contextAssembly/evaluateRules", request)

    async def expand_trace(self, answer: JSON) -> JSON:
        """A compact answer (`"trace_format": "compact"`) as the full one, fetching the layouts it
        needs that are not cached yet; any other answer as it is. ConflictError when an engine
        changed since the answer was made."""
        missing = self.trace_layouts.missing(answer)
        documents = await asyncio.gather(*(self.rule_engines.trace_layout(engine_id, key)
                                           for engine_id, key in missing))
        for document in documents:
            self.trace_layouts.add(document)
        return self.trace_layouts.expand(answer)

    async def _expanded(self, method: str, request: JSON) -> JSON:
        """`method` with the compact trace, expanded; asked again once when an engine changed in between."""
        params = {**request, "trace_format": "compact"}
        try:
            return await self.expand_trace(await self.request(method, params))
        except ConflictError:
            return await self.expand_trace(await self.request(method, params))

    async def required_variables(self, memory_ids: Sequence[str]) -> JSON:
        return await self.request("contextAssembly/requiredVariables", {"memory_ids": list(memory_ids)})

    async def end_turn(self, thread_id: str) -> JSON:
        """`contextAssembly/endTurn`: the turn is complete; the thread's working memory is cleared."""
        return await self.request("contextAssembly/endTurn", {"thread_id": thread_id})
