"""JSON documents: strict value, tolerant structure, exact positions.

- The value comes from a strict parser (orjson; the stdlib for what orjson handles differently),
  so "no syntax errors" means exactly "valid JSON" (RFC 8259): no comments, trailing commas,
  single quotes, NaN, raw control characters in strings.
- Positions come from tree-sitter-json, which keeps a useful tree on broken text. Its offsets
  are UTF-8 bytes; `Utf8Offsets` turns them into `str` offsets. On a valid document the tree is
  only built when a position is first asked for: loading a workspace of valid files never
  pays for it.
- Syntax errors on a broken document: every object/array/document node that tree-sitter marks
  as containing an error is re-read token by token by the token-stack machine (`json_stack`),
  which names the problem ("missing ',' between members", "trailing comma", ...). Comments
  are found separately because tree-sitter-json accepts them without an error. When
  tree-sitter gives up on the structure (an unclosed document collapses into one ERROR
  node), the whole text goes through the fallback regex tokenizer and the same machine.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import orjson
import tree_sitter_json
from tree_sitter import Language, Node, Parser, Tree

from ..json_numbers import might_be_inexact
from .document import ParsedDocument, Span, SyntaxIssue
from .json_stack import ARRAY, EXPECT_KEY, EXPECT_VALUE, OBJECT, SpanRecord, TokenStack
from .json_tokens import (
    INVALID,
    NODE,
    PUNCTUATION,
    STRING,
    Token,
    classify_piece,
    invalid_message,
    string_problems,
    string_value,
    tokenize,
)
from .lines import LineIndex
from .nesting import TOO_DEEP, too_deep_offset, value_too_deep
from .pointers import Pointer, array_index
from .utf8_offsets import Utf8Offsets, encode_for_parser

_VALUE_TYPES = frozenset({"object", "array", "string", "number", "true", "false", "null"})
# Loose text: ERROR nodes and the scalar pieces around them. tree-sitter splits `-0.5E+3` or
# `0x1F` into several nodes, and inside ERROR nodes its recovery can even make a string span
# lines; such runs are re-read by the regex tokenizer, which keeps strings within one line as
# JSON does, so one misplaced quote damages one line, not the rest of the file.
_LOOSE_TYPES = frozenset({"number", "true", "false", "null", "string_content", "escape_sequence", '"', "ERROR"})

_parser: Parser | None = None
_parser_lock = threading.Lock()  # a tree-sitter Parser must not parse two texts at once


def parse_tree(data: bytes, edited: Tree | None = None) -> Tree:
    """The tree of `data`; from `edited` (an older tree, `Tree.edit`-ed to match) incrementally."""
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = Parser(Language(tree_sitter_json.language()))
        return _parser.parse(data, edited) if edited is not None else _parser.parse(data)


# -- strict value ------------------------------------------------------------------------------



@attrs.define
class StrictOutcome:
    value: Any = None
    valid: bool = False
    too_deep: bool = False
    error: json.JSONDecodeError | None = None


def strict_load(text: str, data: bytes) -> StrictOutcome:
    """Parse `text` as strict JSON. orjson turns integers beyond 64 bits into floats; when the
    text may hold one (a run of 20+ digits, or a minus and 19: cheap to check on the bytes) the
    stdlib parses it, exactly."""
    if not might_be_inexact(data):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as error:
            if "depth" in str(error) or "recursion" in str(error):
                return StrictOutcome(too_deep=True)
        else:
            return _checked(value)
    # Here: big integers, lone surrogates in the text (orjson wants valid UTF-8), or broken JSON.
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        return StrictOutcome(error=error)
    except RecursionError:
        return StrictOutcome(too_deep=True)
    except ValueError:  # NaN / Infinity: the tree reports where
        return StrictOutcome()
    return _checked(value)


def _checked(value: Any) -> StrictOutcome:
    if value_too_deep(value):
        return StrictOutcome(too_deep=True)
    return StrictOutcome(value=value, valid=True)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


_DECODER_MESSAGES = {
    "Expecting value": "expected a value",
    "Expecting ',' delimiter": "missing ','",
    "Expecting ':' delimiter": "missing ':' after property key",
    "Expecting property name enclosed in double quotes": "property keys must be double-quoted strings",
    "Invalid control character at": "control character in string (escape it, e.g. \\n or \\t)",
    "Invalid \\escape": "invalid escape sequence",
    "Invalid \\uXXXX escape": "invalid \\u escape (it needs 4 hex digits)",
    "Unterminated string starting at": "unclosed string",
    "Extra data": "unexpected text after the end of the JSON value",
}


def _decoder_issue(error: json.JSONDecodeError, text: str) -> SyntaxIssue:
    local = _token_issue_at(text, error.pos)
    if local is not None:
        return local
    message = _DECODER_MESSAGES.get(error.msg, error.msg[:1].lower() + error.msg[1:])
    return SyntaxIssue(message, error.pos, min(error.pos + 1, len(text)))


def _token_issue_at(text: str, position: int) -> SyntaxIssue | None:
    """A better message from the token at `position` itself ("invalid number '1.'" rather than
    "missing ','"). Tokenizing its line alone is enough: a JSON string cannot span lines."""
    line_start = max(text.rfind("\n", 0, position), text.rfind("\r", 0, position)) + 1
    line_end = min((i for i in (text.find("\n", position), text.find("\r", position)) if i != -1), default=len(text))
    for token in tokenize(text[line_start:line_end]):
        start, end = token.start + line_start, token.end + line_start
        if not start <= position < end:
            continue
        if token.kind == STRING:
            for message, problem_start, problem_end in string_problems(token.text):
                return SyntaxIssue(message, start + problem_start, start + problem_end)
        elif token.kind == INVALID:
            return SyntaxIssue(invalid_message(token.text), start, end)
        return None
    return None


# -- the tree ----------------------------------------------------------------------------------


class JsonSource:
    """The text, its UTF-8 bytes and (built on first use) the tree-sitter tree."""

    def __init__(self, text: str, data: bytes, tree: Tree | None = None) -> None:
        self.text = text
        self.data = data
        self._tree = tree

    @property
    def tree(self) -> Tree:
        if self._tree is None:
            self._tree = parse_tree(self.data)
        return self._tree

    @property
    def has_tree(self) -> bool:
        return self._tree is not None

    def warm(self) -> None:
        if self._tree is None:
            self._tree = parse_tree(self.data)

    @functools.cached_property
    def offsets(self) -> Utf8Offsets:
        return Utf8Offsets(self.text, self.data)

    def span_of(self, node: Node) -> Span:
        char_of = self.offsets.char_of
        return char_of(node.start_byte), char_of(node.end_byte)

    def text_of(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def root_value(self) -> Node | None:
        root = self.tree.root_node
        if root.type != "document":
            return None
        return next((child for child in root.children if child.type in _VALUE_TYPES), None)

    def top_children(self) -> list[Node]:
        root = self.tree.root_node
        return root.children if root.type == "document" else [root]

    def tokens(self, children: Iterable[Node]) -> Iterator[Token]:
        """`children` (of a container, or of the document) as a flat token stream: pairs are
        opened, MISSING nodes and comments skipped, objects/arrays kept whole (NODE), and runs
        of loose text (ERROR nodes, scalars) re-tokenized from the text."""
        stack: list[Iterator[Node]] = [iter(children)]
        loose_start = loose_end = -1
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
                continue
            node_type = node.type
            if node.is_missing or node_type == "comment":
                continue
            if node_type == "pair":
                stack.append(iter(node.children))
                continue
            if node_type in _LOOSE_TYPES or (node_type == "string" and self._spans_lines(node)):
                if loose_end < 0:
                    loose_start = node.start_byte
                loose_end = node.end_byte
                continue
            if loose_end >= 0:
                yield from self._loose(loose_start, loose_end)
                loose_end = -1
            yield self._token(node)
        if loose_end >= 0:
            yield from self._loose(loose_start, loose_end)

    def _spans_lines(self, node: Node) -> bool:
        """tree-sitter-json lets whitespace (line breaks too) sit between a string's content and
        its closing quote, so an unclosed string can swallow the next line's opening quote."""
        start, end = node.start_byte, node.end_byte
        return self.data.find(b"\n", start, end) != -1 or self.data.find(b"\r", start, end) != -1

    def _loose(self, start_byte: int, end_byte: int) -> Iterator[Token]:
        start, end = self.offsets.char_of(start_byte), self.offsets.char_of(end_byte)
        for token in tokenize(self.text[start:end]):
            token.start += start
            token.end += start
            yield token

    def _token(self, node: Node) -> Token:
        start, end = self.span_of(node)
        node_type = node.type
        if node_type in ("object", "array"):
            last = node.child(node.child_count - 1) if node.child_count > 1 else None
            return Token(NODE, start, end, node=node, unclosed=last is None or last.is_missing)
        if node_type in PUNCTUATION:
            return Token(node_type, start, end, node_type)
        text = self.text_of(node)
        return Token(STRING if node_type == "string" else classify_piece(text), start, end, text)

    # -- syntax issues -------------------------------------------------------------------------

    def issues(self) -> list[SyntaxIssue]:
        issues: list[SyntaxIssue] = []
        content_end = len(self.text.rstrip())
        stack = [self.tree.root_node]
        while stack:
            node = stack.pop()
            if node.type in ("document", "object", "array"):
                machine = TokenStack(issues)
                for token in self.tokens(node.children):
                    machine.feed(token)
                machine.finish(at_eof=machine.last_end >= content_end, whole_document=node.type == "document")
            # ERROR nodes were read token by token by their container's machine, nested
            # brackets included: going inside would report the same problems twice.
            stack.extend(reversed([c for c in node.children if c.has_error and c.type != "ERROR"]))
        issues.extend(self._comment_issues())
        return issues

    def _comment_issues(self) -> Iterator[SyntaxIssue]:
        data, root = self.data, self.tree.root_node
        position = data.find(b"/")
        while position != -1:
            node = root.descendant_for_byte_range(position, position + 1)
            if node is None:
                return
            if node.type == "comment":
                start, end = self.span_of(node)
                yield SyntaxIssue("comments are not allowed in JSON", start, end)
            skip_to = node.end_byte if node.type in ("comment", "string_content", "string") else 0
            position = data.find(b"/", max(skip_to, position + 1))

    def needs_fallback(self) -> bool:
        """tree-sitter lost the structure: the root is one ERROR node (an unclosed document), or
        the document starts with junk, which it recovers from poorly (e.g. `{'a': 1}`)."""
        root = self.tree.root_node
        if root.type != "document":
            return True
        first = next((child for child in root.children if child.type != "comment"), None)
        return first is not None and (first.type not in _VALUE_TYPES or first.is_missing)


# -- locators ----------------------------------------------------------------------------------


class TreeLocator:
    """Spans and pointers from the tree-sitter tree, walked for the one pointer asked for."""

    def __init__(self, source: JsonSource, valid: bool = False) -> None:
        self.source = source
        self.valid = valid  # strictly valid JSON: arrays hold only values, index them directly
        self._clean_end: int | None = None

    def span(self, pointer: Pointer, part: str) -> Span | None:
        node = self.source.root_value()
        if node is None:
            return None
        key: Node | None = None
        for token in pointer:
            step = self._child(node, token)
            if step is None:
                return self._nearest(node, key)
            node, key = step
        if part == "key" and key is not None:
            return self.source.span_of(key)
        return self.source.span_of(node)

    def pointer_at(self, offset: int) -> tuple[Pointer, str]:
        """The token-stack machine over the tokens before `offset`, level by level; inside each
        container the error-free stretch before the caret is skipped (see `_container_tokens`),
        so a request costs O(depth x log siblings) tree steps plus the tokens of one member per
        level instead of every token before the caret."""
        source = self.source
        machine = TokenStack()
        limit = min(source.offsets.byte_of(offset), self._clean_prefix_end())
        descend: Callable[[Any], Iterator[Token]] = lambda node: self._container_tokens(machine, node, limit)  # noqa: E731
        return machine.locate(source.tokens(source.top_children()), offset, descend)

    def _clean_prefix_end(self) -> int:
        """Byte offset up to which the text is plain JSON as far as the machine is concerned: no
        ERROR or MISSING node, no comment, no string that is unclosed or spans lines. Computed
        once per document (a strictly valid document cannot hold the last three)."""
        if self._clean_end is None:
            end = _first_error_byte(self.source.tree.root_node, len(self.source.data))
            if not self.valid:
                match = _CLEAN_TEXT.match(self.source.data, 0, end)
                end = match.end() if match is not None else 0
            self._clean_end = end
        return self._clean_end

    def _container_tokens(self, machine: TokenStack, node: Node, limit: int) -> Iterator[Token]:
        """The tokens of a container's children, as `locate` descends into it. In an error-free
        stretch the children alternate value (or pair) and ',' after the opening bracket, so the
        machine's state right after the comma at child 2m is known without reading what comes
        before it: an object expects a key, an array expects element m. That comma is the last
        one ending at or before `limit` (the caret, or the end of the clean prefix), found by
        binary search; the machine then reads on from the child after it."""
        source = self.source
        count = node.child_count
        low, high = 0, (count - 2) // 2  # commas at 2, 4, ..., 2 * high (the last child is the closer)
        while low < high:
            middle = (low + high + 1) // 2
            child = node.child(2 * middle)
            if child is not None and child.end_byte <= limit:
                low = middle
            else:
                high = middle - 1
        comma = node.child(2 * low) if low > 0 else None
        if comma is None or comma.type != "," or comma.is_missing:
            yield from source.tokens(node.children)
            return
        opener = node.child(0)
        if opener is None or opener.type not in ("{", "["):
            yield from source.tokens(node.children)
            return
        depth = len(machine.stack)
        yield from source.tokens([opener])
        frame = machine.stack[-1]
        kind = OBJECT if opener.type == "{" else ARRAY
        if len(machine.stack) != depth + 1 or frame.kind != kind or frame.phase not in (EXPECT_KEY, EXPECT_VALUE):
            # The machine did not open this container as a fresh frame: read it all.
            yield from source.tokens(_siblings(node.child(1)))
            return
        start, end = source.span_of(comma)
        frame.comma = Token(",", start, end, ",")
        if kind == OBJECT:
            frame.phase, frame.key, frame.key_span = EXPECT_KEY, None, None
        else:
            frame.phase, frame.index = EXPECT_VALUE, low
        yield from source.tokens(_siblings(comma.next_sibling))

    def keys(self, pointer: Pointer) -> set[str] | None:
        node = self.source.root_value()
        for token in pointer:
            step = self._child(node, token) if node is not None else None
            if step is None:
                return None
            node = step[0]
        if node is None or node.type != "object":
            return None
        keys = (pair.child_by_field_name("key") for pair in _flattened(node, "pair"))
        return {string_value(self.source.text_of(key)) for key in keys if key is not None}

    def _nearest(self, node: Node, key: Node | None) -> Span:
        """Where to point for a pointer that does not exist below `node`."""
        if key is not None:
            return self.source.span_of(key)
        if node.type in ("object", "array") and node.child_count:
            return self.source.span_of(node.children[0])  # the opening bracket
        return self.source.span_of(node)

    def _child(self, node: Node, token: str) -> tuple[Node, Node | None] | None:
        if node.type == "object":
            return self._member(node, token)
        if node.type == "array":
            index = array_index(token)
            if index is None:
                return None
            if self.valid and not node.has_error:
                item = node.named_child(index) if index < node.named_child_count else None
            else:
                item = next((value for i, value in enumerate(self._items(node)) if i == index), None)
            return (item, None) if item is not None else None
        return None

    def _member(self, node: Node, token: str) -> tuple[Node, Node | None] | None:
        found = None
        for pair in _flattened(node, "pair"):
            key = pair.child_by_field_name("key")
            if key is not None and string_value(self.source.text_of(key)) == token:
                found = pair  # the last duplicate wins, as in the parsed value
        key = found.child_by_field_name("key") if found is not None else None
        if found is None or key is None:
            return None
        value = found.child_by_field_name("value")
        return (value if value is not None else key), key

    @staticmethod
    def _items(node: Node) -> Iterator[Node]:
        for child in _flattened(node, *_VALUE_TYPES):
            if not child.is_missing:
                yield child


# Plain JSON text: runs outside strings without '/' (comments), and strings closed on their line.
_CLEAN_TEXT = re.compile(rb'(?:[^"/]++|"(?:[^"\\\n\r]++|\\[^\n\r])*+")*+')


def _first_error_byte(root: Node, default: int) -> int:
    """Start of the first ERROR or MISSING node, `default` when there is none."""
    node = root
    while node.has_error:
        if node.is_error or node.is_missing:
            return node.start_byte
        child = next((c for c in node.children if c.has_error or c.is_missing), None)
        if child is None:
            return node.start_byte
        node = child
    return default


def _siblings(node: Node | None) -> Iterator[Node]:
    while node is not None:
        yield node
        node = node.next_sibling


def _flattened(node: Node, *types: str) -> Iterator[Node]:
    """Children of `node` of the given types, looking inside ERROR children (tree-sitter wraps
    the member before a missing comma in one)."""
    stack = [iter(node.children)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif child.type == "ERROR":
            stack.append(iter(child.children))
        elif child.type in types:
            yield child


class ScanLocator:
    """Spans recorded by the fallback scan, for documents tree-sitter could not structure."""

    def __init__(self, source: JsonSource, spans: dict[Pointer, SpanRecord]) -> None:
        self.source = source  # kept for the next version's incremental re-parse
        self.text = source.text
        self.spans = spans

    def span(self, pointer: Pointer, part: str) -> Span | None:
        for length in range(len(pointer), -1, -1):
            record = self.spans.get(pointer[:length])
            if record is None:
                continue
            if length == len(pointer):
                return record.key if part == "key" and record.key else record.value
            return record.key or record.head
        return None

    def pointer_at(self, offset: int) -> tuple[Pointer, str]:
        return TokenStack().locate(tokenize(self.text), offset)

    def keys(self, pointer: Pointer) -> set[str] | None:
        depth = len(pointer)
        found = {str(p[-1]) for p in self.spans if len(p) == depth + 1 and tuple(map(str, p[:-1])) == pointer}
        return found or None


def scan(text: str) -> tuple[list[SyntaxIssue], dict[Pointer, SpanRecord]]:
    """The fallback: the whole text through the regex tokenizer and the token-stack machine."""
    issues: list[SyntaxIssue] = []
    spans: dict[Pointer, SpanRecord] = {}
    machine = TokenStack(issues, spans)
    for token in tokenize(text):
        machine.feed(token)
    machine.finish(at_eof=True, whole_document=True)
    return issues, spans


# -- entry point -------------------------------------------------------------------------------


def parse_json(text: str) -> ParsedDocument:
    return parse_source(JsonSource(text, encode_for_parser(text)), LineIndex(text))


def parse_source(source: JsonSource, lines: LineIndex) -> ParsedDocument:
    """The document of `source`, whose tree may already be built (an incremental re-parse)."""
    text = source.text
    outcome = strict_load(text, source.data)
    if outcome.valid:
        return valid_document(source, lines, outcome.value)

    locator: TreeLocator | ScanLocator
    if source.needs_fallback():
        issues, spans = scan(text)
        locator = ScanLocator(source, spans)
    else:
        issues = source.issues()
        locator = TreeLocator(source)
    if outcome.too_deep and not any(issue.message == TOO_DEEP for issue in issues):
        offset = too_deep_offset(text) or 0
        issues.append(SyntaxIssue(TOO_DEEP, offset, min(offset + 1, len(text))))
    return ParsedDocument(text, "json", None, _final_issues(issues, outcome.error, text), lines=lines,
                          locator=locator)


def valid_document(source: JsonSource, lines: LineIndex, value: Any) -> ParsedDocument:
    return ParsedDocument(source.text, "json", value, [], lines=lines, locator=TreeLocator(source, valid=True))


def _final_issues(issues: list[SyntaxIssue], error: json.JSONDecodeError | None, text: str) -> list[SyntaxIssue]:
    """Sorted, without repeats. The strict parser's first error is added when nothing else was
    found before it: tree-sitter-json accepts a few things JSON does not (a tab inside a string,
    `1.`, `"\\u12"`), and those would otherwise go unreported."""
    if error is not None and all(issue.start > error.pos for issue in issues):
        issues.append(_decoder_issue(error, text))
    if not issues:  # invalid, yet nothing located the problem: still say so
        issues.append(SyntaxIssue("invalid JSON", 0, min(1, len(text))))
    ordered = sorted(issues, key=lambda issue: (issue.start, issue.end))
    return _without_echoes(ordered, text)


def _without_echoes(issues: list[SyntaxIssue], text: str) -> list[SyntaxIssue]:
    """Recovery after a syntax error is a guess; drop what is most likely its echo:
    - an issue overlapping the one before it (the same token seen two ways);
    - on a line with an unclosed string, all but its first issue (a stray quote turns the rest
      of the line inside out: strings become words and words strings);
    - all but the innermost of the "unexpected end of document" reports of nested containers
      (they share one position; the innermost is the one to fix first, and was reported last).
    """
    result: list[SyntaxIssue] = []
    for issue in issues:
        previous = result[-1] if result else None
        if previous is None:
            result.append(issue)
        elif _is_end_of_document(issue) and _is_end_of_document(previous) and previous.start == issue.start:
            result[-1] = issue
        elif _line_break_between(text, previous.start, issue.start):
            result.append(issue)
        elif previous.message == "unclosed string":
            continue
        elif issue.message == "unclosed string":  # keep only the line's first issue
            while len(result) > 1 and not _line_break_between(text, result[-2].start, issue.start):
                result.pop()
        elif issue.start >= previous.end and issue.start > previous.start:
            result.append(issue)
    return result


def _is_end_of_document(issue: SyntaxIssue) -> bool:
    return issue.message.startswith("unexpected end of document")


def _line_break_between(text: str, start: int, end: int) -> bool:
    return text.find("\n", start, end) != -1 or text.find("\r", start, end) != -1
