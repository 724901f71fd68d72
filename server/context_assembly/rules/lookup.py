"""The flat variable lookup (SPEC §3): `scope.<scope>.<field>`, `addVar.<name>`, `input.text`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..model.request import AssemblyRequest
from ..registry.values import MISSING
from ..registry.variables import ADDVAR_PREFIX, INPUT_TEXT, SCOPE_NAMES, SCOPE_PREFIX, TURN_COUNT

Lookup = dict[str, Any]


def shared(value: Any) -> Any:
    """One object per distinct string (sys.intern; frozensets of strings element-wise).

    Keys, values and the compiled rules' constants all interned, a lookup or comparison that
    matches is an identity check: it reads neither string, where a rule file's strings would
    otherwise each be a separate object, thousands of them, mostly out of the CPU caches."""
    if value.__class__ is str:
        return sys.intern(value)
    if value.__class__ is frozenset and all(v.__class__ is str for v in value):
        return frozenset(map(sys.intern, value))
    return value


def complete(lookup: Lookup, keys: Iterable[str]) -> Lookup:
    """The lookup with every one of `keys` present, the absent ones as MISSING: what the
    generated matchers take, so that each load is a plain subscript."""
    return {**dict.fromkeys(keys, MISSING), **lookup}


def build_lookup(request: AssemblyRequest, derived: Mapping[str, Any] | None = None) -> Lookup:
    """Flatten a request. Null values are left out: a null counts as absent.

    `derived` supplies values the caller did not pass but the server knows (the episodic turn
    count for `session.turnCount`); a value in the request always wins.
    """
    lookup: Lookup = {}
    scopes = request.scope_variables
    for scope in SCOPE_NAMES:
        fields = getattr(scopes, scope)
        if fields:
            prefix = f"{SCOPE_PREFIX}{scope}."
            for name, value in fields.items():
                if value is not None:
                    lookup[intern(prefix + name)] = shared(value)
    for name, value in request.additional_variables.items():
        if value is not None:
            lookup[intern(ADDVAR_PREFIX + name)] = shared(value)
    if request.input is not None and request.input.text is not None:
        lookup[_INPUT_TEXT] = request.input.text
    for key, value in (derived or {}).items():
        if value is not None:
            lookup.setdefault(intern(key), shared(value))
    return lookup


def derived_variables(request: AssemblyRequest, count_turns: Callable[[str], int] | None) -> dict[str, Any]:
    """Values the server knows when the caller does not pass them: the thread's episodic turn
    count (`addVar.turn_count`, seed-004 `session.turnCount`)."""
    thread = request.thread_id or (request.scope_variables.thread or {}).get("thread_id")
    # a null turn_count counts as absent (§4.3): the server's count stands in for it too
    if count_turns is None or request.additional_variables.get("turn_count") is not None \
            or not isinstance(thread, str) or not thread:
        return {}
    try:
        return {TURN_COUNT: count_turns(thread)}
    except Exception:  # no turns recorded, or the store is unavailable: the variable stays absent
        return {}


def request_lookup(request: AssemblyRequest, count_turns: Callable[[str], int] | None) -> tuple[Lookup, dict[str, Any]]:
    """The one lookup every method and command evaluates against, and the derived values in it."""
    derived = derived_variables(request, count_turns)
    return build_lookup(request, derived), derived


intern = sys.intern
_INPUT_TEXT = intern(INPUT_TEXT)
