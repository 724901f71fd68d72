"""One workspace as the sidecar serves it: the runtime, the repositories, the ingestion engine and
the settings the client overrides.

The settings file (`.codebolt/context-assembly.json`) is read by the workspace loader; the client's
`workspace/configuration` section `contextAssembly` is applied on top of it here, key by key
(`Settings.merged`), so every method — and the assembler, whose workspace callable is this
session's — sees the merged settings without the loader knowing about clients.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from ..collector import collect_frozen
from ..errors import ContextAssemblyError
from ..limits import Limits
from ..model.problems import Problem
from ..runtime import Runtime
from ..schemas import validation_errors
from ..workspace.atomic import sweep_temp_files
from ..workspace.loader import Workspace
from ..workspace.places import CODEBOLT, Places
from ..workspace.repository import (
    RuleEngineRepository,
    definition_repository,
    rule_engine_repository,
)
from ..workspace.settings import Settings, usable
from ..workspace.uris import uri_to_path
from .access import UNRESTRICTED, Access, GuardedMemory
from .call import Llm

logger = logging.getLogger(__name__)

TextSource = Callable[[str], "str | None"]  # document URI -> its text, when the editor has it open


def _rule_engine_problems(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return validation_errors("rule-engine", doc)


def _memory_problems(doc: dict[str, Any]) -> list[dict[str, Any]]:
    from ..pipelines.validate import validate_definition  # late: it parses documents (numpy), rules need none of it

    return [{"path": e["path"], "message": e["message"]} for e in validate_definition(doc)["errors"]]


def _ingestion_problems(doc: dict[str, Any]) -> list[dict[str, Any]]:
    from ..ingestion import validate_pipeline  # late: the ingestion layer is optional for every other method

    return [{"path": e["path"], "message": e["message"]} for e in validate_pipeline(doc)["errors"]]


def settings_problems(overrides: Any) -> tuple[dict[str, Any], list[Problem]]:
    """The usable part of client settings, and a problem per key the settings schema refuses."""
    if not isinstance(overrides, dict):
        return {}, ([] if overrides is None else [Problem("settings must be an object", "settings")])
    errors = validation_errors("settings", overrides)
    return usable(overrides, errors), [Problem(e["message"], "settings", path=e["path"]) for e in errors]


class Session:
    """Everything the methods need for one workspace. Thread-safe: handlers run on worker threads."""

    def __init__(self, root: Path | str | Places, *, settings: dict[str, Any] | None = None, llm: Llm | None = None,
                 text_source: TextSource | None = None, runtimes: SharedRuntimes | None = None) -> None:
        self._runtimes = runtimes  # several sessions (connections) share one runtime and its caches
        # the root as the client names it (the URIs it is answered with), resolved once: the folder served
        self.places = Places.of(root)
        real = self.places.root
        self.runtime = runtimes.acquire(real) if runtimes is not None else Runtime(real, background_compile=True)
        self.layout = self.runtime.layout
        removed = sweep_temp_files(self.layout.codebolt)  # what writes interrupted by a crash left behind
        if removed:
            logger.info("removed %d temporary files of interrupted writes", len(removed))
        self.llm = llm
        self.text_source = text_source
        # what this session's client may do (the sidecar sets it from the token presented); every
        # method touches memory through `memory` and assembles through `assemble`, both of which apply it
        self._access: Access = UNRESTRICTED
        self.memory = GuardedMemory(lambda: self.runtime.memory, lambda: self.access)
        # the workspace with the editor's unsaved documents laid over the disk, once an editor is attached
        self.editor_view: Callable[[], Workspace] | None = None
        self.position_encoding = "utf-16"  # LSP positions in validate results; the LSP layer negotiates it
        self._overrides: dict[str, Any] = {}
        self._merged: tuple[Workspace, dict[str, Any], Workspace] | None = None
        self.settings_generation = 0  # counts set_settings calls: what caches of workspace() key on
        self._lock = threading.Lock()
        self._ingestion: Any = None
        self.rule_engines: RuleEngineRepository = rule_engine_repository(self.layout, validate=_rule_engine_problems)
        self.persistent_memory = definition_repository(self.layout, "persistent-memory", validate=_memory_problems)
        self.ingestion_pipelines = definition_repository(self.layout, "ingestion-pipeline",
                                                         validate=_ingestion_problems)
        for repository in (self.rule_engines, self.persistent_memory, self.ingestion_pipelines):
            repository.limits = self.limits
        if runtimes is None:  # alone on its runtime: plain runtime.assemble sees the merged settings too
            self.runtime.assemble_with(self.workspace)
        if settings:
            self.set_settings(settings)

    @property
    def root(self) -> Path:
        return self.runtime.root

    # -- settings ---------------------------------------------------------------------------------

    def set_settings(self, overrides: Any) -> list[Problem]:
        """Replace the client's overrides; keys the settings schema refuses are dropped and reported."""
        good, problems = settings_problems(overrides)
        if "access" in good:  # a client must not grant itself rights
            del good["access"]
            problems.append(Problem("access can only be set in .codebolt/context-assembly.json", "settings",
                                    path="/access"))
        if "snapshots" in good and self._runtimes is not None:  # shared: files every client's token reads
            del good["snapshots"]
            problems.append(Problem("on a shared server snapshots can only be set in .codebolt/context-assembly.json",
                                    "settings", path="/snapshots"))
        try:
            Settings().merged(good)
        except (TypeError, ValueError) as exc:
            good, problems = {}, [*problems, Problem(f"settings ignored: {exc}", "settings")]
        with self._lock:
            self._overrides = good
            self.settings_generation += 1
        return problems

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(self._overrides)

    def workspace(self) -> Workspace:
        """The workspace as on disk now, with the client's settings applied."""
        workspace = self.runtime.workspace()
        overrides = self._overrides
        if not overrides:
            return workspace
        merged = self._merged
        if merged is not None and merged[0] is workspace and merged[1] is overrides:
            return merged[2]  # the same object while nothing changed: editor caches key on it
        settings = workspace.settings.merged(overrides)
        if self._runtimes is not None:  # a shared server: its file's limits bound every client's
            settings = attrs.evolve(settings, limits=settings.limits.at_most(workspace.settings.limits))
        self.runtime.cache.ttl_s = settings.cache_ttl_s
        result = attrs.evolve(workspace, settings=settings)
        self._merged = (workspace, overrides, result)
        return result

    def settings(self) -> Settings:
        return self.workspace().settings

    def limits(self) -> Limits:
        return self.settings().limits

    def current_limits(self) -> Limits:
        """The limits without looking at the disk (the transport asks per message)."""
        last = self.runtime.last_workspace()
        base = last.settings.limits if last is not None else Limits()
        merged = base.merged(self._overrides.get("limits"))
        return merged.at_most(base) if self._runtimes is not None else merged

    def reload(self) -> Workspace:
        """Re-read what changed under `.codebolt/` now (the loader re-reads changed files only)."""
        return self.workspace()

    # -- ingestion --------------------------------------------------------------------------------

    def ingestion(self) -> Any:
        """The ingestion engine, built on first use (LLM steps ask the client when it offered to run models)."""
        with self._lock:
            if self._ingestion is None:
                from ..ingestion import IngestionEngine

                self._ingestion = IngestionEngine(self.memory, self.workspace,
                                                  repository=self.ingestion_pipelines, llm=self.llm,
                                                  key_owner=lambda: self.access.name)
            return self._ingestion

    # -- assembly -----------------------------------------------------------------------------------

    def assemble(self, request: Any, **options: Any) -> Any:
        """An assembly as this session's client may see it: items its token may not read are left
        out, and its settings apply (replay, diff and rule tests budget as `assemble` does, over TCP
        too, where many sessions share the runtime)."""
        options.setdefault("workspace", self.workspace)
        return self.runtime.assemble(request, readable=self.access.readable(), **options)

    def lookup(self, request: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """A request's variable lookup as this session's caller may see it (a thread its token may
        not read has no turn count): what every method and editor feature evaluates rules against."""
        return self.runtime.lookup(request, self.access.readable())

    @property
    def access(self) -> Access:
        return self._access

    @access.setter
    def access(self, access: Access) -> None:
        # a restricted token's file:// patterns are checked where links lead too (real_file)
        self._access = access if not access.restricted else attrs.evolve(access, real_file=self._real_file)

    def _real_file(self, path: str) -> str | None:
        """Where the workspace path `path` really is, relative to the root (None: outside it)."""
        root = self.places.root
        try:
            real = self.places.readable(root / path)
        except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13): the store refuses it
            return None
        if real is None:
            return None
        return real.relative_to(root).as_posix() if real.is_relative_to(root) else \
            (CODEBOLT + "/" + real.relative_to(self.places.codebolt).as_posix())

    def document_text(self, uri: str) -> str | None:
        """The text of a definition document: as the editor has it open, else as on disk (inside the workspace)."""
        if self.text_source is not None:
            text = self.text_source(uri)
            if text is not None:
                return text
        path = uri_to_path(uri)
        if path is None:
            return None
        path = self.places.readable(path)
        if path is None or not path.is_file():
            return None  # never read outside the workspace
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def close(self) -> None:
        if self._runtimes is not None:
            self._runtimes.release(self.runtime)
        else:
            self.runtime.close()


LINGER_S = 10.0  # how long a network server keeps a workspace's runtime once its last connection closed


class SharedRuntimes:
    """One Runtime per workspace root for every session of a process (the TCP and WebSocket
    connections): stores, compiled engines and the result cache are shared. When its last session
    closes, the runtime stays `linger_s` for the next one (a client that reconnects for each task
    found nothing built: a runtime made and closed per connection), then closes and gives its memory
    back (`collect_frozen`); `close` closes what lingers at once."""

    def __init__(self, linger_s: float = 0.0) -> None:
        self.linger_s = linger_s
        self._lock = threading.Lock()
        self._runtimes: dict[Path, tuple[Runtime, int]] = {}  # root -> (runtime, sessions holding it)
        self._timers: dict[Path, threading.Timer] = {}  # roots lingering -> their close
        self._expiring: set[threading.Thread] = set()  # timers closing their runtime now
        self._closed = False

    def acquire(self, root: Path | str) -> Runtime:
        key = Path(root).resolve()
        with self._lock:
            if self._closed:  # (a late refusal log, a request as the process stops)
                raise ContextAssemblyError("the server is stopping: no workspace is opened now")
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer.cancel()  # (one already firing finds the runtime held, and leaves it)
            runtime, count = self._runtimes.get(key) or (Runtime(key, background_compile=True), 0)
            self._runtimes[key] = (runtime, count + 1)
            return runtime

    def release(self, runtime: Runtime) -> None:
        with self._lock:
            key = runtime.root
            held = self._runtimes.get(key)
            if held is None or held[0] is not runtime:
                return
            if held[1] > 1 or (self.linger_s > 0 and not self._closed):
                self._runtimes[key] = (runtime, held[1] - 1)
                if held[1] == 1:
                    timer = self._timers[key] = threading.Timer(self.linger_s, self._expire, (key, runtime))
                    timer.daemon = True
                    timer.start()
                return
            del self._runtimes[key]
        _close(runtime)

    def _expire(self, key: Path, runtime: Runtime) -> None:
        me = threading.current_thread()
        with self._lock:
            held = self._runtimes.get(key)
            if self._timers.get(key) is not me or held is None or held[0] is not runtime or held[1] > 0:
                return  # taken again meanwhile (and maybe released again: a later timer's turn)
            del self._runtimes[key]
            del self._timers[key]
            self._expiring.add(me)
        try:
            _close(runtime)
        finally:
            with self._lock:
                self._expiring.discard(me)

    def close(self) -> None:
        """The process stops: every lingering runtime closes now, and any released later at once."""
        with self._lock:
            self._closed = True
            lingering = [runtime for runtime, count in self._runtimes.values() if count == 0]
            for key in [key for key, (_, count) in self._runtimes.items() if count == 0]:
                del self._runtimes[key]
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
            expiring = list(self._expiring)
        for runtime in lingering:
            _close(runtime)
        for thread in expiring:  # a runtime closing on its timer: done before the process goes on to exit
            thread.join(LINGER_S)

    def __len__(self) -> int:
        """Runtimes open, lingering ones included."""
        with self._lock:
            return len(self._runtimes)


def _close(runtime: Runtime) -> None:
    runtime.close()
    collect_frozen()  # its graph, frozen with the compiled engines, is otherwise kept for good

