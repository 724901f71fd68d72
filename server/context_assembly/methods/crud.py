"""The `get`, `create`, `update` and `delete` methods every definition family has (SPEC §8), made
once over the family's repository (`workspace/repository.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..workspace.repository import DefinitionRepository
from .call import CallContext, MethodSpec
from .params import shape
from .session import Session

Repository = Callable[[Session], DefinitionRepository]


def crud_methods(prefix: str, repository: Repository, schema: str, noun: str,
                 create_summary: str | None = None) -> tuple[MethodSpec, ...]:
    """`{prefix}get|create|update|delete` over `repository(session)`; `noun` names one definition
    in the summaries ("an engine", "a definition")."""

    def get(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return repository(session).get(params["id"])

    def create(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return repository(session).create(params)

    def update(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return repository(session).update(params["id"], params["updates"])

    def delete(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return repository(session).delete(params["id"])

    bare = noun.split(" ", 1)[1]
    return (
        MethodSpec(prefix + "get", get, shape(id="string"), summary=f"One {bare}."),
        MethodSpec(prefix + "create", create, schema=schema, summary=create_summary or f"Store a new {bare}."),
        MethodSpec(prefix + "update", update, shape(id="string", updates="object"), schema=schema,
                   summary=f"Merge top-level keys into {noun}."),
        MethodSpec(prefix + "delete", delete, shape(id="string"), summary=f"Remove {noun}'s file."),
    )


__all__ = ["crud_methods"]
