"""A parsed definition file: its value, its syntax errors, and where each part of it is."""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from .lines import LineIndex
from .pointers import Pointer, PointerLike, format_pointer, parse_pointer, resolve_pointer

Span = tuple[int, int]
PARTS = ("value", "key")


@attrs.define
class SyntaxIssue:
    """One syntax problem; `start`/`end` are character offsets into the text (end exclusive;
    equal when the problem is a place rather than a stretch, e.g. the end of the document)."""

    message: str
    start: int
    end: int


class Locator(Protocol):
    """What a format (JSON via tree-sitter, YAML via PyYAML) provides to find nodes."""

    def span(self, pointer: Pointer, part: str) -> Span | None: ...

    def pointer_at(self, offset: int) -> tuple[Pointer, str]: ...


class _NoLocator:
    def span(self, pointer: Pointer, part: str) -> Span | None:
        return None

    def pointer_at(self, offset: int) -> tuple[Pointer, str]:
        return (), "value"


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@attrs.define
class ParsedDocument:
    text: str = attrs.field(repr=_short_repr)  # documents can be megabytes: keep reprs readable
    kind: str  # "json" | "yaml"
    value: Any = attrs.field(repr=_short_repr)  # the parsed value when there are no syntax errors, else None
    syntax_errors: list[SyntaxIssue]
    lines: LineIndex = attrs.field(
        default=attrs.Factory(lambda self: LineIndex(self.text), takes_self=True), repr=False, eq=False
    )
    _locator: Locator = attrs.field(factory=_NoLocator, repr=False, eq=False, alias="locator")

    @property
    def locator(self) -> Locator:
        return self._locator

    def warm(self) -> None:
        """Build now what positions need (the line index; for JSON the syntax tree, which the
        next version's incremental re-parse starts from): worth it off the critical path."""
        self.lines.line_count()
        source = getattr(self._locator, "source", None)
        if source is not None:
            source.warm()

    @property
    def ok(self) -> bool:
        return not self.syntax_errors

    def span(self, pointer: PointerLike, part: str = "value") -> Span | None:
        """Character offsets of the node `pointer` names; `part="key"` asks for the property key
        (a value that is not an object member answers with the value). A pointer that does not
        exist answers with the nearest existing ancestor: its key when it is an object member,
        else its opening bracket (a scalar: the scalar), so a missing property never underlines
        a whole object or file. None only when the document has no value at all."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {PARTS}, not {part!r}")
        return self._locator.span(parse_pointer(pointer), part)

    def pointer_at(self, offset: int) -> tuple[str, str]:
        """(JSON pointer, "key" | "value") of the innermost node at `offset`, for completion and
        hover. Between tokens it answers with where a new token would go: in an object where a
        key is expected the pointer ends in the (possibly empty) key being typed, e.g. "/rules/0/"
        with "key"; after a ':' it is that member's value; in an array, the element at that index."""
        offset = min(max(offset, 0), len(self.text))
        tokens, part = self._locator.pointer_at(offset)
        return format_pointer(tokens), part

    def keys_at(self, pointer: PointerLike) -> set[str] | None:
        """The property keys of the object at `pointer`, also in a document that does not parse
        (what completion must not offer again); None when there is no object there."""
        tokens = parse_pointer(pointer)
        if self.value is not None:
            found = resolve_pointer(self.value, tokens)
            return set(found) if isinstance(found, dict) else None
        keys = getattr(self._locator, "keys", None)
        return keys(tokens) if keys is not None else None

    def plain_scalar_at(self, offset: int) -> Span | None:
        """YAML: the span of the plain (unquoted, not block) scalar value at `offset`, else None."""
        plain_scalar_at = getattr(self._locator, "plain_scalar_at", None)
        return plain_scalar_at(min(max(offset, 0), len(self.text))) if plain_scalar_at is not None else None

    def pointer_tokens_at(self, offset: int) -> tuple[Pointer, str]:
        """Like `pointer_at`, with the pointer as a tuple of reference tokens."""
        return self._locator.pointer_at(min(max(offset, 0), len(self.text)))

    def line_col(self, pointer: PointerLike, part: str = "value") -> tuple[int, int]:
        """1-based (line, column) where `pointer` starts, for `path:line:col` output."""
        span = self.span(pointer, part)
        return self.lines.line_col(span[0] if span else 0)
