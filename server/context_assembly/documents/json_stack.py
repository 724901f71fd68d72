"""The token-stack machine: a strict JSON grammar run over a token stream, with a stack of open
containers instead of recursion (deep documents cannot hit the recursion limit).

One machine, three uses, so they can never disagree about structure:

- validation: `feed` every token, then `finish`; problems go to `issues` with readable messages,
  and the machine recovers the way a person would read the text (a missing comma is assumed,
  a trailing comma is skipped, a stray closer closes what it matches) so later problems are
  still found;
- positions: with `spans` given, it records where every pointer's key and value are (used for
  documents tree-sitter could not give a structure to, e.g. an unclosed document);
- locating: `locate` feeds tokens up to an offset and answers which pointer is there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from .document import Span, SyntaxIssue
from .json_tokens import (
    ATOMS,
    COMMENT,
    INVALID,
    NODE,
    SQ_STRING,
    STRING,
    Token,
    bare_text,
    describe,
    invalid_message,
    is_closed_string,
    string_problems,
)
from .nesting import MAX_DEPTH, TOO_DEEP
from .pointers import Pointer

OBJECT, ARRAY, TOP = "object", "array", "top"
CLOSER = {OBJECT: "}", ARRAY: "]"}
OPENER_KIND = {"{": OBJECT, "[": ARRAY}

# Phases: what the innermost open container expects next.
EXPECT_VALUE = "value"  # top level, after ':', after '[' or ',' in an array
EXPECT_KEY = "key"  # after '{' or ',' in an object
EXPECT_COLON = "colon"  # after a key
AFTER_VALUE = "after"  # ',' or the closer (top level: the end)
TRAILING = "trailing"  # top level, junk after the root already reported: ignore the rest
SKIP = "skip"  # object member, junk after its value already reported: skip to ',' or the closer


@attrs.define(slots=True)
class Frame:
    kind: str
    pointer: Pointer
    phase: str
    start: int = 0
    head: Span = (0, 0)  # the opening bracket
    key: str | None = None
    key_span: Span | None = None
    index: int = 0
    comma: Token | None = None  # the comma that led to the current phase, for "trailing comma"
    # After an unclosed string (it ran to the end of its line) the line is taken as one whole
    # member: a key or value on the next line is not also reported as a missing comma.
    assume_comma: bool = False


@attrs.define(slots=True)
class SpanRecord:
    value: Span
    head: Span  # a container's opening bracket; a scalar's own span
    key: Span | None = None


class TokenStack:
    def __init__(self, issues: list[SyntaxIssue] | None = None, spans: dict[Pointer, SpanRecord] | None = None) -> None:
        self.stack: list[Frame] = [Frame(TOP, (), EXPECT_VALUE)]
        self.issues = issues
        self.spans = spans
        self.last_end = 0
        self._depth_reported = False

    # -- validation ----------------------------------------------------------------------------

    def feed(self, token: Token) -> None:
        if token.kind == COMMENT:
            self._issue("comments are not allowed in JSON", token.start, token.end)
            return
        self.last_end = token.end
        frame = self.stack[-1]
        if frame.phase == TRAILING:
            return  # the junk after the root value was reported once; the rest is ignored
        if frame.assume_comma:
            frame.assume_comma = False
            if frame.phase == AFTER_VALUE and token.kind not in (",", ":", "}", "]"):
                self._after_value(frame, Token(",", token.start, token.start, ","))
                frame.comma = None  # made up: must not be reported as a trailing comma
        if token.kind == STRING and not is_closed_string(token.text):
            self._unclosed_string(frame, token)
        elif token.kind in ("}", "]"):
            self._closer(frame, token)
        elif frame.phase == EXPECT_KEY:
            self._expect_key(frame, token)
        elif frame.phase == EXPECT_COLON:
            self._expect_colon(frame, token)
        elif frame.phase == EXPECT_VALUE:
            self._expect_value(frame, token)
        elif frame.phase == AFTER_VALUE:
            self._after_value(frame, token)
        elif frame.phase == SKIP:
            self._skip(frame, token)

    def finish(self, at_eof: bool = True, whole_document: bool = True) -> None:
        """End of the token stream. `at_eof`: nothing but whitespace follows (an unclosed
        container is then "unexpected end of document"); `whole_document`: an empty stream is
        an empty document."""
        position = self.last_end
        if len(self.stack) > 1:
            frame = self.stack[-1]
            if at_eof:
                message = f"unexpected end of document, expected {self._expected(frame)}"
            else:
                message = f"missing '{CLOSER[frame.kind]}'"
            self._issue(message, position, position)
            while len(self.stack) > 1:
                self._close_frame(position)
        if whole_document and self.stack[0].phase == EXPECT_VALUE:
            self._issue("empty document, expected a JSON value", position, position)

    def _issue(self, message: str, start: int, end: int) -> None:
        if self.issues is not None:
            self.issues.append(SyntaxIssue(message, start, end))

    def _token_issue(self, message: str, token: Token) -> None:
        self._issue(message, token.start, token.end)

    def _expected(self, frame: Frame) -> str:
        if frame.phase == EXPECT_COLON:
            return "':'"
        if frame.phase in (AFTER_VALUE, SKIP):
            return f"'{CLOSER[frame.kind]}'"
        if frame.kind == OBJECT:
            return "a property key" if frame.comma else "a property key or '}'"
        return "a value" if frame.comma else "a value or ']'"

    def _expect_key(self, frame: Frame, token: Token) -> None:
        kind = token.kind
        if kind == STRING:
            self._check_string(token)
            self._take_key(frame, token)
        elif kind in ATOMS:
            self._token_issue("property keys must be double-quoted strings", token)
            self._take_key(frame, token)
        elif kind == ",":
            self._token_issue("unexpected ','", token)
        elif kind == ":":
            self._token_issue("missing property key before ':'", token)
            frame.key, frame.key_span, frame.phase = "", None, EXPECT_VALUE
        else:  # '{', '[' or a whole container where a key belongs
            self._token_issue("missing property key", token)
            frame.key, frame.key_span, frame.phase = "", None, EXPECT_VALUE
            self._value(frame, token)

    def _unclosed_string(self, frame: Frame, token: Token) -> None:
        self._check_string(token)
        if frame.kind == OBJECT and frame.phase == EXPECT_KEY:
            self._take_key(frame, token)
        elif frame.phase == EXPECT_VALUE:
            span = (token.start, token.end)
            self._record(self._child_pointer(frame), span, span, frame.key_span)
        frame.phase = AFTER_VALUE
        frame.comma = None
        frame.assume_comma = frame.kind != TOP

    def _take_key(self, frame: Frame, token: Token) -> None:
        frame.key = bare_text(token)
        frame.key_span = (token.start, token.end)
        frame.phase = EXPECT_COLON
        frame.comma = None
        if self.spans is not None and len(self.stack) <= MAX_DEPTH:
            # A key whose value never comes still has a place to point at.
            self.spans[frame.pointer + (frame.key,)] = SpanRecord(frame.key_span, frame.key_span, frame.key_span)

    def _expect_colon(self, frame: Frame, token: Token) -> None:
        if token.kind == ":":
            frame.phase = EXPECT_VALUE
        elif token.kind == ",":
            self._token_issue("missing ':' and value after property key", token)
            frame.phase, frame.key, frame.key_span, frame.comma = EXPECT_KEY, None, None, token
        else:
            self._token_issue("missing ':' after property key", token)
            frame.phase = EXPECT_VALUE
            self._expect_value(frame, token)

    def _expect_value(self, frame: Frame, token: Token) -> None:
        kind = token.kind
        if kind == ",":
            if frame.kind == TOP:
                self._token_issue("unexpected ','", token)
                return
            self._token_issue("missing value", token)
            frame.comma = token
            if frame.kind == OBJECT:
                frame.phase, frame.key, frame.key_span = EXPECT_KEY, None, None
            else:
                frame.index += 1
        elif kind == ":":
            self._token_issue("unexpected ':'", token)
        else:
            self._value(frame, token)

    def _value(self, frame: Frame, token: Token) -> None:
        pointer = self._child_pointer(frame)
        frame.comma = None
        kind = token.kind
        if kind in OPENER_KIND:
            if len(self.stack) > MAX_DEPTH and not self._depth_reported:
                self._depth_reported = True
                self._token_issue(TOO_DEEP, token)
            container = OPENER_KIND[kind]
            phase = EXPECT_KEY if container == OBJECT else EXPECT_VALUE
            head = (token.start, token.end)
            self.stack.append(Frame(container, pointer, phase, start=token.start, head=head))
            return
        if kind == STRING:
            self._check_string(token)
        elif kind == SQ_STRING:
            self._token_issue("strings must use double quotes", token)
        elif kind == INVALID:
            self._token_issue(invalid_message(token.text), token)
        head = (token.start, token.start + 1) if kind == NODE else (token.start, token.end)
        self._record(pointer, (token.start, token.end), head, frame.key_span)
        frame.phase = AFTER_VALUE

    def _after_value(self, frame: Frame, token: Token) -> None:
        kind = token.kind
        if frame.kind == TOP:
            self._token_issue(f"unexpected {describe(token)} after the end of the JSON value", token)
            frame.phase = TRAILING
        elif kind == ",":
            frame.comma = token
            if frame.kind == OBJECT:
                frame.phase, frame.key, frame.key_span = EXPECT_KEY, None, None
            else:
                frame.phase, frame.index = EXPECT_VALUE, frame.index + 1
        elif kind == ":" and frame.kind == OBJECT:
            self._token_issue("unexpected ':'", token)
            frame.phase = SKIP
        elif kind == ":":
            self._token_issue("unexpected ':'", token)
        elif frame.kind == ARRAY:
            if kind == INVALID:
                self._token_issue(invalid_message(token.text), token)
                return
            self._token_issue("missing ',' between array elements", token)
            frame.phase, frame.index = EXPECT_VALUE, frame.index + 1
            self._value(frame, token)
        elif kind in (STRING, SQ_STRING):
            self._token_issue("missing ',' between members", token)
            frame.phase, frame.key, frame.key_span = EXPECT_KEY, None, None
            self._expect_key(frame, token)
        elif kind in ATOMS:
            self._token_issue(f"expected ',' or '}}' after property value, found {describe(token)}", token)
            frame.phase = SKIP  # one message for the junk, not one per token of it
        else:  # a container: consume it (as a member with an empty key) to keep brackets balanced
            self._token_issue("missing ',' and property key before this value", token)
            frame.key, frame.key_span = "", None
            self._value(frame, token)

    def _skip(self, frame: Frame, token: Token) -> None:
        if token.kind == ",":
            frame.phase, frame.key, frame.key_span, frame.comma = EXPECT_KEY, None, None, token
        elif token.kind in OPENER_KIND or token.kind == NODE:
            frame.key, frame.key_span = "", None  # keep brackets balanced; no second message
            self._value(frame, token)

    def _closer(self, frame: Frame, token: Token) -> None:
        closer = token.kind
        if frame.kind == TOP:
            if frame.phase == AFTER_VALUE:
                self._token_issue(f"unexpected '{closer}' after the end of the JSON value", token)
                frame.phase = TRAILING
            elif frame.phase != TRAILING:
                self._token_issue(f"unexpected '{closer}'", token)
            return
        if CLOSER[frame.kind] == closer:
            self._closing_checks(frame, token)
            self._close_frame(token.end)
            return
        match = next(
            (depth for depth in range(len(self.stack) - 2, 0, -1) if CLOSER[self.stack[depth].kind] == closer),
            None,
        )
        if match is None or match == 1:
            # Nothing to match, or it would close the root in mid-document: read it as a typo
            # for the closer that belongs here, which keeps the rest of the document in place.
            self._token_issue(f"expected '{CLOSER[frame.kind]}' but found '{closer}'", token)
            self._closing_checks(frame, token)
            self._close_frame(token.end)
            return
        self._token_issue(f"expected '{CLOSER[frame.kind]}' before '{closer}'", token)
        while len(self.stack) - 1 > match:
            self._close_frame(token.start)
        self._closer(self.stack[-1], token)

    def _closing_checks(self, frame: Frame, token: Token) -> None:
        if frame.comma is not None and frame.phase in (EXPECT_KEY, EXPECT_VALUE):
            comma = frame.comma
            self._issue("trailing comma", comma.start, comma.end)
        elif frame.kind == OBJECT and frame.phase == EXPECT_VALUE:
            self._token_issue("missing value", token)
        elif frame.kind == OBJECT and frame.phase == EXPECT_COLON:
            self._token_issue("missing ':' and value after property key", token)

    def _close_frame(self, end: int) -> None:
        frame = self.stack.pop()
        parent = self.stack[-1]
        self._record(frame.pointer, (frame.start, max(end, frame.head[1])), frame.head, parent.key_span)
        parent.phase = AFTER_VALUE

    def _record(self, pointer: Pointer, value: Span, head: Span, key: Span | None) -> None:
        # Nothing is recorded beyond the depth limit, where pointers stop growing (see below).
        if self.spans is not None and len(self.stack) <= MAX_DEPTH:
            self.spans[pointer] = SpanRecord(value, head, key)

    def _check_string(self, token: Token) -> None:
        if self.issues is None:
            return
        for message, start, end in string_problems(token.text):
            self._issue(message, token.start + start, token.start + end)

    def _child_pointer(self, frame: Frame) -> Pointer:
        if len(self.stack) > MAX_DEPTH:
            # Beyond the limit (already an error) pointers stop growing: a tuple per level
            # would make a 100,000-deep document cost quadratic memory.
            return frame.pointer
        if frame.kind == OBJECT:
            return frame.pointer + (frame.key if frame.key is not None else "",)
        if frame.kind == ARRAY:
            return frame.pointer + (str(frame.index),)
        return frame.pointer

    # -- locating ------------------------------------------------------------------------------

    def locate(
        self,
        tokens: Iterator[Token],
        offset: int,
        descend: Callable[[Any], Iterator[Token]] | None = None,
    ) -> tuple[Pointer, str]:
        """Pointer and part ("key" | "value") at `offset`. A string or scalar owns the offsets
        from its start to its end inclusive (the cursor right after a word is still on it). A
        NODE token (a whole container) that strictly contains the offset is opened with
        `descend`, whose tokens replace the rest of the stream."""
        stream = tokens
        while True:
            for token in stream:
                kind = token.kind
                if kind == COMMENT:
                    if token.start < offset < token.end:
                        return self._at_gap()
                    continue
                if kind in ATOMS and token.start <= offset <= token.end:
                    return self._at_atom(token)
                if (
                    kind == NODE
                    and descend is not None
                    and token.start < offset
                    and (offset < token.end or token.unclosed)
                ):
                    if len(self.stack) > MAX_DEPTH:
                        return self._at_gap()  # pointers stop at the depth limit anyway
                    stream = descend(token.node)
                    break
                if token.start >= offset:
                    return self._at_gap()
                self.feed(token)
            else:
                return self._at_gap()

    def _at_atom(self, token: Token) -> tuple[Pointer, str]:
        frame = self.stack[-1]
        if frame.kind == OBJECT:
            if frame.phase == EXPECT_KEY or (frame.phase == AFTER_VALUE and token.kind in (STRING, SQ_STRING)):
                return frame.pointer + (bare_text(token),), "key"
            return frame.pointer + (frame.key or "",), "value"
        if frame.kind == ARRAY:
            index = frame.index + 1 if frame.phase == AFTER_VALUE else frame.index
            return frame.pointer + (str(index),), "value"
        return (), "value"

    def _at_gap(self) -> tuple[Pointer, str]:
        """Between tokens: where the next token would go."""
        frame = self.stack[-1]
        if frame.kind == OBJECT:
            if frame.phase == EXPECT_KEY or (frame.phase == AFTER_VALUE and frame.assume_comma):
                return frame.pointer + ("",), "key"
            if frame.phase == EXPECT_COLON:
                return frame.pointer + (frame.key or "",), "key"
            return frame.pointer + (frame.key or "",), "value"
        if frame.kind == ARRAY:
            index = frame.index + 1 if frame.phase == AFTER_VALUE and frame.assume_comma else frame.index
            return frame.pointer + (str(index),), "value"
        return (), "value"
