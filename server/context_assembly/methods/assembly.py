"""`contextAssembly/*`: assemble, validate, memoryTypes, evaluateRules, requiredVariables (SPEC §6, §8)."""

from __future__ import annotations

import uuid
from typing import Any

from ..assembly.request import parse_request
from ..assembly.resolve import Reference
from ..errors import ContextAssemblyError, InvalidParamsError
from ..model.converter import unstructure
from ..model.definitions import Contribution
from ..model.request import AssemblyRequest
from ..rules.explicit import mentions
from ..schemas.fragments import FILE_ID_RULE
from ..stores.confine import check_key
from ..stores.uri import parse_uri
from ..workspace.loader import Workspace
from ..workspace.repository import is_safe_id
from ..workspace.variables import required_variables
from .call import CallContext, MethodSpec
from .params import shape
from .session import Session

PREFIX = "contextAssembly/"
EVENTS = tuple(PREFIX + e for e in ("started", "rulesEvaluated", "pipelineComplete", "complete", "error"))
# A caller-chosen id for the assembly (an extension of the request, removed before it is parsed), so
# that the caller can tell its own events apart when several assemblies run at once.
ASSEMBLY_ID = "assembly_id"


def _assembly_id(params: dict[str, Any]) -> str:
    given = params.get(ASSEMBLY_ID)
    if given is None:
        return uuid.uuid4().hex
    if not is_safe_id(given):  # it names the snapshot file: one plain file name, nothing else
        raise InvalidParamsError("invalid assembly_id",
                                 [{"path": "/" + ASSEMBLY_ID, "message": f"must be {FILE_ID_RULE}"}])
    return str(given)


class _Progress:
    """Turns assembly events into notifications and progress: 10% rules, 10-90% pipelines, 100% done."""

    def __init__(self, ctx: CallContext) -> None:
        self.ctx = ctx
        self.total = 0
        self.done = 0

    def __call__(self, event: str, payload: dict[str, Any]) -> None:
        self.ctx.emit(PREFIX + event, payload)
        if event == "rulesEvaluated":
            self.total = len(payload.get("resolved") or [])
            self.ctx.progress(f"rules evaluated: {self.total} memories to run", 10)
        elif event == "pipelineComplete":
            self.done += 1
            share = self.done / self.total if self.total else 1.0
            self.ctx.progress(f"{payload.get('memory_id')}: {payload.get('status')}", 10 + int(80 * min(share, 1.0)))


def assemble(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    assembly_id = _assembly_id(params)
    request = {k: v for k, v in params.items() if k != ASSEMBLY_ID}
    result = session.assemble(request, observer=_Progress(ctx), cancelled=ctx.cancelled,
                                      assembly_id=assembly_id, llm=ctx.llm, workspace=session.workspace)
    return unstructure(result)


def reference_warnings(request: AssemblyRequest, workspace: Workspace) -> list[dict[str, Any]]:
    """Explicit memories, @mentions and engine ids that do not exist: warnings, as the assembly says."""
    warnings = []
    references = [(f"/explicit_memory/{i}", r) for i, r in enumerate(request.explicit_memory)]
    references += [("/input/text", r) for r in mentions(request.input.text if request.input else None)]
    for path, reference in references:
        problem = _reference_problem(Reference(reference), workspace)
        if problem is not None:
            warnings.append({"path": path, "message": problem, "code": "unknown-memory"})
    for i, engine_id in enumerate(request.rule_engine_ids or []):
        if engine_id not in workspace.engines:
            warnings.append({"path": f"/rule_engine_ids/{i}", "message": f"unknown rule engine '{engine_id}'",
                             "code": "unknown-engine"})
    return warnings


def _reference_problem(ref: Reference, workspace: Workspace) -> str | None:
    if "://" in ref.reference:
        try:
            parse_uri(ref.reference)
        except ContextAssemblyError as exc:
            return f"memory reference '{ref.reference}' is not a valid store URI: {exc.message}"
        return None
    if ref.reference not in workspace.memories:
        return f"no persistent memory '{ref.reference}' in this workspace"
    return None


def validate(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Stage 1 only: is the request well-formed, and does what it names exist? Nothing runs."""
    try:  # (the request schema checks an assembly_id as assemble does: validate said "valid" of "../x")
        request = parse_request(params, ctx.params_depth)
    except InvalidParamsError as exc:
        return {"valid": False, "errors": exc.errors, "warnings": []}
    return {"valid": True, "errors": [], "warnings": reference_warnings(request, session.workspace())}


def memory_types(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    items = []
    for memory_id, memory in sorted(session.workspace().memories.items()):
        contribution = memory.contribution or Contribution()
        items.append({
            "id": memory_id,
            "label": memory.label or memory_id,
            "description": memory.description,
            "section": contribution.section or "knowledge",
            "priority": contribution.priority or "medium",
            "status": memory.status or "active",
            "inputs_scope": list(memory.scopes),
            "additional_variables": unstructure(memory.declared_variables),
        })
    return {"items": items}


def end_turn(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Seed 002: working memory is discarded once the turn is complete. Clears the thread's scratchpad."""
    thread_id = params["thread_id"]
    try:  # any thread id an assembly takes (`acme/shop#42`): its working:// URI encodes it
        check_key(thread_id, what="thread id", pointer="/thread_id")
    except ContextAssemblyError as exc:
        raise InvalidParamsError(f"invalid thread_id: {exc.message}",
                                 [{"path": "/thread_id", "message": exc.message}]) from None
    cleared = session.memory.clear_working(thread_id)  # None: the token may not read the thread
    return {"thread_id": thread_id, **({} if cleared is None else {"cleared": cleared})}


def evaluate_rules(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    request = parse_request(params, ctx.params_depth)
    return session.runtime.evaluate(request, session.workspace(), explain=params.get("explain", "all"),
                                    trace_format=params.get("trace_format", "full"), encoded=ctx.encodes,
                                    readable=session.access.readable())


def required(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return unstructure(required_variables(session.workspace(), list(params["memory_ids"])))


METHODS = (
    MethodSpec(PREFIX + "assemble", assemble, schema="assembly-request", long_running=True, events=EVENTS,
               summary="Assemble the context for the next LLM call (SPEC §6)."),
    MethodSpec(PREFIX + "validate", validate, schema="assembly-request",
               summary="Check a request without running it: errors with JSON paths, unknown references."),
    MethodSpec(PREFIX + "memoryTypes", memory_types, summary="The persistent-memory definitions."),
    MethodSpec(PREFIX + "evaluateRules", evaluate_rules, schema="assembly-request",
               summary="Evaluate the enabled (or named) rule engines with the per-condition explanation."),
    MethodSpec(PREFIX + "requiredVariables", required, shape(memory_ids="strings"),
               summary="The scopes and variables the named memories need."),
    MethodSpec(PREFIX + "endTurn", end_turn, shape(thread_id="string"),
               summary="The turn is complete: clear the thread's working memory (seed 002)."),
)
