"""YAML documents: PyYAML's node tree gives the value and the positions.

`yaml.SafeLoader` composes a node tree whose marks are `str` character offsets; the value is
constructed from that same tree (one parse, the same result as `yaml.safe_load`). Where the
cursor is not on a node (a blank line, text being typed) or the text does not parse, the
pointer comes from indentation (`yaml_indent`).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode, SequenceNode

from .document import ParsedDocument, Span, SyntaxIssue
from .lines import LineIndex
from .nesting import MAX_DEPTH, TOO_DEEP, too_deep_offset
from .pointers import Pointer, array_index
from .yaml_indent import indentation_keys, indentation_pointer

RECURSIVE_ALIAS = "recursive alias: a node that contains itself cannot be used as JSON data"


def parse_yaml(text: str) -> ParsedDocument:
    root: Node | None = None
    value: Any = None
    issues: list[SyntaxIssue] = []
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)  # checks for unprintable characters already
        root = loader.get_single_node()
        problem = _structure_problem(root, text) if root is not None else None
        if problem is not None:
            issues.append(problem)
        elif root is not None:
            value = loader.construct_document(root)
    except yaml.YAMLError as error:
        issues.append(_issue_from_error(error, text))
    except RecursionError:  # PyYAML composes recursively: a few hundred flow levels are enough
        offset = too_deep_offset(text) or 0
        issues.append(SyntaxIssue(TOO_DEEP, offset, min(offset + 1, len(text))))
        root = None
    finally:
        if loader is not None:
            loader.dispose()
    lines = LineIndex(text)
    return ParsedDocument(
        text, "yaml", None if issues else value, issues, lines, locator=YamlLocator(text, root, lines)
    )


def _issue_from_error(error: yaml.YAMLError, text: str) -> SyntaxIssue:
    if isinstance(error, yaml.reader.ReaderError):
        character = error.character if isinstance(error.character, int) else ord(str(error.character)[:1] or "?")
        position = error.position
        return SyntaxIssue(f"character U+{character:04X} is not allowed in YAML", position, position + 1)
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        problem, context = error.problem, error.context
        message = f"{problem} ({context})" if problem and context else (problem or context or str(error))
        position = min(mark.index, len(text)) if mark is not None else 0
        return SyntaxIssue(message, position, min(position + 1, len(text)))
    return SyntaxIssue(str(error) or "invalid YAML", 0, min(1, len(text)))


def _structure_problem(root: Node, text: str) -> SyntaxIssue | None:
    """Depth beyond MAX_DEPTH or an alias cycle, found with an iterative depth-first walk."""
    entered: set[int] = set()  # on the current path
    done: set[int] = set()
    stack: list[tuple[Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, leaving = stack.pop()
        if leaving:
            entered.discard(id(node))
            done.add(id(node))
            continue
        if not isinstance(node, CollectionNode) or id(node) in done:
            continue
        if depth > MAX_DEPTH:
            return _node_issue(TOO_DEEP, node, text)
        entered.add(id(node))
        stack.append((node, depth, True))
        for child in _children(node):
            if id(child) in entered:
                return _node_issue(RECURSIVE_ALIAS, child, text)
            stack.append((child, depth + 1, False))
    return None


def _node_issue(message: str, node: Node, text: str) -> SyntaxIssue:
    start = node.start_mark.index
    return SyntaxIssue(message, start, min(start + 1, len(text)))


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


class YamlLocator:
    def __init__(self, text: str, root: Node | None, lines: LineIndex) -> None:
        self.text = text
        self.root = root
        self.lines = lines

    def node_span(self, node: Node) -> Span:
        """A block collection's end mark lies past trailing comments and blank lines, and a block
        scalar keeps its final line breaks: end at the last character that belongs to it."""
        start, end = node.start_mark.index, node.end_mark.index
        last, seen = node, set()
        while isinstance(last, CollectionNode) and not last.flow_style and last.value and id(last) not in seen:
            seen.add(id(last))  # an alias cycle must not loop forever
            last = last.value[-1][1] if isinstance(last, MappingNode) else last.value[-1]
        if last is not node:
            end = max(last.end_mark.index, start)
        return start, start + len(self.text[start:end].rstrip())

    def span(self, pointer: Pointer, part: str) -> Span | None:
        node = self.root
        if node is None:
            return None
        key: Node | None = None
        for token in pointer:
            step = _child(node, token)
            if step is None:
                return self._nearest(node, key)
            node, key = step
        if part == "key" and key is not None:
            return self.node_span(key)
        return self.node_span(node)

    def _nearest(self, node: Node, key: Node | None) -> Span:
        if key is not None:
            return self.node_span(key)
        start = node.start_mark.index
        if isinstance(node, MappingNode) and not node.flow_style and node.value:
            return self.node_span(node.value[0][0])  # a block mapping has no bracket: its first key
        if isinstance(node, CollectionNode):
            return start, min(start + 1, len(self.text))  # '[', '{' or the first '-'
        return self.node_span(node)

    def pointer_at(self, offset: int) -> tuple[Pointer, str]:
        found = self._on_node(offset)
        if found is not None:
            return found[:2]
        return indentation_pointer(self.lines, offset)

    def plain_scalar_at(self, offset: int) -> Span | None:
        r"""The span of the plain (unquoted, not block) value scalar `offset` is on, else
        None. Completion reads such a word alone on its line as the first key of a mapping being
        typed: YAML takes `contribution:\n  pri` or a file holding only `pi` for a scalar value."""
        found = self._on_node(offset)
        if found is None or found[1] != "value" or not isinstance(found[2], ScalarNode):
            return None
        return self.node_span(found[2]) if found[2].style is None else None

    def keys(self, pointer: Pointer) -> set[str] | None:
        """The keys of the mapping at `pointer` (None: no mapping there): from the tree, or from
        indentation when the text does not parse."""
        if self.root is None:
            return indentation_keys(self.lines, pointer)
        node: Node = self.root
        for token in pointer:
            step = _child(node, token)
            if step is None:
                return None
            node = step[0]
        if not isinstance(node, MappingNode):
            return None
        return {_key_name(key) for key, _ in node.value}

    def _on_node(self, offset: int) -> tuple[Pointer, str, Node] | None:
        """The pointer (and the node) when `offset` is on a key or a scalar of the tree, else None."""
        node: Node | None = self.root
        pointer: Pointer = ()
        for _ in range(MAX_DEPTH + 1):  # bounded: aliases can make the tree a cyclic graph
            if node is None:
                return None
            if isinstance(node, ScalarNode):
                start, end = self.node_span(node)
                return (pointer, "value", node) if start <= offset <= end else None
            key = self._key_at(node, pointer, offset)
            if key is not None:
                return key[0], "key", key[1]
            step = self._child_at(node, pointer, offset)
            if step is None:
                return None
            node, pointer = step
        return None

    def _key_at(self, node: Node, pointer: Pointer, offset: int) -> tuple[Pointer, Node] | None:
        if isinstance(node, MappingNode):
            for key, _ in node.value:
                start, end = self.node_span(key)
                if start <= offset <= end:
                    return pointer + (_key_name(key),), key
        return None

    def _child_at(self, node: Node, pointer: Pointer, offset: int) -> tuple[Node, Pointer] | None:
        if isinstance(node, MappingNode):
            children = [(value, _key_name(key)) for key, value in node.value]
        elif isinstance(node, SequenceNode):
            children = [(item, str(index)) for index, item in enumerate(node.value)]
        else:
            return None
        for child, token in children:
            start, end = self.node_span(child)
            if start <= offset <= end:
                return child, pointer + (token,)
        return None


def _key_name(key: Node) -> str:
    return key.value if isinstance(key, ScalarNode) else ""


def _child(node: Node, token: str) -> tuple[Node, Node | None] | None:
    if isinstance(node, MappingNode):
        found = None
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == token:
                found = (value, key)  # the last duplicate wins, as in the constructed value
        return found
    if isinstance(node, SequenceNode):
        index = array_index(token)
        if index is not None and index < len(node.value):
            return node.value[index], None
    return None
