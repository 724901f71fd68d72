"""Domain errors → JSON-RPC errors (SPEC §8).

`context_assembly.errors` gives each error class its code (InvalidParams -32602 with
`data.errors: [{path, message}]`, NotFound -32001, Conflict -32003, Timeout -32005, Storage -32006,
Cancelled -32800); anything else is -32603 with the exception's type and message (the traceback
goes to the server's log, not to the client).
"""

from __future__ import annotations

import logging

from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcServerNotInitialized

from ..errors import ContextAssemblyError

logger = logging.getLogger(__name__)


def to_rpc_error(exc: BaseException, method: str = "") -> JsonRpcException:
    if isinstance(exc, JsonRpcException):
        return exc
    if isinstance(exc, ContextAssemblyError):
        return JsonRpcException(message=exc.message, code=exc.code, data=exc.data or None)
    logger.error("%s failed", method or "a handler", exc_info=exc)
    return JsonRpcInternalError(f"{type(exc).__name__}: {exc}", data={"type": type(exc).__name__})


def not_initialized() -> JsonRpcException:
    return JsonRpcServerNotInitialized("the server is not initialized: send initialize first")
