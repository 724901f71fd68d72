"""What flows between pipeline steps: items read from the stores, and their ContextItem form (SPEC §5.2)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import attrs
from attrs import define, field

from ..registry.values import MISSING

# Item attributes that conditions, templates and `{{field}}` formats can read by name.
ITEM_FIELDS: tuple[str, ...] = ("id", "content", "source", "title", "score", "timestamp")
METADATA_PREFIX = "metadata."


def item_id(source: str, key: Any) -> str:
    """A stable id: the same source and discriminator (chunk, key, row) always give the same id."""
    digest = hashlib.sha1(f"{source}\x00{key}".encode("utf-8", "surrogatepass"), usedforsecurity=False)
    return digest.hexdigest()[:16]


def turn_key(turn: dict[str, Any], fallback: Any) -> Any:
    """What tells a thread's turn from the others: its id, else its `seq` (the same whichever way it
    was read), else `fallback` (a position would shift as turns arrive)."""
    for name in ("id", "seq"):
        if turn.get(name) is not None:
            return turn[name]
    return fallback


class Readable(Protocol):
    """May the caller read this source? (its token's read patterns, `methods/access.py` ReadPatterns)"""

    @property
    def patterns(self) -> tuple[str, ...]:
        """What it is made of: what a snapshot records and a cache key holds."""

    def __call__(self, source: str) -> bool: ...


# what a caller is told of an address its token may not read: the same whether it exists or not
NOT_READ = "outside the read patterns of the caller's token: not read"


def admitting(readable: Readable | None) -> Callable[[str, Any], bool] | None:
    """A store's test of what `readable` lets a caller see (source, metadata): for searches that
    rank among those only (`admit`). None: the caller sees everything."""
    return None if readable is None else lambda source, metadata: may_read_item(readable, source, metadata)


def item_sources(source: str, metadata: Any) -> Iterator[str]:
    """Every source an item's content came from: its own, and those it was grouped or summarised
    from (`metadata.sources`)."""
    yield source
    merged = metadata.get("sources") if isinstance(metadata, dict) else None
    if isinstance(merged, list):
        yield from (s if isinstance(s, str) else repr(s) for s in merged)


def may_read_item(readable: Readable | None, source: str, metadata: Any) -> bool:
    """Whether an item may be shown to a caller: every source it came from is readable."""
    return readable is None or all(readable(s) for s in item_sources(source, metadata))


def render_value(value: Any) -> str:
    """Strings as they are; anything else as pretty-printed JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@define
class Item:
    content: str
    source: str  # a memory URI: kv://users/u-1, markdown://style-guide, vector://docs/<doc>, ...
    title: str | None = None
    score: float | None = None
    timestamp: float | None = None  # seconds since the epoch
    metadata: dict[str, Any] = field(factory=dict)
    id: str = ""  # derived from source + content when not given; steps pass a better discriminator
    origin: str = ""  # the step that produced the item (merge groups by it; annotate records it)
    raw_content: str | None = None  # the content before a `format` step rendered it (dedupe reads it)

    def __attrs_post_init__(self) -> None:
        if not self.id:
            self.id = item_id(self.source, self.content)

    @classmethod
    def create(cls, content: str, source: str, key: Any, **attributes: Any) -> Item:
        return cls(content=content, source=source, id=item_id(source, key), **attributes)

    def get(self, name: str) -> Any:
        """An item field by name (`score`, `metadata.kind`, `metadata.a.b`), or MISSING."""
        if name in ITEM_FIELDS:
            own = getattr(self, name)
            return MISSING if own is None else own
        if name == "metadata":
            return self.metadata
        if not name.startswith(METADATA_PREFIX):
            return MISSING
        value: Any = self.metadata
        for part in name[len(METADATA_PREFIX):].split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return MISSING
        return MISSING if value is None else value

    def fields(self) -> dict[str, Any]:
        """The flat lookup conditions read: item fields plus `metadata.<k>` keys (nested dicts too)."""
        out: dict[str, Any] = {}
        for name in ITEM_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        _flatten(self.metadata, "metadata", out, depth=0)
        return out

    def copy(self, **changes: Any) -> Item:
        """A copy whose metadata can change without touching this item's."""
        return attrs.evolve(self, **{"metadata": dict(self.metadata), **changes})

    def to_context_item(self, memory_id: str | None, section: str, priority: str, tokens: int) -> dict[str, Any]:
        """The SPEC's ContextItem `{id, content, memory_id, source, section, priority, score, tokens, metadata}`."""
        metadata = dict(self.metadata)
        if self.title is not None:
            metadata.setdefault("title", self.title)
        if self.timestamp is not None:
            metadata.setdefault("timestamp", self.timestamp)
        return {
            "id": self.id, "content": self.content, "memory_id": memory_id, "source": self.source,
            "section": section, "priority": priority, "score": self.score, "tokens": tokens,
            "metadata": metadata,
        }


_MAX_FLATTEN_DEPTH = 8  # metadata comes from stores; keep the walk bounded


def _flatten(value: Any, prefix: str, out: dict[str, Any], depth: int) -> None:
    if not isinstance(value, dict) or depth > _MAX_FLATTEN_DEPTH:
        return
    for key, inner in value.items():
        if inner is None or not isinstance(key, str):
            continue
        name = f"{prefix}.{key}"
        out[name] = inner
        _flatten(inner, name, out, depth + 1)
