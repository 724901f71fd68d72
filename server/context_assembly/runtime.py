"""One workspace, wired: the loader, the stores, the pipeline executor and the assembler.

The CLI and the sidecar both build a `Runtime`; neither wires stores by hand. The settings are read
first, then the stores' factory builds the backend they name (embedded unless `stores.backend`
says otherwise); everything opens lazily: opening a workspace starts nothing, connects to nothing
and downloads nothing.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import attrs

from .assembly.cache import ResultCache
from .assembly.engine import Assembler
from .assembly.execute import Executor
from .model.context import AssembledContext
from .model.evaluation import EvaluationResult
from .model.request import AssemblyRequest
from .rules.evaluate import RuleSet
from .stores.bundle import StoreBundleView
from .stores.factory import open_stores, refused_message
from .stores.memory import MemoryRouter
from .workspace.loader import Workspace, WorkspaceLoader, load_warnings
from .workspace.settings import load_settings, store_problems

logger = logging.getLogger(__name__)


class Runtime:
    def __init__(self, root: Path | str) -> None:
        self.loader = WorkspaceLoader(root)
        self.layout = self.loader.layout
        self._lock = threading.Lock()
        self._workspace: Workspace | None = None
        self._failed: tuple[Workspace, list[str]] | None = None  # load_warnings of every engine, per version
        # The backend is chosen once, from the settings file, before any store is built.
        settings, problems = load_settings(self.layout.settings_path)
        refused = store_problems(problems)
        if refused:  # said once at start; every store call says it again
            logger.error("%s", refused_message(refused))
        self.memory = MemoryRouter(self.layout, stores=open_stores(self.layout, settings.stores, refused))
        self.stores = StoreBundleView(self.memory)
        self.cache = ResultCache()
        self.executor = Executor(self.memory, self.stores, self.cache)
        self.assembler = Assembler(self.workspace, self.memory, self.stores, self.executor)

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

    def lookup(self, request: AssemblyRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        """The variable lookup (and the derived values in it) every method and command evaluates
        rules against: the assembly's own, so `evaluateRules` explains what `assemble` decides."""
        return self.assembler.lookup(request)

    def evaluate(self, request: AssemblyRequest, workspace: Workspace | None = None,
                 engine_id: str | None = None, explain: str | None = None, trace_format: str = "full") -> Any:
        """Rule evaluation as `evaluate`, `evaluateRules` and `contextRuleEngine/evaluate` answer it:
        over the assembly's lookup (derived values included), with a warning per rule file that
        failed to load. `engine_id`: that engine alone (enabled or not; the caller checked it
        exists). `explain` (all, matched, none): the JSON form with the compiled trace, as the
        methods answer; None: the full EvaluationResult, as the CLI renders it. `trace_format`
        "compact": the trace packed (rules/compact.py)."""
        workspace = workspace or self.workspace()
        lookup, derived = self.lookup(request)
        rule_set = workspace.rule_set
        if engine_id is not None:
            rule_set = RuleSet([e for e in rule_set.engines if e.id == engine_id])
            request = attrs.evolve(request, rule_engine_ids=[engine_id])
        failed = self._load_warnings(workspace, request.rule_engine_ids)
        if explain is None:
            result: EvaluationResult = rule_set.evaluate(request, lookup, derived=derived)
            result.warnings += failed
            return result
        wire = rule_set.evaluate_wire(request, lookup, explain, derived, trace_format)
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
        self.executor.close()
        self.assembler.summaries.close()
        self.memory.close()
        self.loader.close()
