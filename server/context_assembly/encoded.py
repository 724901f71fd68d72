"""Lists whose items' JSON was encoded once, ahead of the answers that carry them.

An `evaluateRules` answer with `"explain": "none"` lists each matched rule
as a dict that is the same on every request it matches: its id, name, priority, memories. Those
dicts are shared templates already (trace.py); `EncodedList` carries, beside them, each one's
JSON bytes, encoded when the template was made, so that writing an answer copies bytes instead of
walking ~250 (`medium`) to ~1,900 (`large`) dicts again. To Python it is the plain list of those
dicts (tests, the CLI, in-process callers read it as such); `encode_json` (lsp/framing.py) writes
it as the bytes, which are exactly what orjson would have written for the items. A caller that
only writes the answer (`CallContext.encodes`: the JSON-RPC layer) gets such a part as
`EncodedJSON` instead, its bytes alone, without the Python values beside them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


def encoded(value: Any) -> bytes | None:
    """The value's JSON as `EncodedList` items carry it (None when orjson cannot encode it: an
    integer beyond 64 bits, a lone surrogate; such a list is left plain)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return None


class EncodedList(list[Any]):
    """A list of JSON values and, in `pieces`, each one's JSON (orjson's bytes, in order)."""

    __slots__ = ("pieces",)

    def __init__(self, items: Iterable[Any], pieces: list[bytes]) -> None:
        super().__init__(items)
        self.pieces = pieces

    def fragment(self) -> orjson.Fragment | list[Any]:
        """The list's JSON, as orjson embeds it unchanged (the plain list when it was changed since)."""
        if len(self.pieces) != len(self):
            return list(self)
        return orjson.Fragment(b"[" + b",".join(self.pieces) + b"]")


class EncodedJSON:
    """A JSON value as orjson's bytes, standing in for it in an answer that is only written:
    `encode_json` embeds the bytes unchanged."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def value(self) -> Any:
        """The JSON value itself (decoded)."""
        return orjson.loads(self.data)


def plain_subclass(value: Any) -> Any:
    """An instance of a subclass of a JSON type as that type (what orjson writes for it without
    OPT_PASSTHROUGH_SUBCLASS), an `EncodedList` or `EncodedJSON` as its bytes; NotImplemented for
    anything else."""
    if isinstance(value, EncodedList):
        return value.fragment()
    if isinstance(value, EncodedJSON):
        return orjson.Fragment(value.data)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int | float):
        return (int if isinstance(value, int) else float)(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return NotImplemented
