"""`contextRuleEngine/*`: CRUD over `.codebolt/context-rule-engines/`, evaluate, variables, and
validation of a draft engine with JSON pointers and (when the document's text is known) LSP ranges."""

from __future__ import annotations

from typing import Any

import attrs

from ..assembly.request import parse_request
from ..documents import ParsedDocument, parse_document
from ..errors import NotFoundError
from ..model.converter import unstructure
from ..model.problems import Problem, Severity
from ..rules.checks import check_engine_document
from ..rules.evaluate import RuleSet
from ..schemas import validation_errors
from ..workspace.lint import lint_context
from ..workspace.variables import possible_variables
from .call import CallContext, MethodSpec
from .params import EMPTY, shape
from .session import Session

PREFIX = "contextRuleEngine/"
ENGINE_ID = "id"  # contextRuleEngine/evaluate: the one engine to evaluate (not part of the request)
DOCUMENT_KEYS = ("uri", "text")  # contextRuleEngine/validate: where the draft is, not the draft


def list_engines(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"items": session.rule_engines.list()}


def get(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.rule_engines.get(params["id"])


def create(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.rule_engines.create(params)


def update(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.rule_engines.update(params["id"], params["updates"])


def delete(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.rule_engines.delete(params["id"])


def add_rule(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.rule_engines.add_rule(params["engine_id"], params["rule"])


def update_rule(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.rule_engines.update_rule(params["engine_id"], params["rule_id"], params["updates"])


def delete_rule(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.rule_engines.delete_rule(params["engine_id"], params["rule_id"])


def evaluate(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """One engine by `id` (enabled or not: naming it is an explicit request), or every enabled one."""
    engine_id = params.get(ENGINE_ID)
    request = parse_request({k: v for k, v in params.items() if k != ENGINE_ID})
    rule_set = session.workspace().rule_set
    if engine_id is None:
        return unstructure(rule_set.evaluate(request))
    compiled = next((e for e in rule_set.engines if e.id == engine_id), None)
    if compiled is None:
        raise NotFoundError(f"rule engine {engine_id!r} not found", {"id": engine_id})
    return unstructure(RuleSet([compiled]).evaluate(attrs.evolve(request, rule_engine_ids=[engine_id])))


def variables(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"items": unstructure(possible_variables(session.workspace()))}


# -- validate --------------------------------------------------------------------------------------


def _covered(path: str, paths: set[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in paths)


def _range(document: ParsedDocument | None, problem: Problem, encoding: str) -> dict[str, Any] | None:
    if document is None or document.value is None:
        return None
    span = document.span(problem.path, "key" if problem.data.get("on") == "key" else "value")
    if span is None:
        return None
    (line, character), (end_line, end_character) = document.lines.range_to_positions(span[0], span[1], encoding)
    return {"start": {"line": line, "character": character}, "end": {"line": end_line, "character": end_character}}


def _entry(problem: Problem, document: ParsedDocument | None, encoding: str) -> dict[str, Any]:
    out: dict[str, Any] = {"path": problem.path, "message": problem.message, "code": problem.code}
    if problem.severity is not Severity.ERROR:
        out["severity"] = problem.severity.value
    where = _range(document, problem, encoding)
    if where is not None:
        out["range"] = where
    if problem.data:
        out["data"] = problem.data
    return out


def validate_engine(draft: Any, session: Session, document: ParsedDocument | None = None) -> dict[str, Any]:
    """Schema and meaning problems of a draft engine; meaning wins where both speak about one place."""
    meaning = check_engine_document(draft, lint_context(session.workspace()))
    loud = {p.path for p in meaning if p.severity in (Severity.ERROR, Severity.WARNING)}
    problems = [Problem(e["message"], "schema", path=e["path"]) for e in validation_errors("rule-engine", draft)
                if not _covered(e["path"], loud)]
    problems += meaning
    if document is not None:
        problems += [Problem(s.message, "syntax", path="") for s in document.syntax_errors]
    encoding = session.position_encoding
    errors = [_entry(p, document, encoding) for p in problems if p.severity is Severity.ERROR]
    warnings = [_entry(p, document, encoding) for p in problems if p.severity is not Severity.ERROR]
    return {"valid": not errors, "errors": errors, "warnings": warnings}


def validate(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A draft engine, not saved. With `uri` (or `text`) problems carry LSP ranges in that document;
    `{uri}` alone validates the document as the editor (or the disk) has it."""
    draft = {k: v for k, v in params.items() if k not in DOCUMENT_KEYS}
    text = params.get("text")
    if text is None and isinstance(params.get("uri"), str):
        text = session.document_text(params["uri"])
    document = parse_document(text, str(params.get("uri") or "draft.json")) if isinstance(text, str) else None
    if not draft and document is not None:
        if document.syntax_errors:
            return validate_engine(None, session, document) | {"valid": False}
        draft = document.value
    return validate_engine(draft, session, document)


METHODS = (
    MethodSpec(PREFIX + "list", list_engines, EMPTY, summary="Every rule engine, sorted by id."),
    MethodSpec(PREFIX + "get", get, shape(id="string"), summary="One rule engine."),
    MethodSpec(PREFIX + "create", create, schema="rule-engine",
               summary="Store a new engine (ids generated for it and its rules when missing)."),
    MethodSpec(PREFIX + "update", update, shape(id="string", updates="object"), schema="rule-engine",
               summary="Merge top-level keys into an engine."),
    MethodSpec(PREFIX + "delete", delete, shape(id="string"), summary="Remove an engine's file."),
    MethodSpec(PREFIX + "addRule", add_rule, shape(engine_id="string", rule="object"), schema="rule-engine",
               summary="Append a rule to an engine."),
    MethodSpec(PREFIX + "updateRule", update_rule, shape(engine_id="string", rule_id="string", updates="object"),
               schema="rule-engine", summary="Merge top-level keys into one rule."),
    MethodSpec(PREFIX + "deleteRule", delete_rule, shape(engine_id="string", rule_id="string"),
               summary="Remove one rule."),
    MethodSpec(PREFIX + "evaluate", evaluate, shape(id="string?"), schema="assembly-request",
               summary="Evaluate one engine (by id) or every enabled one against a request."),
    MethodSpec(PREFIX + "possibleVariables", variables, EMPTY,
               summary="Every variable a rule or a memory definition reads, with where it is used."),
    MethodSpec(PREFIX + "validate", validate, shape(uri="string?", text="string?"), schema="rule-engine",
               summary="Validate a draft engine: errors with JSON pointers, codes and ranges."),
)
