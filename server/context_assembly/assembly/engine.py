"""The assembly engine: the seven stages of SPEC §6, in order, each visible in the trace.

validate → resolve → execute → merge → contribute → budget → return. Nothing here knows about
JSON-RPC: progress goes to an observer (`started`, `rulesEvaluated`, `pipelineComplete`,
`complete`, `error`) which the sidecar forwards as notifications.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from attrs import define, evolve, field

from ..errors import CancelledError, ContextAssemblyError
from ..limits import applied
from ..model.context import (
    AssembledContext,
    ContextItem,
    DroppedItem,
    MemoryCall,
    Meta,
    SectionTrace,
    Trace,
    preview,
)
from ..model.converter import unstructure
from ..model.definitions import Contribution, MemoryDefinition
from ..model.evaluation import EvaluationResult
from ..model.request import AssemblyRequest
from ..pipelines.items import NOT_READ, Readable, may_read_item
from ..registry.sections import SECTION_NAMES
from ..registry.variables import MEMORY_SOURCE
from ..rules.engine import CompiledRule, rule_result
from ..rules.lookup import request_lookup
from ..rules.settle import Settlement
from ..stores.uri import default_section, parse_uri, render
from ..workspace.atomic import write_new
from ..workspace.loader import Workspace, load_warnings
from .budget import pack
from .candidates import Candidate
from .contribute import Contribution as Contributed
from .contribute import SourceRules, contribute
from .events import AssemblyObserver, ignore
from .execute import Execution, Executor
from .merge import Merged, deduplicate
from .request import parse_request
from .resolve import Reference, resolve
from .state import active_file_item, task_item, warning_item
from .summary import Llm, Summariser, SummaryCache
from .tokens import Counter, token_counter
from .tools import system_prompt_item, tool_item_id, tool_items
from .warnings import warning_items as warning_items_within


@define
class _Run:
    """The state of one assembly as it moves through the stages."""

    assembly_id: str
    request: AssemblyRequest
    workspace: Workspace
    observer: AssemblyObserver
    count: Counter
    started: float = field(factory=time.perf_counter)
    trace: Trace = field(factory=Trace)
    warnings: list[tuple[str, dict[str, Any]]] = field(factory=list)
    candidates: list[Candidate] = field(factory=list)
    settlement: Settlement = field(factory=lambda: Settlement({}))  # the rules' one decision
    readable: Readable | None = None  # the caller's access policy over item sources (None: all)
    stage_started: float = field(factory=time.perf_counter)

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self.trace.stages[name] = round((now - self.stage_started) * 1000, 3)
        self.stage_started = now

    def warn(self, message: str, **metadata: Any) -> None:
        self.warnings.append((message, metadata))

    def emit(self, event: str, **payload: Any) -> None:
        self.observer(event, {"assembly_id": self.assembly_id, **payload})


class Assembler:
    """Assembles context for one workspace. Thread-safe; reuse it across requests (cache, pool)."""

    def __init__(self, workspace: Callable[[], Workspace], memory: Any, stores: Any, executor: Executor) -> None:
        self.workspace = workspace
        self.memory = memory
        self.stores = stores
        self.executor = executor
        self.summaries = SummaryCache()

    def assemble(self, request: Any, *, observer: AssemblyObserver = ignore,
                 cancelled: Callable[[], bool] = lambda: False, assembly_id: str | None = None,
                 llm: Llm | None = None, snapshot: bool = True,
                 workspace: Callable[[], Workspace] | None = None,
                 readable: Readable | None = None) -> AssembledContext:
        """`llm`: the client's model (llm/complete), used for summaries when the budget is tight.
        `snapshot=False`: never keep this one (a rule test or a replay is not a turn of the agent).
        `workspace`: the caller's view of the workspace (a session's settings), else the assembler's.
        `readable`: which item sources the caller may read (its token's access policy); the others
        are left out before anything is merged or packed, each named in the trace without its content."""
        assembly_id = assembly_id or uuid.uuid4().hex
        try:
            return self._assemble(request, observer, cancelled, assembly_id, llm, snapshot,
                                  workspace or self.workspace, readable)
        except ContextAssemblyError as exc:
            observer("error", {"assembly_id": assembly_id, "message": exc.message, "code": exc.code, **exc.data})
            raise
        except Exception as exc:
            observer("error", {"assembly_id": assembly_id, "message": f"{type(exc).__name__}: {exc}", "code": -32603})
            raise

    def lookup(self, request: AssemblyRequest,
               readable: Readable | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The variable lookup of a request, derived values included, as every method builds it."""
        return request_lookup(request, readable_turns(lambda thread: self.memory.episodic.count(thread), readable))

    def _assemble(self, raw: Any, observer: AssemblyObserver, cancelled: Callable[[], bool],
                  assembly_id: str, llm: Llm | None, snapshot: bool = True,
                  workspace_of: Callable[[], Workspace] | None = None,
                  readable: Readable | None = None) -> AssembledContext:
        request = raw if isinstance(raw, AssemblyRequest) else parse_request(raw)
        workspace = (workspace_of or self.workspace)()
        settings = workspace.settings
        run = _Run(assembly_id, request, workspace, observer, token_counter(settings.tokenizer), readable=readable)
        run.emit("started", thread_id=request.thread_id)
        lookup, derived = self.lookup(request, readable)
        for problem in _validate(request, workspace):
            run.warn(problem, kind="validation")
        run.stage("validate")

        evaluation, run.settlement = workspace.rule_set.settle(request, lookup, explain="matched", derived=derived)
        references = resolve(request, evaluation, set(workspace.memories), _uri_problem)
        for reference in references:  # a broken definition file says so, not "no persistent memory"
            if reference.kind == "unknown" and "://" not in reference.reference:
                reference.error = next(iter(load_warnings(workspace, [], [reference.reference])), reference.error)
        _record_rules(run, evaluation)
        run.emit("rulesEvaluated", matched_memories=evaluation.matched_memories,
                 resolved=[{"reference": r.reference, "origin": r.origin, "kind": r.kind} for r in references])
        run.stage("resolve")

        timeout_s = settings.pipeline_timeout_ms / 1000
        with applied(settings.limits):  # the stores check a pipeline's top_k, limits and views against these
            executions = self.executor.run(references, workspace.memories, request, lookup, timeout_s, cancelled,
                                           lambda e: run.emit("pipelineComplete", **_call_summary(e)),
                                           settings.budget.vector_min_score, llm, run.readable)
        if cancelled():
            raise CancelledError("the assembly was cancelled")
        self._collect(run, executions, lookup)
        run.stage("execute")

        merged = deduplicate(run.candidates)
        run.stage("merge")

        contribution = _contribute(run, merged, self._per_source(run, executions, lookup))
        run.trace.decisions += merged.duplicates() + contribution.dropped
        run.trace.section_order = contribution.order
        run.stage("contribute")

        max_tokens = request.constraints.max_tokens if request.constraints and request.constraints.max_tokens \
            else settings.max_tokens
        task = request.input.text if request.input and request.input.text else ""
        summariser = Summariser(self.summaries, run.count, task, llm, settings.budget.summary_timeout_ms / 1000,
                                settings.tokenizer)
        result = self._budget(run, contribution.sections, contribution.order, max_tokens, summariser)
        run.stage("budget")
        result.meta.duration_ms = round((time.perf_counter() - run.started) * 1000, 3)
        if settings.snapshots and snapshot:
            self._snapshot(run, result)
        run.emit("complete", meta=unstructure(result.meta))
        return result

    def _snapshot(self, run: _Run, result: AssembledContext) -> None:
        """Keep the request and the result for replay (`.codebolt/memory/context/<id>.json`)."""
        # "read": the caller's read patterns (null: unrestricted), for the tokens it may be shown to
        document = {"request": unstructure(run.request), "result": unstructure(result),
                    "read": None if run.readable is None else list(run.readable.patterns)}
        path = run.workspace.layout.snapshots_dir / f"{run.assembly_id}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not write_new(path, orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str)):
                # an assembly id names one assembly: a second one of that id (a retry, or another
                # client choosing it) never replaces the snapshot replays and rule tests read
                result.trace.decisions.append(DroppedItem(
                    "snapshot", f"not written: the snapshot of assembly {run.assembly_id} was kept before"))
                return
            result.meta.snapshot = path.relative_to(run.workspace.root).as_posix()
        except (OSError, ContextAssemblyError) as exc:  # a snapshot is a debugging aid: never fail the turn
            result.trace.decisions.append(DroppedItem("snapshot", f"the snapshot could not be written: {exc}"))

    # -- stage helpers -------------------------------------------------------------------------

    def _collect(self, run: _Run, executions: list[Execution], lookup: dict[str, Any]) -> None:
        for execution in executions:
            ref = execution.reference
            run.trace.memory_calls.append(_memory_call(execution))
            if execution.status not in ("ok", "cached"):
                run.warn(_miss_message(execution), reference=ref.reference, status=execution.status)
                continue
            for warning in execution.warnings:  # a key, note or file a step found missing: never a silent drop
                run.warn(f"memory '{ref.reference}': {warning}", kind="step", reference=ref.reference)
            section, priority, limits = _placement(ref, execution.definition)
            for item in execution.items:
                # the runs kept only what the caller may read; this guards that, and says nothing:
                # an id, a count or a decision would tell the caller what it may not read exists
                if not may_read_item(run.readable, item.source, item.metadata):
                    continue
                blocker = None if ref.explicit else run.settlement.excludes(ref.reference, item.source)
                if blocker is not None:
                    run.trace.decisions.append(DroppedItem("excluded", f"excluded by the pattern {blocker[0]}",
                                                           item.id, ref.reference, item.source, section,
                                                           by=blocker[1], preview=preview(item.content)))
                    continue
                context_item = ContextItem(
                    item.id, item.content, ref.reference if ref.kind == "definition" else None, item.source,
                    section, priority, item.score, run.count(item.content),
                    # a title the pipeline set (an `annotate` step's) wins; `origin` is the assembly's own:
                    # why the memory ran, whatever a stored document or a step calls its origin
                    {**({"title": item.title} if item.title else {}), **item.metadata, "origin": ref.origin},
                )
                run.candidates.append(Candidate(context_item, ref.reference, len(run.candidates), limits,
                                                raw_content=item.raw_content, timestamp=item.timestamp))
            for key in execution.variables_used:
                if key not in run.trace.variables_used:
                    run.trace.variables_used.append(key)
        active = run.request.additional_variables.get("active_file")
        if isinstance(active, str) and active:
            if run.readable is not None and not run.readable(render("file", (active,))):  # before reading:
                # the same warning whether or not the file is there
                run.warn(f"the active file '{active}' is {NOT_READ}", kind="access")
            elif isinstance(state := active_file_item(active, self.memory.files.read, run.count), str):
                run.warn(state, kind="active_file")
            else:
                run.candidates.append(Candidate(state, "state", len(run.candidates)))
        run.candidates.insert(0, Candidate(task_item(run.request, run.count), "state", -1))
        prompt = system_prompt_item(run.request, run.count)
        if prompt is not None:
            run.candidates.append(Candidate(prompt, "request:system_prompt", len(run.candidates)))
        tools, run.trace.tools = tool_items(run.request, run.count, run.workspace.settings.tools)
        run.candidates += [Candidate(t, "request:tools", len(run.candidates) + i) for i, t in enumerate(tools)]
        run.trace.variables_used.sort()
        run.trace.missing_variables = sorted(set(run.trace.missing_variables) | {
            v for e in executions for v in e.missing_variables})

    def _per_source(self, run: _Run, executions: list[Execution], lookup: dict[str, Any]) -> dict[str, SourceRules]:
        rule_set = run.workspace.rule_set
        out: dict[str, SourceRules] = {}
        for execution in executions:
            reference = execution.reference.reference
            matched = rule_set.per_source_matches(run.request.rule_engine_ids, lookup, reference)
            if matched:  # settled as the request's rules are: the first cap per target, priority per section
                settled = Settlement({})
                for rule in matched:
                    settled.apply(rule)
                    _applied_per_source(run, rule, lookup, reference)
                out[reference] = SourceRules(list(settled.caps.values()), dict(settled.priorities),
                                             [r.ref for r in matched], dict(settled.priority_rules))
        return out

    def _budget(self, run: _Run, sections: dict[str, list[Candidate]], order: list[str],
                max_tokens: int | None, summariser: Summariser) -> AssembledContext:
        settings = run.workspace.settings.budget
        memories = {c.item.id: c for c in sections["warnings"]}  # what memories put in the section: capped too
        kept, capped = warning_items_within(run.warnings, run.count, settings.warnings_max_tokens,
                                            [c.item for c in sections["warnings"]], settings.min_truncated_tokens)
        run.trace.decisions += capped
        warning_items = [item for item in kept if item.id not in memories]
        sections["warnings"] = [Candidate(w, "warnings", i) for i, w in enumerate(warning_items)]
        for item in kept:
            if item.id in memories:  # (a cut one is a new item of the same id)
                memories[item.id].item = item
                sections["warnings"].append(memories[item.id])
        ordered = [c for name in order for c in sections[name]]
        note = None
        if max_tokens is not None and sum(c.item.tokens for c in ordered) > max_tokens:
            # tell the agent, inside the budget: the note is a warning like the others, within
            # budget.warnings_max_tokens as they are (it went past the cap that had left one out)
            note = Candidate(warning_item(len(warning_items), _truncation_message(max_tokens), run.count,
                                          kind="budget"), "warnings", len(warning_items))
            cap = settings.warnings_max_tokens
            if cap is not None and sum(w.tokens for w in kept) + note.item.tokens > cap:  # memories' too
                note = None
        if note is not None:
            position = sum(len(sections[name]) for name in order[: order.index("warnings") + 1])
            ordered.insert(position, note)
        packed = pack(ordered, max_tokens, run.count, settings, summariser)
        context: dict[str, list[ContextItem]] = {name: [] for name in SECTION_NAMES}
        for item in packed.kept:
            context[item.section].append(item)
        for item, strategy, reason in packed.dropped:
            if note is not None and item is note.item:
                continue  # the budget is too small even for the note
            kind = "relevance" if strategy == "relevance_floor" else "budget"
            run.trace.decisions.append(DroppedItem(kind, reason, item.id, item.memory_id, item.source,
                                                   item.section, item.tokens, by=strategy,
                                                   preview=preview(item.content)))
        run.trace.ladder = [s for s in packed.steps if note is None or s.item_id != note.item.id]
        _copies_left_out(run.trace, {i for item in packed.kept for i in (item.id, *_compressed(item))})
        _tools_left_out(run.trace)
        _section_traces(run.trace, context)
        meta = Meta(run.assembly_id, packed.tokens, len(packed.kept), packed.truncated, max_tokens=max_tokens,
                    tokenizer=run.workspace.settings.tokenizer)
        return AssembledContext(context, run.trace, meta)


# -- small pure helpers --------------------------------------------------------------------------


def _contribute(run: _Run, merged: Merged, per_source: dict[str, SourceRules]) -> Contributed:
    """Stage 5 over the merged candidates; a kept copy that a cap or limit removes gives its place
    to the next copy of the same content, and stage 5 runs again (on copies: it shortens and
    boosts candidates) until every removed copy had its successor tried."""
    settled = run.settlement
    min_cut = run.workspace.settings.budget.min_truncated_tokens
    if not merged.copies:  # no duplicates: nothing to promote, stage 5 runs once on the candidates
        run.candidates = merged.kept
        return contribute(merged.kept, list(settled.caps.values()), settled.priorities,
                          list(settled.boosts.values()), per_source, run.count, settled.cap_rules, min_cut)
    tried: list[DroppedItem] = []  # what removed the copies that gave their place
    while True:
        trial = [evolve(candidate, item=evolve(candidate.item)) for candidate in merged.kept]
        contribution = contribute(trial, list(settled.caps.values()), settled.priorities,
                                  list(settled.boosts.values()), per_source, run.count, settled.cap_rules, min_cut)
        survivors = {c.order for section in contribution.sections.values() for c in section}
        lost = [c for c in merged.kept if c.order not in survivors and c.order in merged.copies]
        if not lost:
            run.candidates = merged.kept
            contribution.dropped[:0] = tried
            return contribution
        for candidate in lost:
            tried += [d for d in contribution.dropped if d.item_id == candidate.item.id and d.kind != "shortened"]
            merged.promoted(candidate)


def _uri_problem(text: str) -> str | None:
    try:
        parse_uri(text)
    except ContextAssemblyError as exc:
        return exc.message
    return None


def _validate(request: AssemblyRequest, workspace: Workspace) -> list[str]:
    """Stage 1 beyond the request's own shape: references and engines that do not exist."""
    problems = []
    known = set(workspace.engines)
    for engine_id in request.rule_engine_ids or []:
        if engine_id not in known:
            problems.append(f"unknown rule engine '{engine_id}'")
    return problems + load_warnings(workspace, request.rule_engine_ids)


def _record_rules(run: _Run, evaluation: EvaluationResult) -> None:
    for engine in evaluation.engine_results:
        for rule in engine.rules:
            if rule.matched:
                run.trace.rules_applied.append({"engine_id": engine.engine_id, **unstructure(rule)})
    run.trace.variables_used = list(evaluation.variables_used)
    run.trace.missing_variables = list(evaluation.missing_variables)
    run.trace.decisions += [DroppedItem("conflict", d.outcome, reference_id(d.reference), None, d.reference,
                                        by=d.rule, overridden=list(d.overridden) or None)
                            for d in evaluation.decisions]
    for warning in evaluation.warnings:
        if not warning.startswith("unknown rule engine"):  # stage 1 already said so
            run.warn(warning, kind="rules")


def _applied_per_source(run: _Run, rule: CompiledRule, lookup: dict[str, Any], reference: str) -> None:
    """A per-source rule that held for one reference, in `rules_applied` as the request's rules are
    (with the reference it held for): it was named only inside the decisions its cap made."""
    engine_id = rule.ref[: len(rule.ref) - len(rule.rule_id) - 1]
    conditions = rule.conditions.explain({**lookup, MEMORY_SOURCE: reference})[1]
    run.trace.rules_applied.append({"engine_id": engine_id, **unstructure(rule_result(rule, True, conditions)),
                                    "source": reference})


def reference_id(reference: str) -> str:
    return f"reference:{reference}"


def _placement(ref: Reference, definition: MemoryDefinition | None) -> tuple[str, str, dict[str, Any]]:
    """Section, priority and limits: the definition's contribution, or the URI's defaults (§5.1)."""
    if definition is None:
        return default_section(ref.reference), "medium", {}
    contribution = definition.contribution or Contribution()
    section = contribution.section if contribution.section in SECTION_NAMES else "knowledge"
    priority = contribution.priority or "medium"
    limits = {k: v for k, v in (("max_items", contribution.max_items), ("max_tokens", contribution.max_tokens))
              if v is not None}
    return str(section), priority, limits


def readable_turns(count: Callable[[str], int], readable: Readable | None) -> Callable[[str], int]:
    """The turn counter of `addVar.turn_count` for a caller: a thread it may not read has no count
    (the variable is absent, as when nothing is stored), not the number of its turns."""
    if readable is None:
        return count

    def counted(thread: str) -> int:
        if not readable(render("episodic", (thread,))):
            raise LookupError(thread)
        return count(thread)

    return counted


def _memory_call(execution: Execution) -> MemoryCall:
    ref = execution.reference
    return MemoryCall(ref.reference, list(ref.origin), execution.status, ref.kind, execution.duration_ms,
                      len(execution.items), execution.error, list(execution.missing_variables), execution.steps,
                      cached=execution.status == "cached")


def _call_summary(execution: Execution) -> dict[str, Any]:
    return {"memory_id": execution.reference.reference, "status": execution.status,
            "items": len(execution.items), "duration_ms": execution.duration_ms,
            **({"error": execution.error} if execution.error else {})}


def _miss_message(execution: Execution) -> str:
    ref = execution.reference.reference
    if execution.status == "skipped" and execution.missing_variables:
        return f"memory '{ref}' was skipped: the request lacks {', '.join(execution.missing_variables)}"
    if execution.status == "timeout":
        return f"memory '{ref}' timed out: {execution.error}"
    if execution.status == "missing":
        if (execution.error or "").startswith(f"'{ref}' "):  # it names the reference already: once is enough
            return f"memory reference {execution.error}"
        return f"memory reference '{ref}' does not resolve: {execution.error}"
    return f"memory '{ref}' {execution.status}: {execution.error}"


def _truncation_message(max_tokens: int | None) -> str:
    # worded without counts, so inserting it cannot change what it says
    return f"context was left out to fit the budget of {max_tokens} tokens (see the trace)"


def _tools_left_out(trace: Trace) -> None:
    """A tool kept by its relevance and then left out (a cap, a limit, a duplicate, the budget)
    says so: its trace entry said "kept" whatever came after."""
    for entry in trace.tools:
        if not entry.get("kept"):
            continue
        item_id = tool_item_id(str(entry.get("name")))
        why = next((d for d in trace.decisions if d.item_id == item_id and d.kind not in _NOT_DROPPED), None)
        if why is not None:
            entry.update(kept=False, reason=f"{entry['reason']}, then left out by {_left_out_by(why)}")


def _left_out_by(decision: DroppedItem) -> str:
    if decision.kind in ("budget", "relevance"):
        return f"the budget ({decision.by}: {decision.reason})"
    return f"{decision.kind} ({decision.reason})"


def _compressed(item: ContextItem) -> list[str]:
    """The turns a `compress_turns` summary stands for: their content is in the context still."""
    ids = item.metadata.get("compressed_turns")
    return [str(i) for i in ids] if isinstance(ids, list) else []


def _copies_left_out(trace: Trace, kept: set[str]) -> None:
    """A duplicate whose kept copy the budget then left out says so ("already included" was not true)."""
    for decision in trace.decisions:
        if decision.kind == "duplicate" and decision.by not in kept:
            decision.reason = (f"the same content as {decision.by}, which was kept instead and then left out "
                               "by the budget")


# decisions that leave no item out of its section (a shortened item is kept, cut: `truncated`)
_NOT_DROPPED = ("duplicate", "conflict", "shortened", "priority")


def _section_traces(trace: Trace, context: dict[str, list[ContextItem]]) -> None:
    dropped: dict[str, int] = {}
    for decision in trace.decisions:
        if decision.section and decision.kind not in _NOT_DROPPED:
            dropped[decision.section] = dropped.get(decision.section, 0) + 1
    for name in SECTION_NAMES:
        items = context[name]
        count = dropped.get(name, 0)
        trace.sections[name] = SectionTrace(sum(i.tokens for i in items), len(items),
                                            bool(count) or any(i.metadata.get("truncated") or i.metadata.get(
                                                "summarised") or i.metadata.get("compressed_turns") for i in items),
                                            count)
