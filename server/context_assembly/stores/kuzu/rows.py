"""Graph engine values → the store's JSON-ready shapes.

LadybugDB hands back nodes and relationships as dicts with internal keys (`_ID`, `_LABEL`, `_SRC`,
...; Kuzu spelled them in lower case), paths as `{_NODES, _RELS}` and temporal/decimal/UUID values as
Python objects; callers get plain JSON instead, with an entity's `attributes` parsed from its JSON text.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

import orjson

from ..graph import GraphEdge, GraphNode

NODE_TABLE = "Entity"
_INTERNAL = frozenset({"_ID", "_SRC", "_DST"})
REL_TABLE = "Relates"


def attributes_of(text: Any) -> dict[str, Any]:
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"_raw": text}  # written by hand through Cypher: keep it visible rather than drop it
    return value if isinstance(value, dict) else {"_value": value}


def node_from(props: dict[str, Any]) -> GraphNode:
    return GraphNode(instance=props.get("instance") or "", id=props.get("id") or "", kind=props.get("kind") or "",
                     name=props.get("name") or "", attributes=attributes_of(props.get("attributes")))


def edge_from(props: dict[str, Any]) -> GraphEdge:
    return GraphEdge(instance=props.get("instance") or "", id=props.get("id") or "", kind=props.get("kind") or "",
                     from_id=props.get("from_id") or "", to_id=props.get("to_id") or "",
                     attributes=attributes_of(props.get("attributes")))


def to_json(value: Any) -> Any:
    """A value from a view's result row as JSON-ready data."""
    if isinstance(value, dict):
        label = value.get("_LABEL")
        if label == NODE_TABLE and "_ID" in value:
            return node_from(value).as_dict()
        if label == REL_TABLE and "_SRC" in value:
            return edge_from(value).as_dict()
        if "_NODES" in value and "_RELS" in value:
            return {"nodes": [to_json(node) for node in value["_NODES"]],
                    "edges": [to_json(rel) for rel in value["_RELS"]]}
        return {str(key): to_json(item) for key, item in value.items() if key not in _INTERNAL}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value
