"""The one table of custom methods (SPEC §8) and the call path every transport uses."""

from __future__ import annotations

from typing import Any

from ..documents.nesting import value_too_deep
from ..errors import InvalidParamsError
from . import assembly, ingestion, memory, persistent_memory, replay, rule_engines, testing
from .access import current_method
from .call import CallContext, MethodSpec
from .params import check, require_object
from .session import Session

FAMILIES = (assembly, rule_engines, persistent_memory, ingestion, memory, testing, replay)

METHODS: dict[str, MethodSpec] = {spec.name: spec for family in FAMILIES for spec in family.METHODS}


def call(session: Session, method: str, params: Any, ctx: CallContext | None = None) -> Any:
    """Run one method: the caller's access to it, its params checked against its envelope, then its
    handler (which reads and writes memory through the session's access). Domain errors propagate."""
    spec = METHODS[method]
    serving = current_method.set(method)
    try:
        session.access.check_method(method)
        body = require_object(params)
        depth = session.limits().nesting_depth
        if value_too_deep(body, depth):  # before anything below recurses over it (copies, schemas, structuring)
            message = f"the params are nested too deeply (more than {depth} levels, limits.nesting_depth)"
            raise InvalidParamsError(message, [{"path": "", "message": message}])
        check(body, spec.params)
        return spec.handler(session, body, ctx or CallContext())
    finally:
        current_method.reset(serving)
