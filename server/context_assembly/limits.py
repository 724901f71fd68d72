"""Every size limit of the server, in one table (README "Running it for a team").

Each limit has a default here; those marked `settable` can be changed in the settings (`limits`
object of `.codebolt/context-assembly.json` or the client's configuration). A value past a limit
is refused with a clear error that names the limit; nothing is cut silently. The stores, the
loader, the method layer and the transport read their numbers from this module only.

The stores are shared by every session of a process while the limits are a session's (the client
may override them), so a call runs with its session's limits `applied` and a store check reads
`current()`: the method layer applies them around each call, the assembler around each assembly,
and the pipeline executor carries them onto its threads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import attrs
import orjson
from attrs import frozen

MIB = 1024 * 1024
MAXIMUM = 2**31 - 1  # what any limit may be set to: stays a 32-bit integer wherever a library takes it


@frozen
class LimitSpec:
    name: str
    default: int
    minimum: int
    description: str
    settable: bool = True
    maximum: int = MAXIMUM


LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec("request_bytes", 64 * MIB, 1024,
              "Size of one JSON-RPC message body; a larger one is answered with -32600 (its id when the "
              "start of the body names one) and its bytes are skipped unread."),
    LimitSpec("nesting_depth", 128, 8,
              "Nesting of arrays and objects in a request's params, checked before anything recurses (-32602); "
              "at most 512, as in definition files (the JSON parser reads 1,024 levels at most, and what "
              "reads the params recurses).", maximum=512),
    LimitSpec("definition_file_bytes", 8 * MIB, 1024,
              "Size of one definition file under .codebolt/ (larger files are reported and skipped; "
              "create/update answer -32602)."),
    LimitSpec("rules_per_engine", 20_000, 1,
              "Rules in one rule engine (a larger engine is reported and skipped; create/update/addRule "
              "answer -32602)."),
    LimitSpec("write_value_bytes", 16 * MIB, 1024,
              "Size of the JSON of one value in memory/write (-32602); KV and JSON stores never take more "
              "than the default."),
    LimitSpec("eager_documents", 50, 1,
              "Open documents a push-diagnostics editor keeps re-checked when another file changes (the most "
              "recently opened or edited); the others are checked when next touched, or pulled."),
    LimitSpec("graph_view_rows", 10_000, 1,
              "Rows one graph view returns; a LIMIT or SKIP parameter of a view must lie in 0..this (-32602)."),
    LimitSpec("graph_limit", 1000, 1,
              "`limit` of graph listings and neighbour expansion (-32602)."),
    LimitSpec("graph_depth", 5, 1, "`depth` of neighbour expansion (-32602)."),
    LimitSpec("search_top_k", 100_000, 1, "`top_k` of one vector or keyword search (-32602)."),
    LimitSpec("log_limit", 10_000, 1, "`limit` of an event-log or episodic read (-32602)."),
)

BY_NAME = {spec.name: spec for spec in LIMITS}


@frozen
class Limits:
    request_bytes: int = BY_NAME["request_bytes"].default
    nesting_depth: int = BY_NAME["nesting_depth"].default
    definition_file_bytes: int = BY_NAME["definition_file_bytes"].default
    rules_per_engine: int = BY_NAME["rules_per_engine"].default
    write_value_bytes: int = BY_NAME["write_value_bytes"].default
    eager_documents: int = BY_NAME["eager_documents"].default
    graph_view_rows: int = BY_NAME["graph_view_rows"].default
    graph_limit: int = BY_NAME["graph_limit"].default
    graph_depth: int = BY_NAME["graph_depth"].default
    search_top_k: int = BY_NAME["search_top_k"].default
    log_limit: int = BY_NAME["log_limit"].default

    def merged(self, overrides: Any) -> Limits:
        """These limits with the settable, well-typed values of `overrides` applied."""
        if not isinstance(overrides, dict):
            return self
        whole = {name: int(value) if isinstance(value, float) and value.is_integer() else value  # 2.0 is 2
                 for name, value in overrides.items()}
        known = {name: value for name, value in whole.items()
                 if name in BY_NAME and BY_NAME[name].settable and isinstance(value, int)
                 and not isinstance(value, bool) and BY_NAME[name].minimum <= value <= BY_NAME[name].maximum}
        return attrs.evolve(self, **known)

    def at_most(self, ceiling: Limits) -> Limits:
        """These limits, none above `ceiling`'s (a client of a shared server may lower its own only)."""
        lowered = {f.name: getattr(ceiling, f.name) for f in attrs.fields(Limits)
                   if isinstance(getattr(self, f.name), int) and getattr(self, f.name) > getattr(ceiling, f.name)}
        return attrs.evolve(self, **lowered) if lowered else self


DEFAULT = Limits()
GRAPH_VIEW_ROWS = BY_NAME["graph_view_rows"].default
GRAPH_LIMIT = BY_NAME["graph_limit"].default
GRAPH_DEPTH = BY_NAME["graph_depth"].default
SEARCH_TOP_K = BY_NAME["search_top_k"].default
LOG_LIMIT = BY_NAME["log_limit"].default

_CURRENT: ContextVar[Limits] = ContextVar("context_assembly_limits", default=DEFAULT)


def current() -> Limits:
    """The limits of the call being served (its session's settings), else the defaults."""
    return _CURRENT.get()


@contextmanager
def applied(limits: Limits) -> Iterator[Limits]:
    """Run the body with `limits` as `current()` (in this thread or task; copy the context onto others)."""
    token = _CURRENT.set(limits)
    try:
        yield limits
    finally:
        _CURRENT.reset(token)


def json_size(value: Any) -> int:
    """Bytes of `value` as JSON (stdlib json when orjson refuses: big integers, lone surrogates, depth)."""
    try:
        return len(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        return len(json.dumps(value, default=str))


def too_large(what: str, size: int, limit: int, name: str) -> str:
    """The one wording of a refusal: what, how big, the limit and the setting that holds it."""
    return f"{what} is {size} bytes; at most {limit} (limits.{name})"


def check_value_size(value: Any, limit: int | None = None) -> None:
    """Refuse a value whose JSON is larger than `limit` bytes (default: the call's
    write_value_bytes), before any store sees it."""
    from .errors import InvalidParamsError

    limit = current().write_value_bytes if limit is None else limit
    size = json_size(value)
    if size > limit:
        message = too_large("the value's JSON", size, limit, "write_value_bytes")
        raise InvalidParamsError(message, [{"path": "/value", "message": message}])
