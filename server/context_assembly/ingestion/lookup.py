"""The flat names an ingestion condition reads, over the event's nested values.

A trigger's `where` and a route's `condition` read `payload.<path>`, `trigger`,
`scope.<scope>.<field>`, `addVar.<name>`, and for a routed element also `item` / `item.<path>`,
`index` and the element's own fields without a prefix (`score`, `metadata.kind`). Each name is
resolved when a condition reads it, by walking the value: a payload of any size is matched whole.
(Flattening every value first stopped at 5,000 names, so in a conversation of 1,700 messages
`payload.thread_id`, which came after them, was absent: the trigger did not fire and routes
filtered every element out.) A null counts as absent. A name is resolved however deep it reaches
(at most MAX_PATH parts, deeper than any request may nest), as templates resolve it; iterating the
lookup lists the names down to MAX_DEPTH levels.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..registry.values import MISSING

MAX_DEPTH = 8  # levels the names listed when iterating reach
MAX_PATH = 256  # parts a name may have (a condition 9 levels deep silently never held; templates reached it)
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
    return _resolve(value, parts) if 0 < len(parts) <= MAX_PATH else MISSING


def _resolve(value: Any, parts: Sequence[str]) -> Any:
    """`value` along `parts`; an object key may itself hold dots (`{"a.b": 1}` answers `a.b`)."""
    return _walk(value, tuple(parts), 0, set())


def _walk(value: Any, parts: tuple[str, ...], start: int, failed: set[tuple[int, int]]) -> Any:
    # Each (value, position) is tried once: keys holding dots at every level (`a`, `a.a`, …, an
    # event's own keys) would otherwise make the ways to split a long name exponential.
    if value is None:
        return MISSING
    if start == len(parts):
        return value
    if (id(value), start) in failed:
        return MISSING
    if isinstance(value, Mapping):
        for end in range(start + 1, len(parts) + 1):
            key = ".".join(parts[start:end])
            if key in value:
                found = _walk(value[key], parts, end, failed)
                if found is not MISSING:
                    return found
    elif isinstance(value, list):
        part = parts[start]
        if part.isdigit() and str(int(part)) == part and int(part) < len(value):
            found = _walk(value[int(part)], parts, start + 1, failed)
            if found is not MISSING:
                return found
    failed.add((id(value), start))
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
