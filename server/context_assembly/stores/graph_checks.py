"""Input checks and bounds of the knowledge graph, shared by every graph backend.

Both `stores.kuzu.graph` and `stores.postgres.graph` check instance names, ids, kinds, display
names, attributes and expansion arguments here, so a bad input is refused with the same message
and JSON pointer on each.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..errors import InvalidParamsError
from ..limits import GRAPH_DEPTH, GRAPH_LIMIT, current

# In UTF-8 bytes, on every backend: PostgreSQL indexes ids, kinds and names beside the project and
# instance, and an index entry holds at most 2,704 bytes (kind and id share one: 2 x 1,024 fits)
MAX_ID_BYTES = 1024
MAX_NAME_BYTES = 2048
MAX_DEPTH = GRAPH_DEPTH  # the defaults; a call checks against its session's `current()` limits
MAX_LIMIT = GRAPH_LIMIT
# Edges read per expansion level: bounds the work a hub node can cause.
MAX_LEVEL_EDGES = 10_000
DIRECTIONS = ("both", "out", "in")

_INSTANCE = re.compile(r"[^/\x00-\x1f\x7f]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def invalid(path: str, message: str) -> InvalidParamsError:
    return InvalidParamsError(f"{path or 'input'}: {message}", [{"path": path, "message": message}])


def check_instance(instance: Any) -> str:
    if not isinstance(instance, str) or not _INSTANCE.fullmatch(instance):
        raise invalid("/instance", "a graph instance name is 1-128 characters without '/' or control characters")
    return instance


def check_text(value: Any, path: str) -> str:
    """An id or a kind: non-empty, bounded, no control characters."""
    if not isinstance(value, str):
        raise invalid(path, "expected a string")
    if not value:
        raise invalid(path, "must not be empty")
    if _bytes(value) > MAX_ID_BYTES:
        raise invalid(path, f"longer than {MAX_ID_BYTES} bytes of UTF-8")
    if _CONTROL.search(value):
        raise invalid(path, "must not contain control characters")
    return value


def check_name(value: Any, path: str) -> str:
    """A display name: any text, possibly empty."""
    if not isinstance(value, str):
        raise invalid(path, "expected a string")
    if _bytes(value) > MAX_NAME_BYTES:
        raise invalid(path, f"longer than {MAX_NAME_BYTES} bytes of UTF-8")
    return value


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_attributes(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("/attributes", "expected an object")
    try:
        return dict(orjson.loads(orjson.dumps(value)))  # a JSON round trip: what is stored is what is returned
    except TypeError as exc:
        raise invalid("/attributes", f"not JSON: {exc}") from exc


def attributes_json(attributes: dict[str, Any]) -> str:
    return orjson.dumps(attributes).decode()


def check_count(value: Any, path: str, maximum: int, limit: str | None = None) -> int:
    """An integer in 0..maximum; `limit` names the setting that holds the maximum."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise invalid(path, f"expected an integer from 0 to {maximum}" + (f" (limits.{limit})" if limit else ""))
    return value


def check_graph_limit(value: Any) -> int:
    """The `limit` of a graph listing or expansion, within limits.graph_limit."""
    return check_count(value, "/limit", current().graph_limit, "graph_limit")


def check_expansion(node_ids: Any, depth: Any, edge_kinds: Any, limit: Any,
                    direction: Any) -> tuple[list[str], int, list[str], int]:
    """The arguments of `neighbors`, checked: (seeds, depth, edge kinds, limit)."""
    if not isinstance(node_ids, list):
        raise invalid("/node_ids", "expected a list of node ids")
    seeds = [check_text(node_id, f"/node_ids/{index}") for index, node_id in enumerate(node_ids)]
    depth = check_count(depth, "/depth", current().graph_depth, "graph_depth")
    limit = check_graph_limit(limit)
    if edge_kinds is not None and not isinstance(edge_kinds, list):
        raise invalid("/edge_kinds", "expected a list of edge kinds")
    kinds = [check_text(kind, f"/edge_kinds/{index}") for index, kind in enumerate(edge_kinds or [])]
    if direction not in DIRECTIONS:
        raise invalid("/direction", f"expected one of {', '.join(DIRECTIONS)}")
    return seeds, depth, kinds, limit
