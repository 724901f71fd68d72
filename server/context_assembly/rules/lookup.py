"""The flat variable lookup (SPEC §3): `scope.<scope>.<field>`, `addVar.<name>`, `input.text`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.request import AssemblyRequest
from ..registry.variables import ADDVAR_PREFIX, INPUT_TEXT, SCOPE_NAMES, SCOPE_PREFIX

Lookup = dict[str, Any]


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
                    lookup[prefix + name] = value
    for name, value in request.additional_variables.items():
        if value is not None:
            lookup[ADDVAR_PREFIX + name] = value
    if request.input is not None and request.input.text is not None:
        lookup[INPUT_TEXT] = request.input.text
    for key, value in (derived or {}).items():
        if value is not None:
            lookup.setdefault(key, value)
    return lookup
