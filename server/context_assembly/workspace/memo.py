"""Work reused between versions of one document, keyed by the identity of its sub-objects.

The editor builds each version's value from the previous one copy-on-write: every rule the edit
did not touch is the very same dict. Results computed from such a dict (its structured `Rule`,
its schema errors, its meaning problems) are kept here and reused while the dict is still part of
the document, so an edit costs in proportion to what it changed.

An entry keeps a reference to its object and a hit needs that very object, so a recycled `id()`
never hits. Every pass over the current items replaces the entries, which forgets objects that
left the document: memory stays bounded by one version. Entries are replaced whole, never updated
in place, so passes running concurrently (two versions, two lint contexts) can only lose hits,
never give wrong ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from ..model.problems import Problem
from ..model.rules import Rule
from ..schemas.validate import ItemErrors

V = TypeVar("V")
Entries = dict[int, tuple[Any, V]]  # id(object) -> (object, value)


class IdentityCache(Generic[V]):
    """Values of objects, by identity; `reuse` answers for a whole sequence and prunes."""

    def __init__(self) -> None:
        # (key, entries): replaced whole, so a reader never mixes two keys
        self._state: tuple[Hashable, Entries[V]] = (None, {})

    def __len__(self) -> int:
        return len(self._state[1])

    def keyed(self, key: Hashable) -> Callable[[Sequence[Any], Callable[[list[Any]], list[V]]], list[V]]:
        """`reuse` for values that also depend on `key` (kept values for another key are dropped)."""
        return functools.partial(self.reuse, key=key)

    def reuse(self, items: Sequence[Any], compute: Callable[[list[Any]], list[V]], key: Hashable = None) -> list[V]:
        """The value of every item, in order: the kept one for an item seen before, else from
        `compute(misses)` (called once, also with no misses; when it raises nothing changes).

        An object that occurs twice in `items` is computed again at its second place, so no
        value is shared within one answer."""
        kept_key, entries = self._state
        if kept_key != key or not entries:  # everything is new (a fast path, same answer)
            values = compute(list(items))
            self._state = key, {id(item): (item, value) for item, value in zip(items, values, strict=True)}
            return values
        kept, values, misses = _kept(entries, items)
        computed = compute([items[p] for p in misses])
        for position, value in zip(misses, computed, strict=True):
            values[position] = value
            kept[id(items[position])] = (items[position], value)
        self._state = key, kept
        return values


def _kept(entries: Entries[V], items: Sequence[Any]) -> tuple[Entries[V], list[Any], list[int]]:
    """(the entries of items seen before, their values with None at misses, the miss positions)."""
    kept: Entries[V] = {}
    values: list[Any] = []
    misses: list[int] = []
    for position, item in enumerate(items):
        key = id(item)
        entry = entries.get(key)
        if entry is not None and entry[0] is item and key not in kept:
            kept[key] = entry
            values.append(entry[1])
        else:
            misses.append(position)
            values.append(None)
    return kept, values, misses


class SourceMemo:
    """The caches of one document, shared by its successive versions (see `SourceFile.memo`)."""

    def __init__(self) -> None:
        self.rules: IdentityCache[Rule] = IdentityCache()  # rule dict -> structured Rule
        self.schema: IdentityCache[ItemErrors] = IdentityCache()  # rule dict -> its schema errors
        # rule dict -> its meaning problems, pointers relative to the rule; keyed by the lint context
        self.meaning: IdentityCache[list[Problem]] = IdentityCache()

    def __len__(self) -> int:
        return len(self.rules) + len(self.schema) + len(self.meaning)


__all__ = ["IdentityCache", "SourceMemo"]
