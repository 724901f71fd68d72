"""The flat names an ingestion condition reads, over the event's nested values.

A trigger's `where` and a route's `condition` read `payload.<path>`, `trigger`,
`scope.<scope>.<field>`, `addVar.<name>`, and for a routed element also `item` / `item.<path>`,
`index` and the element's own fields without a prefix (`score`, `metadata.kind`). Each name is
resolved when a condition reads it, by walking the value: a payload of any size is matched whole.
(Flattening every value first stopped at 5,000 names, so in a conversation of 1,700 messages
`payload.thread_id`, which came after them, was absent: the trigger did not fire and routes
filtered every element out.) A null counts as absent; a name reaches at most MAX_DEPTH levels
below its root.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..registry.values import MISSING

MAX_DEPTH = 8
Layer = Mapping[str, Any] | tuple[str, Any]  # plain names, or (prefix, value): `prefix.<path>` into the value


class Lookup(Mapping[str, Any]):
    """Names resolved through `layers`, the first that has the name winning."""

    __slots__ = ("_layers",)

    def __init__(self, *layers: Layer) -> None:
        self._layers = layers

    def __getitem__(self, name: str) -> Any:
        for layer in self._layers:
            found = _under(*layer, name) if isinstance(layer, tuple) else layer.get(name, MISSING)
            if found is not MISSING:
                return found
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for layer in self._layers:
            for name in _names(*layer) if isinstance(layer, tuple) else iter(layer):
                if name not in seen:
                    seen.add(name)
                    yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _under(prefix: str, value: Any, name: str) -> Any:
    if prefix:
        if name == prefix:
            return MISSING if value is None else value
        if not name.startswith(prefix + "."):
            return MISSING
        name = name[len(prefix) + 1:]
    parts = name.split(".")
    return _resolve(value, parts) if 0 < len(parts) <= MAX_DEPTH else MISSING


def _resolve(value: Any, parts: Sequence[str]) -> Any:
    """`value` along `parts`; an object key may itself hold dots (`{"a.b": 1}` answers `a.b`)."""
    if value is None:
        return MISSING
    if not parts:
        return value
    if isinstance(value, Mapping):
        for end in range(1, len(parts) + 1):
            key = ".".join(parts[:end])
            if key in value:
                found = _resolve(value[key], parts[end:])
                if found is not MISSING:
                    return found
        return MISSING
    if isinstance(value, list) and parts[0].isdigit() and str(int(parts[0])) == parts[0] \
            and int(parts[0]) < len(value):
        return _resolve(value[int(parts[0])], parts[1:])
    return MISSING


def _names(prefix: str, value: Any, depth: int = 0) -> Iterator[str]:
    """Every name `_under` answers for (what a caller iterating the lookup sees)."""
    if value is None:
        return
    if prefix:
        yield prefix
    if depth >= MAX_DEPTH:
        return
    children = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _names(f"{prefix}.{key}" if prefix else str(key), child, depth + 1)


def event_lookup(payload: Any, trigger: str, scope_variables: Mapping[str, Any] | None,
                 additional_variables: Mapping[str, Any] | None) -> Lookup:
    """The lookup of an event: `payload.<path>`, `trigger`, `scope.<scope>.<field>`, `addVar.<name>`."""
    named: dict[str, Any] = {"trigger": trigger}
    for scope, fields in (scope_variables or {}).items():
        if isinstance(fields, Mapping):
            for field, value in fields.items():
                if value is not None:
                    named[f"scope.{scope}.{field}"] = value
    for field, value in (additional_variables or {}).items():
        if value is not None:
            named[f"addVar.{field}"] = value
    return Lookup(named, ("payload", payload))


def item_lookup(base: Mapping[str, Any], item: Any, index: int) -> Lookup:
    """A routed element's lookup: `item.<path>` first, then `index`, the event's names, and the
    element's own fields without a prefix last."""
    return Lookup(("item", item), {"index": index}, base, ("", item))
