"""Named graph views: `.codebolt/knowledgegraph/views/{id}.json` (schemas/graph-view.schema.json).

A view is `{id, description, cypher, params: {name: {type, description, default}}}`, or, in the
portable form every backend runs, `{id, description, match, expand?, limit?, params}` (see
`stores.graph_views`) instead of `cypher`. Loading checks the file and that its Cypher only reads;
binding checks a request's values against the declared params (unknown, missing, wrongly typed →
InvalidParamsError) and fills defaults. Values are handed to the database as query parameters (or,
in the portable form, substituted for whole `"$name"` values), never put into the query text.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import orjson
from attrs import frozen

from ...errors import InvalidParamsError, NotFoundError
from ...limits import current
from ...registry.values import json_type
from ...workspace.layout import WorkspaceLayout
from ..graph_views import QueryText
from .cypher import parameter_names, read_only_problems

VIEW_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PARAM_TYPES = ("string", "number", "integer", "boolean", "array", "object")
MAX_VIEW_BYTES = 256 * 1024
_COUNTED = re.compile(r"\b(?:LIMIT|SKIP)\s+\$([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)

_NO_DEFAULT = object()


@frozen
class ViewParam:
    name: str
    type: str = "string"
    description: str = ""
    default: Any = _NO_DEFAULT

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT


@frozen
class GraphView:
    id: str
    cypher: str  # "" for a portable view
    params: tuple[ViewParam, ...] = ()
    description: str = ""
    portable: dict[str, Any] | None = None  # {match, expand?, limit?}: the declarative form

    @property
    def is_cypher(self) -> bool:
        return self.portable is None

    def bind(self, values: dict[str, Any]) -> dict[str, Any]:
        """The query parameters for `values`: checked, defaults filled, unused ones left out."""
        if not isinstance(values, dict):
            raise InvalidParamsError(f"view {self.id!r}: params must be an object",
                                     [{"path": "/params", "message": "expected an object"}])
        declared = {param.name: param for param in self.params}
        errors = [{"path": f"/params/{_pointer(name)}", "message": f"unknown parameter {name!r} of view {self.id!r}"}
                  for name in values if name not in declared]
        bound: dict[str, Any] = {}
        for name, param in declared.items():
            if name in values:
                value, problem = _coerce(values[name], param.type)
            elif not param.required:
                value, problem = param.default, None
            else:
                value, problem = None, f"missing parameter {name!r} ({param.type})"
            if problem:
                errors.append({"path": f"/params/{_pointer(name)}", "message": problem})
            else:
                bound[name] = value
        errors += _range_problems(self.cypher, bound)
        if errors:
            raise InvalidParamsError(f"bad parameters for graph view {self.id!r}", errors)
        used = parameter_names(self.cypher) if self.portable is None else portable_parameters(self.portable)
        # Kuzu refuses a parameter the query does not use, so declared-but-unused ones stay out.
        return {name: value for name, value in bound.items() if name in used}


def view_path(layout: WorkspaceLayout, view_id: str) -> Path:
    if not isinstance(view_id, str) or not VIEW_ID.fullmatch(view_id):
        raise InvalidParamsError(f"bad graph view id {view_id!r}",
                                 [{"path": "/view", "message": "expected letters, digits, '_', '.', '-'"}])
    return layout.graph_views_dir / f"{view_id}.json"


# path -> ((mtime_ns, size, inode) of the file it was parsed from, the view): a view file is read
# and checked once per version, not on every run (the checks scan the Cypher character by character)
_PARSED: dict[Path, tuple[tuple[int, int, int], GraphView]] = {}
_MAX_PARSED = 1024


def load_view(layout: WorkspaceLayout, view_id: str) -> GraphView:
    """Read and check the view file; NotFoundError when there is none."""
    path = view_path(layout, view_id)
    try:
        if not path.resolve().is_relative_to(layout.root.resolve()):  # a symlink leaving the workspace
            raise NotFoundError(f"graph view {view_id!r} points outside the workspace")
        with path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
            parsed = _PARSED.get(path)
            if parsed is not None and parsed[0] == stamp:
                return parsed[1]
            raw = handle.read(MAX_VIEW_BYTES + 1)
    except FileNotFoundError as exc:
        raise NotFoundError(f"no graph view {view_id!r} in .codebolt/knowledgegraph/views/") from exc
    except OSError as exc:
        raise NotFoundError(f"cannot read graph view {view_id!r}: {exc.strerror}") from exc
    if len(raw) > MAX_VIEW_BYTES:
        raise _bad(view_id, "", f"the file is larger than {MAX_VIEW_BYTES} bytes")
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _bad(view_id, "", f"not valid JSON: {exc}") from exc
    view = parse_view(view_id, document)
    if len(_PARSED) >= _MAX_PARSED:
        _PARSED.clear()
    _PARSED[path] = (stamp, view)
    return view


def parse_view(view_id: str, document: Any) -> GraphView:
    if not isinstance(document, dict):
        raise _bad(view_id, "", "expected an object")
    errors: list[dict[str, Any]] = []
    if document.get("id", view_id) != view_id:
        errors.append({"path": "/id", "message": f"the id must match the file name {view_id!r}"})
    if "match" in document and "cypher" not in document:
        return _parse_portable(view_id, document)
    cypher = document.get("cypher")
    if not isinstance(cypher, str) or not cypher.strip():
        errors.append({"path": "/cypher", "message": "expected a non-empty Cypher query (or a portable match)"})
        cypher = ""
    description = document.get("description", "")
    if not isinstance(description, str):
        errors.append({"path": "/description", "message": "expected a string"})
        description = ""
    params = _parse_params(document.get("params", {}), errors)
    if cypher:
        errors.extend({"path": "/cypher", "message": problem} for problem in read_only_problems(cypher))
        declared = {param.name for param in params}
        errors.extend({"path": "/cypher", "message": f"${name} is not declared in params"}
                      for name in sorted(parameter_names(cypher) - declared))
    if errors:
        raise InvalidParamsError(f"graph view {view_id!r} is invalid", errors)
    return GraphView(id=view_id, cypher=cypher.strip().rstrip(";"), params=params, description=description)


def _parse_portable(view_id: str, document: dict[str, Any]) -> GraphView:
    from ..graph_views import check_portable  # late: the portable form's own module

    errors: list[dict[str, Any]] = []
    if document.get("id", view_id) != view_id:
        errors.append({"path": "/id", "message": f"the id must match the file name {view_id!r}"})
    description = document.get("description", "")
    if not isinstance(description, str):
        errors.append({"path": "/description", "message": "expected a string"})
        description = ""
    params = _parse_params(document.get("params", {}), errors)
    portable: dict[str, Any] = {key: document[key] for key in ("match", "expand", "limit") if key in document}
    errors += check_portable(portable, {param.name for param in params})
    if errors:
        raise InvalidParamsError(f"graph view {view_id!r} is invalid", errors)
    return GraphView(id=view_id, cypher="", params=params, description=description, portable=portable)


def portable_parameters(portable: dict[str, Any]) -> set[str]:
    from ..graph_views import parameters_of

    return parameters_of(portable)


def _parse_params(raw: Any, errors: list[dict[str, Any]]) -> tuple[ViewParam, ...]:
    if not isinstance(raw, dict):
        errors.append({"path": "/params", "message": "expected an object"})
        return ()
    params: list[ViewParam] = []
    for name, spec in raw.items():
        path = f"/params/{_pointer(name)}"
        if not PARAM_NAME.fullmatch(name):
            errors.append({"path": path, "message": "a parameter name must be an identifier"})
            continue
        if not isinstance(spec, dict):
            errors.append({"path": path, "message": "expected an object {type, description, default}"})
            continue
        kind = spec.get("type", "string")
        if kind not in PARAM_TYPES:
            errors.append({"path": f"{path}/type", "message": f"expected one of {', '.join(PARAM_TYPES)}"})
            continue
        default = spec.get("default", _NO_DEFAULT)
        if default is not _NO_DEFAULT:
            default, problem = _coerce(default, kind)
            if problem:  # still declared (the view is refused anyway): its uses are not undeclared too
                errors.append({"path": f"{path}/default", "message": problem})
        params.append(ViewParam(name=name, type=kind, description=str(spec.get("description", "")), default=default))
    return tuple(params)


def _coerce(value: Any, kind: str) -> tuple[Any, str | None]:
    """`value` as the declared JSON type (20.0 → 20 for integer), or why it is not one."""
    if isinstance(value, QueryText):
        value = value.read(kind)
    if kind in ("array", "object"):
        try:
            value = _uniform(value)
        except ValueError as exc:
            return value, str(exc)
    ok: bool
    if kind == "string":
        ok = isinstance(value, str)
    elif kind == "boolean":
        ok = isinstance(value, bool)
    elif kind == "integer":
        if isinstance(value, float) and not isinstance(value, bool) and value.is_integer():
            value = int(value)
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    elif kind == "array":
        ok = isinstance(value, list)
    else:
        ok = isinstance(value, dict)
    return value, None if ok else f"expected {kind}, got {json_type(value, integers=True)}"


def _uniform(value: Any) -> Any:
    """An array or object as the graph engine binds it: the objects of one list as one struct, by
    position, so each is given the first one's key order (a different order swapped their values:
    `[{"note": "hot", "id": "a"}, {"id": "b", …}]` bound id "hot"), and objects with other keys are
    refused rather than bound wrongly."""
    if isinstance(value, dict):
        return {key: _uniform(item) for key, item in value.items()}
    if not isinstance(value, list):
        return value
    items = [_uniform(item) for item in value]
    objects = [item for item in items if isinstance(item, dict)]
    if not objects:
        return items
    keys = list(objects[0])
    if len(objects) != len(items) or any(set(item) != set(keys) for item in objects):
        raise ValueError("the objects of a list need the same keys (the graph binds them as one structure)")
    return [{key: item[key] for key in keys} for item in items]


_INT64 = (-(2**63), 2**63 - 1)


def _range_problems(cypher: str, bound: dict[str, Any]) -> list[dict[str, Any]]:
    """Integers the database cannot take: beyond 64 bits anywhere, outside 0..rows after LIMIT or SKIP
    (Kuzu would answer with its own internals)."""
    counted = {match.group(1) for match in _COUNTED.finditer(cypher)}
    rows = current().graph_view_rows
    problems = []
    for name, value in bound.items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        low, high = (0, rows) if name in counted else _INT64
        if not low <= value <= high:
            what = "a LIMIT or SKIP count" if name in counted else "a 64-bit integer"
            problems.append({"path": f"/params/{_pointer(name)}",
                             "message": f"{value} is out of range: {what} must be from {low} to {high}"
                                        + (" (limits.graph_view_rows)" if name in counted else "")})
    return problems


def _pointer(name: str) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")


def _bad(view_id: str, path: str, message: str) -> InvalidParamsError:
    return InvalidParamsError(f"graph view {view_id!r} is invalid: {message}", [{"path": path, "message": message}])
