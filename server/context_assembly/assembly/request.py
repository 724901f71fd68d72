"""Stage 1 (validate), the part that needs no stores: is the request itself well-formed?"""

from __future__ import annotations

from typing import Any

import cattrs

from ..errors import InvalidParamsError
from ..model.converter import structure
from ..model.request import AssemblyRequest
from ..schemas import validation_errors


def parse_request(data: Any, nests_within: int | None = None) -> AssemblyRequest:
    """A request from its JSON form; InvalidParamsError lists every problem with its JSON path.
    `nests_within`: see `validation_errors` (a method's params: `CallContext.params_depth`)."""
    errors = validation_errors("assembly-request", data, nests_within=nests_within)
    if errors:
        raise InvalidParamsError("invalid assembly request", errors)
    try:
        return structure(data, AssemblyRequest)
    except cattrs.BaseValidationError as exc:  # the schema should have caught it; say so anyway
        raise InvalidParamsError("invalid assembly request",
                                 [{"path": "", "message": m} for m in cattrs.transform_error(exc)]) from None
