"""What a method handler gets besides its params, and how a method is declared.

A handler is `(session, params, ctx) -> dict`: plain JSON in, plain JSON out (parts of it
pre-encoded when `ctx.encodes`), domain errors (`context_assembly.errors`) raised. It knows
nothing of the transport: the JSON-RPC layer builds the `CallContext` (notifications,
cancellation, `$/progress`, the client's LLM, that it only encodes the result), the CLI or a test
can build one with the defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from attrs import define, field, frozen

from .params import Shape

if TYPE_CHECKING:
    from .session import Session

Emit: TypeAlias = Callable[[str, dict[str, Any]], None]  # (full method name, payload)
Progress: TypeAlias = Callable[[str, "int | None"], None]  # (message, percentage 0-100 or None)
Llm: TypeAlias = Callable[[dict[str, Any]], dict[str, Any]]  # llm/complete request -> result


def _ignore_event(method: str, payload: dict[str, Any]) -> None:
    del method, payload


def _ignore_progress(message: str, percentage: int | None) -> None:
    del message, percentage


def _never() -> bool:
    return False


@define
class CallContext:
    """One call's link back to the caller. Every callable is safe to use from a worker thread."""

    emit: Emit = field(default=_ignore_event)
    cancelled: Callable[[], bool] = field(default=_never)
    progress: Progress = field(default=_ignore_progress)
    llm: Llm | None = None  # None: the client did not offer llm/complete
    params_depth: int | None = None  # `call` found the params nested at most this deep (None: not checked)
    # The caller only writes the result as JSON (`lsp.framing.encode_json`) and reads nothing of it:
    # parts of it may come as their JSON bytes (`encoded.EncodedJSON`) instead of Python values.
    encodes: bool = False


Handler: TypeAlias = Callable[["Session", dict[str, Any], CallContext], Any]


@frozen
class MethodSpec:
    name: str  # the JSON-RPC method, e.g. "contextAssembly/assemble"
    handler: Handler
    params: Shape | None = None  # the envelope keys checked before the handler runs
    schema: str | None = None  # the published JSON Schema the handler checks its document against
    long_running: bool = False  # reports $/progress and honours cancellation
    events: tuple[str, ...] = ()  # notifications it may send
    summary: str = ""
