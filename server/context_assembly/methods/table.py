"""The one table of custom methods (SPEC §8) and the call path every transport uses.

`NAMES` says which family module declares each method, so a transport registers every method
without importing a handler: the families import the whole engine (half of the sidecar's start-up
before this). `METHODS` imports a family on the first look-up of one of its methods.
`tests/methods/test_table.py` checks that `NAMES` is exactly what the families declare.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from attrs import evolve

from ..errors import InvalidParamsError
from ..limits import applied
from .call import CallContext, MethodSpec
from .params import check, require_object

if TYPE_CHECKING:
    from .session import Session

FAMILIES = ("assembly", "rule_engines", "persistent_memory", "ingestion", "memory", "testing", "replay")

_CRUD = ("list", "get", "create", "update", "delete")
NAMES: dict[str, str] = {  # method -> the module of this package that declares it
    **{f"contextAssembly/{verb}": "assembly" for verb in (
        "assemble", "validate", "memoryTypes", "evaluateRules", "requiredVariables", "endTurn")},
    **{f"contextRuleEngine/{verb}": "rule_engines" for verb in (
        *_CRUD, "addRule", "updateRule", "deleteRule", "evaluate", "traceLayout", "possibleVariables",
        "validate")},
    **{f"persistentMemory/{verb}": "persistent_memory" for verb in (*_CRUD, "validate", "execute", "stepSpecs")},
    **{f"memoryIngestion/{verb}": "ingestion" for verb in (
        *_CRUD, "validate", "execute", "activate", "disable", "processorSpecs")},
    "memory/event": "ingestion",
    **{f"memory/{verb}": "memory" for verb in ("read", "write", "delete", "list")},
    "contextRuleEngine/test": "testing",
    **{f"contextAssembly/{verb}": "replay" for verb in ("replay", "diff", "tracePage")},
}


# Held while a family (or the editor features, `lsp.server.require_editor`) is imported: one thread
# imports an engine stack at a time, whichever request comes first.
IMPORTS = threading.RLock()


def family(name: str) -> Any:
    """The module of one family (imported now if it was not yet)."""
    return importlib.import_module(f"{__package__}.{name}")


class MethodTable(MutableMapping[str, MethodSpec]):
    """Every method's spec by name, in `NAMES` order; a family is imported on first look-up.
    Entries may be added (a test's extra method) and removed like a dict's."""

    def __init__(self, names: dict[str, str]) -> None:
        self._names: dict[str, str | None] = dict(names)
        self._specs: dict[str, MethodSpec] = {}

    def __getitem__(self, name: str) -> MethodSpec:
        spec = self._specs.get(name)
        if spec is not None:
            return spec
        declared_in = self._names[name]  # KeyError: no such method
        if declared_in is not None:
            self._load(declared_in)
        return self._specs[name]

    def _load(self, declared_in: str) -> None:
        with IMPORTS:
            for found in family(declared_in).METHODS:
                self._specs.setdefault(found.name, found)

    def __setitem__(self, name: str, spec: MethodSpec) -> None:
        self._names.setdefault(name, None)
        self._specs[name] = spec

    def __delitem__(self, name: str) -> None:
        del self._names[name]
        self._specs.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def load(self) -> None:
        """Import every family now (a server warming up after `initialize`)."""
        for declared_in in dict.fromkeys(self._names.values()):
            if declared_in is not None:
                self._load(declared_in)


METHODS = MethodTable(NAMES)


def call(session: Session, method: str, params: Any, ctx: CallContext | None = None) -> Any:
    """Run one method: the caller's access to it, its params checked against its envelope, then its
    handler (which reads and writes memory through the session's access). Domain errors propagate."""
    from ..documents.nesting import value_too_deep  # late: the documents package parses YAML and JSON trees
    from .access import current_method  # late: the access policy matches URI patterns (wcmatch)

    spec = METHODS[method]
    serving = current_method.set(method)
    try:
        session.access.check_method(method)
        body = require_object(params)
        limits = session.limits()
        depth = limits.nesting_depth
        if value_too_deep(body, depth):  # before anything below recurses over it (copies, schemas, structuring)
            message = f"the params are nested too deeply (more than {depth} levels, limits.nesting_depth)"
            raise InvalidParamsError(message, [{"path": "", "message": message}])
        check(body, spec.params)
        # the handler's schema check reads the depth from here instead of walking the params again
        ctx = evolve(ctx, params_depth=depth) if ctx is not None else CallContext(params_depth=depth)
        with applied(limits):  # the shared stores check this session's limits (top_k, graph and log limits)
            return spec.handler(session, body, ctx)
    finally:
        current_method.reset(serving)
