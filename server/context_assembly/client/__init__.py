"""The agent-side Python client of the Context Assembly sidecar (SPEC §8).

`ContextAssemblyClient` (async) and `SyncContextAssemblyClient` (blocking) start
`python -m context_assembly serve`, initialise it on a workspace and call every custom method;
errors are raised as the domain exceptions of `context_assembly.errors`. `run` runs a coroutine
on an event loop that polls for the sidecar's answers (event_loop.py). `TraceLayouts` expands
compact answers (`trace_format: "compact"`) into the full answer.
"""

from ..errors import (
    CancelledError,
    ConflictError,
    ContextAssemblyError,
    ForbiddenError,
    InvalidParamsError,
    NotFoundError,
    StorageError,
    TimeoutError_,
)
from .client import ContextAssemblyClient
from .compact_trace import LayoutError, TraceLayouts
from .connection import Connection, ConnectionLost, RpcError, error_from
from .event_loop import event_loop_factory, run
from .sync import SyncContextAssemblyClient

__all__ = [
    "CancelledError",
    "ConflictError",
    "Connection",
    "ConnectionLost",
    "ContextAssemblyClient",
    "ContextAssemblyError",
    "ForbiddenError",
    "InvalidParamsError",
    "LayoutError",
    "NotFoundError",
    "RpcError",
    "StorageError",
    "SyncContextAssemblyClient",
    "TimeoutError_",
    "TraceLayouts",
    "error_from",
    "event_loop_factory",
    "run",
]
