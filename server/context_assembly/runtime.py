"""One workspace, wired: the loader, the stores, the pipeline executor and the assembler.

The CLI and the sidecar both build a `Runtime`; neither wires stores by hand. The settings are read
first, then the stores' factory builds the backend they name (embedded unless `stores.backend`
says otherwise); everything opens lazily: opening a workspace starts nothing, connects to nothing
and downloads nothing. The stores, the executor and the assembler (and the libraries they import:
numpy, the store backends) are built on first use: evaluating rules needs none of them unless the
request's thread asks for its turn count (`tests/lsp/test_first_evaluation.py`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .assembly.cache import ResultCache
from .model.evaluation import EvaluationResult
from .model.request import AssemblyRequest
from .rules.evaluate import RuleSet
from .rules.lookup import request_lookup
from .stores.presence import nothing_stored
from .workspace.loader import Workspace, WorkspaceLoader, load_warnings
from .workspace.settings import Settings, load_settings, store_problems

if TYPE_CHECKING:
    from .assembly.engine import Assembler
    from .assembly.execute import Executor
    from .model.context import AssembledContext
    from .pipelines.items import Readable
    from .stores.bundle import StoreBundleView
    from .stores.memory import MemoryRouter

logger = logging.getLogger(__name__)


def searched_collections(workspace: Workspace) -> dict[str, bool]:
    """The collections the enabled memories' `vector_search` steps name literally (a `${...}` name
    is known only per request), conditional branches included, each with whether one of them
    searches it hybrid."""
    found: dict[str, bool] = {}
    for memory in workspace.memories.values():
        if memory.status == "disabled":
            continue
        for step in _all_steps(memory.steps):
            collection = step.get("collection")
            if step.get("type") == "vector_search" and isinstance(collection, str) and "${" not in collection:
                found[collection] = found.get(collection, False) or step.get("mode") == "hybrid"
    return found


def _all_steps(steps: Any) -> Iterator[dict[str, Any]]:
    """Every step of a pipeline, the steps of its conditionals' branches after their own."""
    from .pipelines.validate import NESTED  # (the warm-up's only: the validator imports much)

    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict):
            yield step
            for branch in NESTED:
                yield from _all_steps(step.get(branch))


class Runtime:
    def __init__(self, root: Path | str, background_compile: bool = False) -> None:
        """`background_compile`: a long-lived runtime (the sidecar's) compiles a cold start's rule
        matchers off the request path (workspace/loader.py); a one-shot command compiles first."""
        self.loader = WorkspaceLoader(root, background=background_compile)
        self.layout = self.loader.layout
        self._lock = threading.Lock()
        self._workspace: Workspace | None = None
        self._failed: tuple[Workspace, list[str]] | None = None  # load_warnings of every engine, per version
        # The backend is chosen once, from the settings file, before any store is built.
        settings, problems = load_settings(self.layout.settings_path)
        self._store_settings: tuple[Settings, list[str]] = (settings, store_problems(problems))
        if self._store_settings[1]:  # said once at start; every store call says it again
            from .stores.factory import refused_message

            logger.error("%s", refused_message(self._store_settings[1]))
        self.cache = ResultCache()
        self._assembly_workspace: Callable[[], Workspace] = self.workspace
        self._wiring = threading.Lock()
        self._wired: tuple[MemoryRouter, StoreBundleView, Executor, Assembler] | None = None

    def _wire(self) -> tuple[MemoryRouter, StoreBundleView, Executor, Assembler]:
        """The stores, the executor and the assembler: built on first use (any thread)."""
        wired = self._wired
        if wired is not None:
            return wired
        with self._wiring:
            if self._wired is None:
                from .assembly.engine import Assembler
                from .assembly.execute import Executor
                from .stores.bundle import StoreBundleView
                from .stores.factory import open_stores
                from .stores.memory import MemoryRouter

                settings, refused = self._store_settings
                memory = MemoryRouter(self.layout, stores=open_stores(self.layout, settings.stores, refused))
                stores = StoreBundleView(memory)
                executor = Executor(memory, stores, self.cache)
                self._wired = (memory, stores, executor, Assembler(self._assembly_workspace, memory, stores, executor))
            return self._wired

    @property
    def memory(self) -> MemoryRouter:
        return self._wire()[0]

    @property
    def file_settings(self) -> Settings:
        """The settings file as read at start (what a command line applies: no client layers them)."""
        return self._store_settings[0]

    @property
    def stores(self) -> StoreBundleView:
        return self._wire()[1]

    @property
    def executor(self) -> Executor:
        return self._wire()[2]

    @property
    def assembler(self) -> Assembler:
        return self._wire()[3]

    def assemble_with(self, workspace: Callable[[], Workspace]) -> None:
        """The workspace the assembler reads (a session's, its client settings applied)."""
        self._assembly_workspace = workspace
        if self._wired is not None:
            self._wired[3].workspace = workspace

    @property
    def root(self) -> Path:
        return self.loader.root

    @property
    def vectors(self) -> Any:
        return self.memory.vectors

    @property
    def graph(self) -> Any:
        return self.memory.graph

    def workspace(self) -> Workspace:
        """The workspace as on disk now (files re-read only when they changed)."""
        with self._lock:
            self._workspace = self.loader.load()
            self.cache.ttl_s = self._workspace.settings.cache_ttl_s
            return self._workspace

    def settled(self) -> bool:
        """Whether a rule evaluation now only computes: the workspace is as last loaded (no file to
        read, no engine to compile, no other thread loading it) and a turn count opens nothing and
        is no network round trip (the embedded stores, already open or with no database yet). The
        event loop answers `"explain": "none"` and compact evaluations itself then (lsp/protocol.py)."""
        settings, refused = self._store_settings
        if refused or settings.stores.backend != "embedded" \
                or (self._wired is None and not nothing_stored(self.layout, settings.stores)):
            return False
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self.loader.settled()
        finally:
            self._lock.release()

    def prepare_searches(self, workspace: Workspace) -> list[str]:
        """Load what the workspace's vector searches read (each collection's embedding model and,
        on the embedded stores, its vectors and for a hybrid search its keyword postings), so that a
        first assembly does not wait for them (~0.5 s at 100k chunks): the sidecar's warm-up after
        `initialize`. The embedded stores only once their database exists (nothing is created); a
        collection that cannot be prepared is logged and left to the first search. The collections
        prepared."""
        settings, refused = self._store_settings
        wanted = searched_collections(workspace)
        if not wanted or refused or nothing_stored(self.layout, settings.stores):
            return []
        done = []
        for collection, keyword in wanted.items():
            try:
                vectors = self.memory.vectors
                if vectors is not None and vectors.prepare(collection, keyword):
                    done.append(collection)
            except Exception as exc:  # (the first search meets it again, and says so in its answer)
                logger.warning("could not prepare the searches of collection %r: %s", collection, exc)
        return done

    def compacted(self, kind: str) -> bool:
        """Whether the workspace as last loaded made a compact answer of this kind ("none"; "trace":
        all / matched) over every enabled engine: the next one only computes (RuleSet.compacted)."""
        workspace = self._workspace
        return workspace is not None and kind in workspace.rule_set.compacted

    def lookup(self, request: AssemblyRequest,
               readable: Readable | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The variable lookup (and the derived values in it) every method and command evaluates
        rules against: the assembly's own, so `evaluateRules` explains what `assemble` decides.
        `readable`: a restricted caller's read patterns (a thread outside them has no turn count)."""
        count: Callable[[str], int] = self._count_turns
        if readable is not None:  # late: a plain evaluation never imports the assembly stack
            from .assembly.engine import readable_turns

            count = readable_turns(count, readable)
        return request_lookup(request, count)  # as the assembler's

    def _count_turns(self, thread: str) -> int:
        settings, refused = self._store_settings
        if self._wired is None and not refused and nothing_stored(self.layout, settings.stores):
            return 0  # no database yet: no turns, and a rules-only request does not create it
        return self.memory.episodic.count(thread)

    def evaluate(self, request: AssemblyRequest, workspace: Workspace | None = None,
                 engine_id: str | None = None, explain: str | None = None, trace_format: str = "full",
                 encoded: bool = False, readable: Readable | None = None) -> Any:
        """Rule evaluation as `evaluate`, `evaluateRules` and `contextRuleEngine/evaluate` answer it:
        over the assembly's lookup (derived values included), with a warning per rule file that
        failed to load. `engine_id`: that engine alone (enabled or not; the caller checked it
        exists). `explain` (all, matched, none): the JSON form with the compiled trace, as the
        methods answer; None: the full EvaluationResult, as the CLI renders it. `trace_format`
        "compact": the trace packed (rules/compact.py). `encoded`: the caller only writes the answer
        as JSON (`RuleSet.evaluate_wire`)."""
        workspace = workspace or self.workspace()
        lookup, derived = self.lookup(request, readable)
        rule_set = workspace.rule_set
        if engine_id is not None:
            rule_set = RuleSet([e for e in rule_set.engines if e.id == engine_id])
            request = attrs.evolve(request, rule_engine_ids=[engine_id])
        failed = self._load_warnings(workspace, request.rule_engine_ids)
        if explain is None:
            result: EvaluationResult = rule_set.evaluate(request, lookup, derived=derived)
            result.warnings += failed
            return result
        traces = self.loader.traces
        wire = rule_set.evaluate_wire(request, lookup, explain, derived, trace_format,
                                      later=traces.later if traces is not None else None, encoded=encoded)
        wire["warnings"] = [*wire.get("warnings", []), *failed]
        return wire

    def _load_warnings(self, workspace: Workspace, engine_ids: list[str] | None) -> list[str]:
        """`load_warnings`, kept per workspace version for the common request (every enabled engine):
        it walks every definition file."""
        if engine_ids is not None:
            return load_warnings(workspace, engine_ids)
        known = self._failed
        if known is None or known[0] is not workspace:
            known = self._failed = (workspace, load_warnings(workspace, None))
        return list(known[1])

    def last_workspace(self) -> Workspace | None:
        """The workspace as last loaded, without looking at the disk (None before the first load)."""
        return self._workspace

    def assemble(self, request: Any, **options: Any) -> AssembledContext:
        return self.assembler.assemble(request, **options)

    def close(self) -> None:
        with self._wiring:
            wired, self._wired = self._wired, None
        if wired is not None:
            memory, _stores, executor, assembler = wired
            executor.close()
            assembler.summaries.close()
            memory.close()
        self.loader.close()
