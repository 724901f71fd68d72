"""What a case observed: one shape for a rules-only run and for a full assembly, so every
expectation is checked the same way."""

from __future__ import annotations

from typing import Any

from attrs import define, field

from ..assembly.resolve import resolve
from ..errors import ContextAssemblyError
from ..model.context import AssembledContext
from ..model.evaluation import EvaluationResult
from ..model.request import AssemblyRequest
from ..stores.uri import parse_uri
from ..workspace.loader import Workspace

OK_STATUSES = ("ok", "cached")


@define
class Observation:
    included: list[str]  # memories, in resolution order
    fired: list[tuple[str, str]]  # (engine id, rule id) of the rules that matched
    warnings: list[str]
    items: list[dict[str, Any]] | None = None  # assembly only: {memory, source, section, content}
    token_estimate: int | None = None
    assembled: AssembledContext | None = field(default=None, repr=False)


def _uri_problem(text: str) -> str | None:
    try:
        parse_uri(text)
    except ContextAssemblyError as exc:
        return exc.message
    return None


def from_rules(request: AssemblyRequest, evaluation: EvaluationResult, workspace: Workspace) -> Observation:
    references = resolve(request, evaluation, set(workspace.memories), _uri_problem)
    fired = [(e.engine_id, r.rule_id) for e in evaluation.engine_results for r in e.rules if r.matched]
    warnings = list(evaluation.warnings)
    warnings += [f"memory reference '{r.reference}' does not resolve: {r.error}" for r in references if r.error]
    # what the rules (and the request) include, also references that will not resolve (their warning says so)
    return Observation([r.reference for r in references], fired, warnings)


def _belongs(item: Any, reference: str) -> bool:
    if item.memory_id is not None:
        return bool(item.memory_id == reference)
    source = item.source or ""
    return bool(source == reference or source.startswith(reference.rstrip("/") + "/"))


# what a memory contributed though its own copy is not shown, and what the warnings section had
# before its cap or the budget left some out: a test of the assembly sees them as `assemble` did
_LEFT_OUT = ("duplicate", "conflict", "shortened", "priority")


def from_assembly(result: AssembledContext) -> Observation:
    items = [item for section in result.context.values() for item in section]
    shown_ids = {item.id for item in items}
    copies = [d for d in result.trace.decisions if d.kind == "duplicate" and d.by in shown_ids]
    included = [call.reference for call in result.trace.memory_calls
                if call.status in OK_STATUSES and any(_belongs(x, call.reference) for x in [*items, *copies])]
    fired = [(str(r.get("engine_id")), str(r.get("rule_id"))) for r in result.trace.rules_applied]
    warnings = [item.content for item in result.context.get("warnings", [])]
    warnings += [d.preview for d in result.trace.decisions
                 if d.section == "warnings" and d.kind not in _LEFT_OUT and d.preview]
    shown = [{"memory": item.memory_id, "source": item.source, "section": item.section, "content": item.content}
             for item in items]
    return Observation(included, fired, warnings, shown, result.meta.token_estimate, result)
