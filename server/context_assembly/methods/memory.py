"""`memory/read|write|delete|list`: the stores by §5.1 URI (`memory/event` is in ingestion.py)."""

from __future__ import annotations

from typing import Any

from .call import CallContext, MethodSpec
from .params import shape
from .session import Session

PREFIX = "memory/"


def read(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.memory.read(params["uri"])


def write(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    # the size is checked there, for every writer
    return session.memory.write(params["uri"], params["value"], key=params.get("idempotency_key"))


def delete(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return session.memory.delete(params["uri"])


def list_items(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    limit = params.get("limit")
    if limit is None:
        return session.memory.list(params["prefix"])
    limit = int(limit)
    items = session.memory.list(params["prefix"], limit=limit + 1)["items"]  # one more: were there others?
    return {"items": items[:limit], **({"truncated": True} if len(items) > limit else {})}


METHODS = (
    MethodSpec(PREFIX + "read", read, shape(uri="string"), summary="Read one URI: {uri, exists, value}."),
    MethodSpec(PREFIX + "write", write, shape(uri="string", value="any", idempotency_key="string?"),
               summary="Write one URI (an append with an idempotency key already used appends nothing)."),
    MethodSpec(PREFIX + "delete", delete, shape(uri="string"),
               summary="Delete one URI (log:// is append-only: refused)."),
    MethodSpec(PREFIX + "list", list_items, shape(prefix="string", limit="count?"),
               summary="Every item under a URI prefix (the first `limit` by URI, `truncated` when there were more)."),
)
