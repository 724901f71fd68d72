"""Validating an ingestion pipeline (SPEC §7, §8 `memoryIngestion/validate`): schema, then meaning.

Meaning checks: unknown processor types (did-you-mean), duplicate processor ids and output names,
an `input` or route `from` naming an output no earlier processor produces, a chunker overlap not
below its chunk size, `${variable}` parameters no event can fill, destinations with an unknown
scheme, `file://` (read-only), a scheme filled from a variable, unknown `{{variable}}` roots, URIs a
write would refuse, malformed conditions (the rule checks; payload, trigger and item fields are
allowed where they exist), custom entry points that are not installed, and a pipeline that writes
nowhere. Paths are JSON pointers into the document as written.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import re
from collections.abc import Collection
from typing import Any

from attrs import define, field

from ..documents.pointers import resolve_pointer
from ..errors import InvalidParamsError
from ..model.problems import Problem, Severity
from ..registry.ingestion import DESTINATION_SCHEMES, lookup_processor, processor_names
from ..registry.values import whole_number
from ..registry.variables import ADDVAR_PREFIX, SCOPE_PREFIX, field_problem
from ..rules.checks import LintContext, check_condition
from ..schemas import validation_errors
from ..stores.uri import parse_uri
from .processors import ENTRY_POINT_GROUP
from .templates import FIXED_ROOTS, PLACEHOLDER, names, placeholder_in_scheme

# Processors that write to a store themselves, so a pipeline made of them needs no route.
_SELF_WRITING = ("blob_store", "custom")
_DUMMY = "x"


@define
class _Walk:
    lint: LintContext
    custom_names: Collection[str]
    problems: list[Problem] = field(factory=list)
    outputs: dict[str, str] = field(factory=dict)  # output name -> processor type, in order

    def add(self, message: str, code: str, path: str, severity: Severity = Severity.ERROR, **data: Any) -> None:
        self.problems.append(Problem(message, code, severity, path=path, data=data))


def validate_pipeline(doc: Any, context: LintContext | None = None, *,
                      custom_names: Collection[str] = ()) -> dict[str, Any]:
    """`{valid, errors: [{path, message, code}], warnings: [{path, message, code, severity}]}`.

    `custom_names`: custom processors the engine was given besides the installed entry points.
    """
    schema = validation_errors("ingestion-pipeline", doc)
    problems = meaning_problems(doc, context, custom_names) if isinstance(doc, dict) else []
    loud = {p.path for p in problems if p.is_error}  # they say more than the schema at the same place
    errors = [{"path": e["path"], "message": e["message"], "code": "schema"}
              for e in schema if not any(e["path"] == p or e["path"].startswith(p + "/") for p in loud)]
    errors += [{"path": p.path, "message": p.message, "code": p.code} for p in problems if p.is_error]
    warnings = [{"path": p.path, "message": p.message, "code": p.code, "severity": str(p.severity)}
                for p in problems if not p.is_error]
    return {"valid": not errors, "errors": errors, "warnings": warnings}


def meaning_problems(doc: dict[str, Any], context: LintContext | None = None,
                     custom_names: Collection[str] = ()) -> list[Problem]:
    walk = _Walk(context or LintContext(), custom_names)
    config = doc.get("trigger_config")
    if isinstance(config, dict) and isinstance(config.get("where"), list):
        for i, cond in enumerate(config["where"]):
            _conditions(cond, f"/trigger_config/where/{i}", walk, item_fields=False)
    processors = doc.get("processors")
    if isinstance(processors, list):
        all_outputs = {_output(p) for p in processors if isinstance(p, dict)} - {None}
        seen_ids: dict[str, int] = {}
        for i, spec in enumerate(processors):
            if isinstance(spec, dict):
                _processor(spec, f"/processors/{i}", walk, all_outputs, seen_ids, i)
    routing = doc.get("routing")
    if isinstance(routing, list):
        for i, route in enumerate(routing):
            if isinstance(route, dict):
                _route(route, f"/routing/{i}", walk)
    if not (isinstance(routing, list) and routing) and not _has_self_writer(processors):
        walk.add("the pipeline has no routing: its results are not written anywhere", "no-routes",
                 "/routing" if "routing" in doc else "", Severity.WARNING)
    return walk.problems


def _has_self_writer(processors: Any) -> bool:
    return isinstance(processors, list) and any(
        isinstance(p, dict) and (p.get("type") in _SELF_WRITING or (p.get("type") == "vector_embed"
                                                                   and "collection" in p))
        for p in processors)


def _output(spec: dict[str, Any]) -> str | None:
    output = spec.get("output") or spec.get("id")
    return output if isinstance(output, str) else None


def _hints(word: str, choices: Collection[str]) -> list[str]:
    return difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)


def _mean(hints: list[str]) -> str:
    return f" (did you mean {', '.join(repr(h) for h in hints)}?)" if hints else ""


# -- processors


def _processor(spec: dict[str, Any], pointer: str, walk: _Walk, all_outputs: set[str | None],
               seen_ids: dict[str, int], index: int) -> None:
    kind = spec.get("type")
    registered = lookup_processor(kind) if isinstance(kind, str) else None
    if isinstance(kind, str) and registered is None:
        hints = _hints(kind, processor_names())
        walk.add(f"unknown processor type '{kind}'{_mean(hints)}", "unknown-processor", f"{pointer}/type",
                 candidates=hints)
    pid = spec.get("id")
    if isinstance(pid, str):
        if pid in seen_ids:
            walk.add(f"duplicate processor id '{pid}' (first used by processor {seen_ids[pid]})", "duplicate-id",
                     f"{pointer}/id")
        else:
            seen_ids[pid] = index
    source = spec.get("input")
    if isinstance(source, str):
        _reference(source, f"{pointer}/input", walk, all_outputs, "input")
    output = _output(spec)
    if output is not None:
        where = f"{pointer}/output" if "output" in spec else f"{pointer}/id"
        if output.split(".")[0] == "payload" or output in FIXED_ROOTS or "." in output:
            walk.add(f"'{output}' cannot name an output: it is reserved or has a '.' (paths use dots)",
                     "reserved-output", where)
        elif output in walk.outputs:
            walk.add(f"output '{output}' is already produced by an earlier processor", "duplicate-output", where)
        walk.outputs.setdefault(output, str(kind))
    if kind == "chunker":
        size, overlap = whole_number(spec.get("chunk_size", 400)), whole_number(spec.get("overlap", 50))
        if size is not None and overlap is not None and overlap >= size:
            walk.add(f"overlap ({overlap}) must be less than chunk_size ({size})", "invalid-overlap",
                     f"{pointer}/overlap")
    if kind == "custom" and isinstance(spec.get("entry_point"), str):
        name = spec["entry_point"]
        if name not in walk.custom_names and not _entry_point_installed(name):
            walk.add(f"no custom processor '{name}' is installed (entry point group {ENTRY_POINT_GROUP})",
                     "unknown-entry-point", f"{pointer}/entry_point", Severity.WARNING)
    if kind == "blob_store" and isinstance(spec.get("key"), str):
        _template_names(spec["key"], f"{pointer}/key", walk)
    if registered is not None:
        for name, value in spec.items():
            if isinstance(value, str) and value.startswith("${") and value.endswith("}") and registered.param(name):
                _event_variable(value[2:-1].strip(), f"{pointer}/{name}", walk)


def _entry_point_installed(name: str) -> bool:
    return any(name in (e.name, e.value) for e in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _reference(source: str, pointer: str, walk: _Walk, all_outputs: set[str | None], what: str) -> None:
    head = source.split(".")[0]
    if head == "payload" or head in walk.outputs:
        return
    if head in all_outputs:
        walk.add(f"{what} '{source}' is produced only by a later processor (processors run in order)",
                 "unknown-output", pointer)
        return
    known = ["payload", *walk.outputs]
    hints = _hints(head, known)
    walk.add(f"{what} '{source}' names no earlier output{_mean(hints)} (known: {', '.join(known)})",
             "unknown-output", pointer, candidates=hints)


def _event_variable(name: str, pointer: str, walk: _Walk) -> None:
    if name == "trigger" or name == "payload" or name.startswith("payload."):
        return
    problem = field_problem(name) if name.startswith((SCOPE_PREFIX, ADDVAR_PREFIX)) else \
        f"'{name}' is not an event variable: use payload.<path>, trigger, scope.<scope>.<field> or addVar.<name>"
    if problem:
        walk.add(f"${{{name}}}: {problem}", "unknown-variable", pointer)


# -- routing


def _route(route: dict[str, Any], pointer: str, walk: _Walk) -> None:
    source = route.get("from", "payload")
    if isinstance(source, str):
        _reference(source, f"{pointer}/from", walk, set(walk.outputs), "from")
    target = route.get("write_to")
    if isinstance(target, str):
        _destination(target, f"{pointer}/write_to", walk, source if isinstance(source, str) else "payload")
    condition = route.get("condition")
    if isinstance(condition, list):
        for i, cond in enumerate(condition):
            _conditions(cond, f"{pointer}/condition/{i}", walk, item_fields=True)
    elif condition is not None:
        _conditions(condition, f"{pointer}/condition", walk, item_fields=True)


def _destination(target: str, pointer: str, walk: _Walk, source: str) -> None:
    if placeholder_in_scheme(target):
        walk.add("the destination's scheme must be written out, not filled from a {{variable}}", "template-scheme",
                 pointer)
        return
    scheme = target.split("://", 1)[0].lower() if "://" in target else ""
    if scheme == "file":
        walk.add("file:// is read-only: routing cannot write workspace files", "read-only-destination", pointer)
        return
    if scheme not in DESTINATION_SCHEMES:
        hints = _hints(scheme, DESTINATION_SCHEMES)
        walk.add(f"unknown destination scheme '{scheme}://'{_mean(hints)} (known: "
                 + ", ".join(f"{s}://" for s in DESTINATION_SCHEMES) + ")", "unknown-scheme", pointer,
                 candidates=hints)
        return
    if not _template_names(target, pointer, walk):
        return
    try:
        parsed = parse_uri(_fill_dummy(target))
    except InvalidParamsError as exc:
        walk.add(f"the destination cannot be written: {exc.message}", "invalid-uri", pointer)
        return
    if parsed.params:
        walk.add("a destination takes no ?query: query parameters only apply to reads", "invalid-uri", pointer)
    elif scheme == "log" and len(parsed.parts) == 2:
        walk.add("the event log is append-only: write log://<instance>", "invalid-uri", pointer)
    elif scheme == "working" and len(parsed.parts) == 1:
        walk.add("name a key: working://<thread_id>/<key>", "invalid-uri", pointer)
    elif scheme == "graph" and len(parsed.parts) == 1 and walk.outputs.get(source.split(".")[0]) != "llm_extract_kb":
        walk.add("graph://<instance> takes a {nodes, edges} value (an llm_extract_kb output); otherwise write "
                 "graph://<instance>/node/<id> or …/edge/<id>", "graph-destination", pointer, Severity.WARNING)


def _fill_dummy(template: str) -> str:
    return PLACEHOLDER.sub(_DUMMY, template)


_DOLLAR = re.compile(r"\$\{\s*([^{}]*?)\s*\}")


def _template_names(template: str, pointer: str, walk: _Walk) -> bool:
    """Check every `{{variable}}` root; False when one is unknown (or written `${…}`, the syntax of
    memory steps, which a destination writes literally: every event then wrote one key)."""
    ok = True
    for match in _DOLLAR.finditer(template):
        walk.add(f"'{match.group(0)}' is written as it is: a destination fills {{{{{match.group(1)}}}}}",
                 "unknown-variable", pointer)
        ok = False
    for name in names(template):
        head, *rest = name.split(".")
        problem = None
        if head in ("scope", "addVar"):
            problem = field_problem(name)
        elif head in ("trigger", "execution_id", "pipeline_id", "date", "timestamp", "index") and rest:
            problem = f"'{head}' has no fields"
        elif head not in FIXED_ROOTS and head not in walk.outputs:
            hints = _hints(head, [*FIXED_ROOTS, *walk.outputs])
            problem = f"unknown template variable root '{head}'{_mean(hints)} (known: " \
                      + ", ".join([*FIXED_ROOTS, *walk.outputs]) + ")"
        if problem:
            walk.add(f"{{{{{name}}}}}: {problem}", "unknown-variable", pointer)
            ok = False
    return ok


# -- conditions


def _conditions(cond: Any, pointer: str, walk: _Walk, *, item_fields: bool) -> None:
    for problem in check_condition(cond, pointer, walk.lint):
        if not _tolerated(problem, cond, pointer, item_fields):
            walk.problems.append(problem)


def _tolerated(problem: Problem, cond: Any, pointer: str, item_fields: bool) -> bool:
    """Event fields (payload, trigger) are not request variables; nor are a routed element's fields."""
    if problem.code != "unknown-variable" or not problem.path.endswith("/field"):
        return False
    name = resolve_pointer(cond, problem.path[len(pointer):])
    if not isinstance(name, str):
        return False
    if name == "trigger" or name == "payload" or name.startswith("payload."):
        return True
    if item_fields:  # item.<path>, index, or the element's own fields (`score`); variables stay checked
        return not name.startswith((SCOPE_PREFIX, ADDVAR_PREFIX))
    return False


__all__ = ["meaning_problems", "validate_pipeline"]
