"""`contextRuleEngine/*`: CRUD over `.codebolt/context-rule-engines/`, evaluate, variables, and
validation of a draft engine with JSON pointers and (when the document's text is known) LSP ranges."""

from __future__ import annotations

import json
from typing import Any

import attrs

from ..assembly.request import parse_request
from ..documents import ParsedDocument, parse_document
from ..editor.diagnostics import SEVERITY, document_diagnostics
from ..editor.documents import EditorDocument, build_document, overlay
from ..errors import ConflictError, NotFoundError
from ..model.converter import unstructure
from ..model.problems import Severity
from ..rules.compact import layout
from ..workspace.variables import possible_variables
from .call import CallContext, MethodSpec
from .crud import crud_methods
from .params import EMPTY, shape
from .session import Session

PREFIX = "contextRuleEngine/"
ENGINE_ID = "id"  # contextRuleEngine/evaluate: the one engine to evaluate (not part of the request)
DOCUMENT_KEYS = ("uri", "text")  # contextRuleEngine/validate: where the draft is, not the draft


def list_engines(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"items": session.rule_engines.list()}


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
    workspace = session.workspace()
    if engine_id is not None and all(e.id != engine_id for e in workspace.rule_set.engines):
        raise NotFoundError(f"rule engine {engine_id!r} not found", {"id": engine_id})
    return session.runtime.evaluate(request, workspace, engine_id, explain=params.get("explain", "all"),
                                    trace_format=params.get("trace_format", "full"), encoded=ctx.encodes,
                                    readable=session.access.readable())


def trace_layout(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """The static layout a compact trace (`trace_format: "compact"`) of the engine `id` refers to.
    With `layout` (the key an answer carried): that layout, or Conflict when the engine has changed
    since (evaluate again)."""
    engine_id, wanted = params["id"], params.get("layout")
    layouts = [layout(e) for e in session.workspace().rule_set.engines if e.id == engine_id]
    if not layouts:
        raise NotFoundError(f"rule engine {engine_id!r} not found", {"id": engine_id})
    found = next((found for found in layouts if found.key == wanted), None if wanted is not None else layouts[0])
    if found is None:
        raise ConflictError(f"trace layout {wanted!r} of rule engine {engine_id!r} is not current: the engine "
                            f"changed since that answer (its layout is now {layouts[0].key!r}); evaluate again",
                            {"id": engine_id, "layout": wanted, "current": layouts[0].key})
    return found.document


def variables(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"items": unstructure(possible_variables(session.workspace()))}


# -- validate --------------------------------------------------------------------------------------
# The same diagnostics as the editor publishes for the same text (`editor.diagnostics`): one code
# path, so a JSON pointer, code, message and range never differ between the two.

RULE_KINDS = ("rule-engine", "context-rules")


def _draft_uri(session: Session, draft: Any) -> str:
    """Where a draft without a (recognised) document would live: its engine file, as saving writes it."""
    the_id = draft.get("id") if isinstance(draft, dict) else None
    name = the_id if _usable_name(the_id) else "draft"
    return (session.places.layout.rule_engines_dir / f"{name}.json").as_uri()


def _usable_name(the_id: Any) -> bool:
    """Whether an id can name a file at all (the repository refuses odd ids when saving; a draft is
    only checked): no separator, no NUL, nothing a file system cannot encode."""
    if not isinstance(the_id, str) or not the_id or the_id in (".", "..") or "/" in the_id or "\x00" in the_id:
        return False
    try:
        the_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _editor_document(session: Session, uri: str | None, text: str, draft: Any) -> EditorDocument:
    """The document the editor would build for `uri`; a rule-engine file of the workspace otherwise."""
    places = session.places  # the uri maps to a workspace file through the links the client took
    if uri is not None:
        document = build_document(uri, text, None, places)
        if document is not None and document.kind in RULE_KINDS:
            # the uri only places the draft (its kind, the ranges): it is checked against this
            # workspace wherever the uri points, not on its own as another project's open file is
            return attrs.evolve(document, outside=False) if document.outside else document
    if draft is None:
        draft = parse_document(text, "draft.json").value
    document = build_document(_draft_uri(session, draft), text, None, places)
    assert document is not None  # a path under context-rule-engines/ is always a rule-engine file
    return document


def _entry(diagnostic: dict[str, Any], with_range: bool) -> dict[str, Any]:
    data = {k: v for k, v in diagnostic["data"].items() if k not in ("pointer", "code")}
    out: dict[str, Any] = {"path": diagnostic["data"]["pointer"], "message": diagnostic["message"],
                           "code": diagnostic["code"]}
    if diagnostic["severity"] != SEVERITY[Severity.ERROR]:
        out["severity"] = next(s.value for s, n in SEVERITY.items() if n == diagnostic["severity"])
    if with_range:
        out["range"] = diagnostic["range"]
    if data:
        out["data"] = data
    return out


def _pointer_range(document: ParsedDocument, path: str, encoding: str) -> dict[str, Any] | None:
    """Where a pointer of a draft given as JSON lands in a (different) document text, if anywhere."""
    if document.value is None:
        return None
    span = document.span(path, "value")
    if span is None:
        return None
    (line, character), (end_line, end_character) = document.lines.range_to_positions(span[0], span[1], encoding)
    return {"start": {"line": line, "character": character}, "end": {"line": end_line, "character": end_character}}


def validate_text(session: Session, text: str, uri: str | None = None, draft: Any = None,
                  with_ranges: bool = True) -> dict[str, Any]:
    """The editor's diagnostics of `text` (as the document `uri`, or as the draft's engine file) in
    the SPEC shape: errors are the error-severity diagnostics, warnings the rest."""
    document = _editor_document(session, uri, text, draft)
    # as the editor sees the rest of the workspace (other unsaved documents included)
    workspace = overlay(session.editor_view() if session.editor_view else session.workspace(), [document])
    found = document_diagnostics(document, workspace, session.position_encoding, lookup_of=session.lookup)
    errors = [_entry(d, with_ranges) for d in found if d["severity"] == SEVERITY[Severity.ERROR]]
    warnings = [_entry(d, with_ranges) for d in found if d["severity"] != SEVERITY[Severity.ERROR]]
    return {"valid": not errors, "errors": errors, "warnings": warnings}


def validate(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A draft engine, not saved, checked exactly as the editor checks a document. With `uri` (or
    `text`) problems carry LSP ranges in that document; `{uri}` alone validates the document as the
    editor (or the disk) has it. A draft given as JSON is checked as its engine file would read."""
    draft = {k: v for k, v in params.items() if k not in DOCUMENT_KEYS}
    uri = params["uri"] if isinstance(params.get("uri"), str) else None
    text = params.get("text")
    if text is None and uri is not None:
        text = session.document_text(uri)
    if not isinstance(text, str):
        text = None
    if not draft:
        if text is None:  # nothing to read: an empty draft (its problems, without ranges)
            return validate_text(session, "{}", None, with_ranges=False)
        return validate_text(session, text, uri)
    if text is not None and parse_document(text, "draft.json").value == draft:
        return validate_text(session, text, uri, draft)  # the draft is the document: exact ranges
    serialised = json.dumps(draft, indent=2, ensure_ascii=False) + "\n"
    result = validate_text(session, serialised, None, draft, with_ranges=False)
    if text is not None:  # the draft differs from the document: ranges by pointer, where they land
        document = parse_document(text, "draft.json")
        for entry in (*result["errors"], *result["warnings"]):
            where = _pointer_range(document, entry["path"], session.position_encoding)
            if where is not None:
                entry["range"] = where
    return result


METHODS = (
    MethodSpec(PREFIX + "list", list_engines, EMPTY, summary="Every rule engine, sorted by id."),
    *crud_methods(PREFIX, lambda session: session.rule_engines, "rule-engine", "an engine",
                  "Store a new engine (ids generated for it and its rules when missing)."),
    MethodSpec(PREFIX + "addRule", add_rule, shape(engine_id="string", rule="object"), schema="rule-engine",
               summary="Append a rule to an engine."),
    MethodSpec(PREFIX + "updateRule", update_rule, shape(engine_id="string", rule_id="string", updates="object"),
               schema="rule-engine", summary="Merge top-level keys into one rule."),
    MethodSpec(PREFIX + "deleteRule", delete_rule, shape(engine_id="string", rule_id="string"),
               summary="Remove one rule."),
    MethodSpec(PREFIX + "evaluate", evaluate, shape(id="string?"), schema="assembly-request",
               summary="Evaluate one engine (by id) or every enabled one against a request."),
    MethodSpec(PREFIX + "traceLayout", trace_layout, shape(id="string", layout="string?"),
               summary="The static layout of an engine's compact trace (fields, operators, values, groups, "
                       "rules), by engine id and the layout key an answer carried."),
    MethodSpec(PREFIX + "possibleVariables", variables, EMPTY,
               summary="Every variable a rule or a memory definition reads, with where it is used."),
    MethodSpec(PREFIX + "validate", validate, shape(uri="string?", text="string?"), schema="rule-engine",
               summary="Validate a draft engine: errors with JSON pointers, codes and ranges."),
)
