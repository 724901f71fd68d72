"""The custom methods of SPEC §8, independent of any transport.

One module per method family (`assembly`, `rule_engines`, `persistent_memory`, `ingestion`,
`memory`), each exporting `METHODS`, collected into `table.METHODS`. Handlers take a `Session`
(one workspace), the params as plain JSON and a `CallContext`, and return plain JSON; the JSON-RPC
layer (`context_assembly.lsp`) registers the table once and only translates.

`Session` is imported on first use: it wires the whole engine, which a server answering
`initialize` does not need yet.
"""

from typing import TYPE_CHECKING, Any

from .call import CallContext, MethodSpec
from .table import IMPORTS, METHODS, NAMES, call

if TYPE_CHECKING:
    from .session import Session


def __getattr__(name: str) -> Any:
    if name == "Session":
        from .session import Session

        return Session
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["IMPORTS", "METHODS", "NAMES", "CallContext", "MethodSpec", "Session", "call"]
