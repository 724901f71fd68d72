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
    return session.memory.list(params["prefix"])


METHODS = (
    MethodSpec(PREFIX + "read", read, shape(uri="string"), summary="Read one URI: {uri, exists, value}."),
    MethodSpec(PREFIX + "write", write, shape(uri="string", value="any", idempotency_key="string?"),
               summary="Write one URI (an append with an idempotency key already used appends nothing)."),
    MethodSpec(PREFIX + "delete", delete, shape(uri="string"),
               summary="Delete one URI (log:// is append-only: refused)."),
    MethodSpec(PREFIX + "list", list_items, shape(prefix="string"), summary="Every item under a URI prefix."),
)
