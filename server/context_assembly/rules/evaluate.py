"""Evaluating a workspace's rule engines against a request (SPEC §4.3).

With `explain=False` the per-rule results of matched rules are shared, read-only objects built
once per compiled rule (allocating ~2,000 of them per request on a large workspace kept the
garbage collector busy for 40% of the time); `explain=True` builds fresh ones. When every rule
only adds memories (no excludes or actions), settling is deduplicating the memories in order.

Engines run in id order, the normalised `context-rules` engine last. Every matching rule adds its
memories; where rules disagree about one reference, the first matching rule in that order
decides. `explicit_memory` is never excluded. `explain="matched"` explains matched rules only;
`explain=False` (or "none") skips the per-condition trace (the assembly hot path); the matched
rules, memories and actions are the same either way. `evaluate_wire` answers the same in JSON
form with the trace compiled (trace.py): what the methods return.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from attrs import define, field

from ..collector import paused
from ..model.converter import unstructure
from ..model.evaluation import EngineResult, EvaluationResult
from ..model.request import AssemblyRequest
from ..registry.variables import MEMORY_SOURCE
from .cache import CompileCache
from .dialects import CONTEXT_RULES_ID
from .engine import CompiledEngine, CompiledRule, rule_result
from .explicit import explicit_references
from .fused import Fused, fuse
from .globs import is_pattern, reference_matches
from .lookup import Lookup, build_lookup, complete
from .plain_trace import engine_results
from .settle import Settlement
from .trace import TraceProgram, matched_engines, program

__all__ = ["RuleSet", "Settlement", "engine_order", "is_pattern", "reference_matches"]


def engine_order(engines: Iterable[CompiledEngine]) -> list[CompiledEngine]:
    """Id order, with the normalised context-rules engine last."""
    return sorted(engines, key=lambda e: (e.id == CONTEXT_RULES_ID, e.id))


@define
class _Selection:
    """The engines one request runs, and what follows from the set alone (cached for the default)."""

    engines: list[CompiledEngine]
    warnings: list[str]
    variables: list[str] = field(init=False)  # sorted lookup keys the engines read
    plain: bool = field(init=False)  # rules only add memories: resolving is deduplicating
    _absent: Lookup = field(init=False)
    # the engines' matchers fused (fused.py), set once made in the background; None: each its own
    fused: Fused | None = field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        # A rule that can never match (a bad pattern, an unknown operator) is said once per request,
        # so an assembly tells its caller instead of quietly leaving the rule out.
        self.warnings = [*self.warnings, *(f"rule '{engine.id}/{rule.rule_id}' can never match: {rule.error}"
                                           for engine in self.engines for rule in engine.rules if rule.broken)]
        self.variables = sorted({key for engine in self.engines for key in engine.keys})
        self.plain = all(engine.plain for engine in self.engines)
        self._absent = complete({}, self.variables)

    def values(self, lookup: Lookup) -> Lookup:
        """The lookup as the matchers take it: every variable present, absent ones as MISSING."""
        return {**self._absent, **lookup}


@define
class RuleSet:
    """Every compiled engine of a workspace, ready to evaluate requests."""

    engines: list[CompiledEngine]
    _default: _Selection | None = field(default=None, init=False)  # of the enabled engines, built once
    # kinds of compact answer ("none", "trace": all / matched) made over every enabled engine: each
    # has its trace program and layout (and bits), so the next one only computes (lsp/protocol.py)
    compacted: set[str] = field(factory=set, init=False)

    def __attrs_post_init__(self) -> None:
        self.engines = engine_order(self.engines)

    def select(self, engine_ids: list[str] | None) -> tuple[list[CompiledEngine], list[str]]:
        """The engines to run (enabled ones, or exactly those named) and warnings for unknown ids."""
        if engine_ids is None:
            return [e for e in self.engines if e.enabled], []
        known = {e.id for e in self.engines}
        wanted = set(engine_ids)
        warnings = [f"unknown rule engine '{i}'" for i in engine_ids if i not in known]
        return [e for e in self.engines if e.id in wanted], warnings

    def _selection(self, engine_ids: list[str] | None) -> _Selection:
        if engine_ids is not None:
            return _Selection(*self.select(engine_ids))
        if self._default is None:
            self._default = _Selection(*self.select(None))
        return self._default

    def per_source_matches(self, engine_ids: list[str] | None, lookup: Lookup,
                           source: str) -> list[CompiledRule]:
        """Per-source rules (reading memory.source) that hold for one memory reference (SPEC §4.4)."""
        bound = {**lookup, MEMORY_SOURCE: source}
        engines, _ = self.select(engine_ids)
        return [rule for engine in engines for rule in engine.rules
                if rule.per_source and not rule.broken and rule.conditions.explain(bound)[0]]

    def evaluate(
        self, request: AssemblyRequest, lookup: Lookup | None = None, explain: bool | str = True,
        derived: dict[str, Any] | None = None,
    ) -> EvaluationResult:
        return self.settle(request, lookup, explain, derived)[0]

    def settle(
        self, request: AssemblyRequest, lookup: Lookup | None = None, explain: bool | str = True,
        derived: dict[str, Any] | None = None,
    ) -> tuple[EvaluationResult, Settlement]:
        """The evaluation result and the one settlement it was written from (what the assembly reads)."""
        lookup = build_lookup(request) if lookup is None else lookup
        selection = self._selection(request.rule_engine_ids)
        return self._settle(request, lookup, selection, self._match(selection, lookup), explain, derived)

    def matches(self, lookup: Lookup, engine_ids: list[str] | None = None) -> list[tuple[CompiledEngine, list[int]]]:
        """Each engine the request runs (enabled ones, or exactly those named) with the indexes of
        its rules that hold, in rule order: what every evaluation starts from, before settling and
        any trace (`bench/rules/replay_server.py --match` times it through a pipe)."""
        return self._match(self._selection(engine_ids), lookup)

    def evaluate_wire(self, request: AssemblyRequest, lookup: Lookup | None = None,
                      explain: str = "all", derived: dict[str, Any] | None = None,
                      trace_format: str = "full",
                      later: Callable[[list[CompiledEngine], str], bool] | None = None,
                      encoded: bool = False) -> dict[str, Any]:
        """`evaluate` in its JSON form, the trace (`explain`: all, matched, none) compiled (see trace.py);
        `trace_format` "compact": the trace packed (compact.py). `later` (deferred_trace.py): takes
        engines whose trace programs, or the function of the mode, are missing to build them in
        the background (True: this answer then comes from the plain path, the same JSON). `encoded`:
        the caller only writes the answer as JSON, so parts of it may be their bytes alone
        (`encoded.EncodedJSON`: an `"explain": "none"` answer's engines)."""
        lookup = build_lookup(request) if lookup is None else lookup
        compact = trace_format == "compact"
        if compact:  # (imported here: a first "none" answer needs none of it)
            from .compact import compact_answer, from_full
        selection = self._selection(request.rule_engine_ids)
        found = self._match(selection, lookup)
        wire = _wire_result(self._settle(request, lookup, selection, found, None, derived)[0])
        if None in lookup.values():  # a null the plain path leaves out of `actual` (build_lookup drops them)
            if compact:
                return from_full({**wire, "engine_results": engine_results(found, lookup, "all")},
                                 selection.engines, lookup, explain)
            wire["engine_results"] = engine_results(found, lookup, explain)
            return wire
        if explain == "none" and not compact:
            wire["engine_results"] = matched_engines(found, encoded)
            return wire
        new = [engine for engine, _ in found if not isinstance(engine.trace, TraceProgram)]
        if not compact and later is not None:
            unready = [engine for engine, _ in found  # a program to build or read, or its mode's function
                       if not isinstance(engine.trace, TraceProgram) or not engine.trace.prepared(explain)]
            if unready and later(unready, explain):
                wire["engine_results"] = engine_results(found, lookup, explain)  # the plain path's JSON meanwhile
                return wire
        if new:  # made (or restored) at once, then frozen before the collector runs again: they live
            with paused():  # as long as their engines, and re-walking them cost a first answer ~70 ms
                for engine in new:
                    program(engine)
                gc.freeze()
        if compact:
            if new and explain != "none" and later is not None:
                later(new, "bits")  # those queued pack their plain outcomes until their functions are made
            wire = compact_answer(wire, found, lookup, explain)
            if request.rule_engine_ids is None:  # every enabled engine: "none" made the layouts, a trace the bits too
                self.compacted.add("none" if explain == "none" else "trace")
        else:  # one dict per condition per rule, none in a cycle: ~100 collections per `large` answer
            with paused():
                wire["engine_results"] = [program(engine).engine(engine, hits, lookup, explain)
                                          for engine, hits in found]
        if new:  # what the answer made on first use lives with the engines too (generated functions, a
            gc.freeze()  # compact layout and bits); no full collection: `pin_compiled` did one for this version
        return wire

    @staticmethod
    def _match(selection: _Selection, lookup: Lookup) -> list[tuple[CompiledEngine, list[int]]]:
        values = selection.values(lookup)
        fused = selection.fused
        if fused is not None:  # the same hits, each variable loaded once per group of engines
            return [pair for function, group in fused for pair in zip(group, function(values), strict=True)]
        return [(engine, engine.matcher(values)) for engine in selection.engines]  # rule indexes

    def fuse(self, store: CompileCache | None = None, previous: RuleSet | None = None) -> bool:
        """Fuse the matchers of every enabled engine (fused.py), for the requests that run them all
        (the loader's); a group of the same engines as one of `previous` (the version loaded
        before) is taken from it. False when there is nothing to gain (fewer than two engines) or an
        engine's matcher is not generated yet."""
        selection = self._selection(None)
        engines = selection.engines
        if len(engines) < 2 or not all(engine.generated for engine in engines):
            return False
        if selection.fused is None:
            before = previous._default.fused if previous is not None and previous._default is not None else None
            selection.fused = fuse(engines, store, before)
        return True

    def _settle(self, request: AssemblyRequest, lookup: Lookup, selection: _Selection,
                found: list[tuple[CompiledEngine, list[int]]], explain: bool | str | None,
                derived: dict[str, Any] | None) -> tuple[EvaluationResult, Settlement]:
        # explain=None: no engine results (the wire path makes its own)
        results = [] if explain is None else [_engine_result(engine, hits, lookup, explain) for engine, hits in found]
        # what the request names is read only where a rule may exclude (the plain path excludes
        # nothing: scanning a long task text for @mentions cost it ~30 us a request)
        settlement = Settlement(explicit={} if selection.plain else explicit_references(request))
        if selection.plain:  # nothing to settle: the memories in first-added order
            settlement.include_all([engine.rule_memories[i] for engine, hits in found for i in hits])
        else:
            for engine, hits in found:
                for rule in map(engine.rule_at, hits):
                    settlement.apply(rule)
        variables = selection.variables
        result = EvaluationResult(
            matched_memories=settlement.matched,
            excluded_memories=settlement.in_force(),
            engine_results=results,
            variables_used=list(variables),
            missing_variables=[k for k in variables if k not in lookup],
            caps=list(settlement.caps.values()),
            set_priority=dict(settlement.priorities),
            boost=list(settlement.boosts.values()),
            decisions=list(settlement.decisions.values()),
            warnings=list(selection.warnings),
            derived_variables=dict(derived or {}),
        )
        return result, settlement


_RESULT_FIELDS = [(a.name, a.type == list[str]) for a in attrs.fields(attrs.resolve_types(EvaluationResult))]


def _wire_result(result: EvaluationResult) -> dict[str, Any]:
    """`unstructure(result)`, with its lists of strings (most of it: matched memories, variables)
    copied as they are instead of through the converter element by element."""
    wire: dict[str, Any] = {}
    for name, strings in _RESULT_FIELDS:
        value = getattr(result, name)
        if value is not None:
            wire[name] = list(value) if strings else unstructure(value)
    return wire


def _engine_result(engine: CompiledEngine, hits: list[int], lookup: Lookup, explain: bool | str) -> EngineResult:
    if explain is False or explain == "none":  # the hot path: shared results, no trace
        return EngineResult(engine.id, list(map(engine.matched_result_at, hits)), engine.enabled)
    matched = list(map(engine.rule_at, hits))
    if explain == "matched":  # the assembly trace: why each applied rule fired, nothing more
        return EngineResult(engine.id, [rule_result(r, True, r.conditions.explain(lookup)[1]) for r in matched],
                            engine.enabled)
    return _explain_engine(engine, lookup, {id(r) for r in matched})


def _explain_engine(engine: CompiledEngine, lookup: Lookup, matched: set[int]) -> EngineResult:
    rules = []
    for rule in engine.rules:
        _, conditions = rule.conditions.explain(lookup)
        rules.append(rule_result(rule, id(rule) in matched, conditions))
    return EngineResult(engine.id, rules, engine.enabled)
