"""Portable graph views: a declarative form that every graph backend runs with its own graph steps.

```json
{ "id": "dependents", "description": "What depends on a module",
  "params": { "name": {"type": "string"}, "limit": {"type": "integer", "default": 20} },
  "match":  { "instance": "default", "kind": "Module", "name": "$name" },
  "expand": { "depth": 1, "edge_kinds": ["DEPENDS_ON"], "direction": "in" },
  "limit": "$limit" }
```

`match` is an entity lookup: the nodes of `instance` (default "default") with the given `kind`,
`name` and/or `id`, by id. Without `expand` the rows are those nodes; with it, the nodes reached
from them (`neighbors`: breadth-first, `depth` 1-5, `edge_kinds`, `direction` both/out/in), each
with its `seed`, `distance` and `path`. `limit` (default 100) caps the rows. Any value may be a
parameter, written as the whole string `"$name"`: it is replaced by the bound value, never spliced
into text. Cypher views run on the embedded graph only; this form runs on every backend.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..errors import InvalidParamsError
from ..limits import current


class QueryText(str):
    """A view parameter as a URI's query string gave it (`graph://dependents?name=2024`): read as
    the view declares it. A string parameter takes the text as it is (a JSON-quoted one decoded),
    any other type its JSON; reading JSON first made "2024" and "true" no strings at all."""

    def read(self, kind: str) -> Any:
        text = str(self)
        if kind == "string" and not (len(text) >= 2 and text[0] == text[-1] == '"'):
            return text
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text


MATCH_KEYS = ("instance", "kind", "name", "id")
EXPAND_KEYS = ("depth", "edge_kinds", "direction")
DEFAULT_LIMIT = 100
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def _param_name(value: Any) -> str | None:
    found = _PARAM.fullmatch(value) if isinstance(value, str) else None
    return found.group(1) if found else None


def _values(portable: dict[str, Any]) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for section in ("match", "expand"):
        part = portable.get(section)
        if isinstance(part, dict):
            pairs += [(f"/{section}/{key}", value) for key, value in part.items()]
    if "limit" in portable:
        pairs.append(("/limit", portable["limit"]))
    return pairs


def parameters_of(portable: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for _, value in _values(portable):
        values = value if isinstance(value, list) else [value]
        names |= {name for name in map(_param_name, values) if name}
    return names


def check_portable(portable: dict[str, Any], declared: set[str]) -> list[dict[str, str]]:
    """Problems of a portable view's shape (values are checked again once bound)."""
    errors: list[dict[str, str]] = []
    match = portable.get("match")
    if not isinstance(match, dict) or not match:
        return [{"path": "/match", "message": "expected an object with instance, kind, name and/or id"}]
    errors += [{"path": f"/match/{key}", "message": f"unknown key (expected {', '.join(MATCH_KEYS)})"}
               for key in match if key not in MATCH_KEYS]
    if not any(key in match for key in ("kind", "name", "id")):
        errors.append({"path": "/match", "message": "name at least one of kind, name or id"})
    expand = portable.get("expand")
    if expand is not None and not isinstance(expand, dict):
        errors.append({"path": "/expand", "message": "expected an object {depth, edge_kinds, direction}"})
    elif isinstance(expand, dict):
        errors += [{"path": f"/expand/{key}", "message": f"unknown key (expected {', '.join(EXPAND_KEYS)})"}
                   for key in expand if key not in EXPAND_KEYS]
    errors += [{"path": "", "message": f"${name} is not declared in params"}
               for name in sorted(parameters_of(portable) - declared)]
    return errors


def _bind(value: Any, params: dict[str, Any]) -> Any:
    if isinstance(value, list):
        return [_bind(item, params) for item in value]
    name = _param_name(value)
    return params.get(name) if name else value


def run_portable(graph: Any, view_id: str, portable: dict[str, Any], params: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of a portable view on any `GraphStore` (with `find_nodes`), parameters bound."""
    match = {key: _bind(value, params) for key, value in portable["match"].items()}
    expanding = portable.get("expand") is not None  # `"expand": {}` expands with the defaults
    expand = {key: _bind(value, params) for key, value in (portable.get("expand") or {}).items()}
    limit = _bind(portable.get("limit", DEFAULT_LIMIT), params)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidParamsError(f"graph view {view_id!r}: limit must be a non-negative integer",
                                 [{"path": "/limit", "message": f"got {limit!r}"}])
    limits = current()
    limit = min(limit, limits.graph_view_rows)  # the rows one view returns, as a Cypher view's
    instance = match.get("instance") or "default"
    if "id" in match:
        found = graph.get_node(instance, match["id"])
        nodes = [found] if found and all(found[k] == match[k] for k in ("kind", "name") if k in match) else []
    else:  # the seeds of an expansion: as many as a listing may return (limits.graph_limit)
        seeds = min(max(limit, 1), limits.graph_limit) if not expanding else limits.graph_limit
        nodes = [n.as_dict() for n in graph.find_nodes(instance, kind=match.get("kind"), name=match.get("name"),
                                                       limit=seeds)]
    if not expanding:
        return nodes[:limit]
    return list(graph.neighbors(instance, [n["id"] for n in nodes], depth=expand.get("depth", 1),
                                edge_kinds=expand.get("edge_kinds"), limit=min(limit, limits.graph_limit),
                                direction=expand.get("direction", "both")))
