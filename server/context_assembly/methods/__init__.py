"""The custom methods of SPEC §8, independent of any transport.

One module per method family (`assembly`, `rule_engines`, `persistent_memory`, `ingestion`,
`memory`), each exporting `METHODS`, collected into `table.METHODS`. Handlers take a `Session`
(one workspace), the params as plain JSON and a `CallContext`, and return plain JSON; the JSON-RPC
layer (`context_assembly.lsp`) registers the table once and only translates.
"""

from .call import CallContext, MethodSpec
from .session import Session
from .table import METHODS, call

__all__ = ["METHODS", "CallContext", "MethodSpec", "Session", "call"]
