"""A JSON document re-parsed after an edit, from its previous version.

- The tree: tree-sitter re-parses incrementally from a copy of the previous tree (the previous
  version stays usable by whoever still holds it).
- The line index: shifted, not recomputed.
- The value, when the previous version was valid: only the smallest value that strictly contains
  the edit is read again (by the strict parser) and put in place copy-on-write along its pointer,
  so every value the edit did not touch is the very object it was (later stages cache results
  per object). Members of that value before and after the edit are reused too, and whitespace
  between tokens changes no value at all. Anything else (an edit that breaks the document, or
  one in a broken document) reads the whole text strictly, exactly as a fresh parse does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tree_sitter import Node, Tree

from .document import ParsedDocument
from .edits import TextEdit, text_edit
from .json_tokens import string_value
from .json_tree import JsonSource, parse_json, parse_source, parse_tree, strict_load, valid_document
from .nesting import MAX_DEPTH, value_too_deep
from .pointers import resolve_pointer
from .utf8_offsets import encode_for_parser

_VALUES = frozenset({"object", "array", "string", "number", "true", "false", "null"})
_WHITESPACE = frozenset(" \t\n\r")
_NO_SPLICE = object()


def reparse_json(previous: ParsedDocument, text: str) -> ParsedDocument:
    """`text` parsed, reusing `previous` (a JSON document parsed from an earlier version of it)."""
    old = getattr(previous.locator, "source", None)
    edit = text_edit(previous.text, text)
    if edit is None:
        return previous
    if not isinstance(old, JsonSource):
        return parse_json(text)
    data = encode_for_parser(text)
    source = JsonSource(text, data, _edited_tree(old, data, text, edit))
    lines = previous.lines.edited(text, edit.start, edit.old_end, edit.new_end)
    if previous.ok and source.has_tree and not old.tree.root_node.has_error \
            and not source.tree.root_node.has_error:
        value = _spliced(previous, old, source, edit)
        if value is not _NO_SPLICE:
            return valid_document(source, lines, value)
    return parse_source(source, lines)


# -- the tree ------------------------------------------------------------------------------------


def _edited_tree(old: JsonSource, data: bytes, text: str, edit: TextEdit) -> Tree | None:
    """The new tree, incrementally; None (built on first use) when the old one never was."""
    if not old.has_tree:
        return None
    start, old_end = old.offsets.byte_of(edit.start), old.offsets.byte_of(edit.old_end)
    new_end = start + len(encode_for_parser(text[edit.start : edit.new_end]))
    tree = old.tree.copy()
    tree.edit(start_byte=start, old_end_byte=old_end, new_end_byte=new_end,
              start_point=_point(old.data, start), old_end_point=_point(old.data, old_end),
              new_end_point=_point(data, new_end))
    return parse_tree(data, tree)


def _point(data: bytes, byte: int) -> tuple[int, int]:
    """tree-sitter's (row, byte column): rows end at "\\n" only."""
    return data.count(b"\n", 0, byte), byte - (data.rfind(b"\n", 0, byte) + 1)


# -- the value -----------------------------------------------------------------------------------


def _spliced(previous: ParsedDocument, old: JsonSource, new: JsonSource, edit: TextEdit) -> Any:
    start, old_end = old.offsets.byte_of(edit.start), old.offsets.byte_of(edit.old_end)
    node, in_key = _enclosing_value(old.tree.root_node, start, old_end)
    if node is None or node.type in ("object", "array"):
        if not in_key and _blank(previous.text[edit.start : edit.old_end]) \
                and _blank(new.text[edit.start : edit.new_end]):
            return previous.value  # whitespace between tokens
        if node is None:
            return _NO_SPLICE
    # A text diff is ambiguous: '{"a": 1}, ' typed before '{' reads as '"a": 1}, {' typed inside
    # the next member. When the innermost value no longer parses, its container is tried once.
    for candidate in (node, _container(node)):
        if candidate is None:
            break
        value = _splice_at(previous, old, new, candidate, (start, old_end, old_end + len(new.data) - len(old.data)))
        if value is not _NO_SPLICE:
            return value
    return _NO_SPLICE


def _container(node: Node) -> Node | None:
    parent = node.parent
    if parent is not None and parent.type == "pair":
        parent = parent.parent
    return parent if parent is not None and parent.type in ("object", "array") else None


def _splice_at(previous: ParsedDocument, old: JsonSource, new: JsonSource, node: Node,
               edit: tuple[int, int, int]) -> Any:
    """The new value with the value at `node` (old tree) read again, else _NO_SPLICE."""
    path = _pointer(old, node)
    if path is None:
        return _NO_SPLICE
    delta = edit[2] - edit[1]
    # by characters: `data` has lone surrogates replaced, the text (what the value is read from) not
    first, last = old.offsets.char_of(node.start_byte), old.offsets.char_of(node.end_byte)
    piece = new.text[first : last + len(new.text) - len(old.text)]
    outcome = strict_load(piece, encode_for_parser(piece))
    if not outcome.valid or (path and value_too_deep(outcome.value, MAX_DEPTH - len(path))):
        return _NO_SPLICE
    value = outcome.value
    if node.type in ("object", "array"):
        twin = new.tree.root_node.descendant_for_byte_range(node.start_byte, node.end_byte + delta)
        if twin is None or twin.type != node.type:
            return _NO_SPLICE
        _reuse_members(value, resolve_pointer(previous.value, path), old, node, new, twin, edit)
    return _replaced(previous.value, path, value)


def _blank(text: str) -> bool:
    return all(char in _WHITESPACE for char in text)


def _enclosing_value(root: Node, start: int, end: int) -> tuple[Node | None, bool]:
    """The innermost value (not a property key) whose bytes strictly contain `[start, end)`, and
    whether the edit is inside a property key."""
    node: Node | None = root.descendant_for_byte_range(start, end)
    in_key = False
    while node is not None:
        if node.type in _VALUES and node.start_byte < start and end < node.end_byte:
            if not _is_key(node):
                return node, in_key
            in_key = True
        node = node.parent
    return None, in_key


def _is_key(node: Node) -> bool:
    parent = node.parent
    if parent is None or parent.type != "pair":
        return False
    key = parent.child_by_field_name("key")
    return key is not None and key.start_byte == node.start_byte


def _pointer(source: JsonSource, node: Node) -> tuple[str, ...] | None:
    """Reference tokens from the root value to `node`; None when a member on the way is shadowed
    by a later duplicate key (the parsed value holds the other one)."""
    tokens: list[str] = []
    parent = node.parent
    while parent is not None and parent.type != "document":
        if parent.type == "pair":
            key, container = parent.child_by_field_name("key"), parent.parent  # container: the object
            if key is None or container is None:
                return None
            token = string_value(source.text_of(key))
            if _shadowed(source, parent, token):
                return None
            tokens.append(token)
            node = container
        elif parent.type == "array":
            tokens.append(str(_index(parent, node)))
            node = parent
        else:
            return None
        parent = node.parent
    return tuple(reversed(tokens))


def _shadowed(source: JsonSource, pair: Node, key: str) -> bool:
    sibling = pair.next_named_sibling
    while sibling is not None:
        other = sibling.child_by_field_name("key") if sibling.type == "pair" else None
        if other is not None and string_value(source.text_of(other)) == key:
            return True
        sibling = sibling.next_named_sibling
    return False


def _index(array: Node, item: Node) -> int:
    """`item`'s index among the array's values (a valid tree: its named children)."""
    return _first(array, lambda child: child.end_byte > item.start_byte)


def _first(container: Node, test: Callable[[Node], bool]) -> int:
    """The index of the first named child that passes `test` (which, in child order, fails and
    then passes), by bisection; the child count when none does."""
    low, high = 0, container.named_child_count
    while low < high:
        middle = (low + high) // 2
        child = container.named_child(middle)
        if child is None or test(child):
            high = middle
        else:
            low = middle + 1
    return low


def _replaced(root: Any, path: tuple[str, ...], value: Any) -> Any:
    """`root` with the value at `path` replaced, copying only the containers on the way."""
    if not path:
        return value
    head = path[0]
    copy: Any
    if isinstance(root, list):
        copy = list(root)
        copy[int(head)] = _replaced(root[int(head)], path[1:], value)
    else:
        copy = dict(root)
        copy[head] = _replaced(root[head], path[1:], value)
    return copy


def _reuse_members(value: Any, old_value: Any, old: JsonSource, node: Node, new: JsonSource, twin: Node,
                   edit: tuple[int, int, int]) -> None:
    """Put the previous objects back for the members of a re-read container that lie wholly
    before or after the edit: their text, hence their value, is unchanged. One that merely touches
    it is read again: a digit typed right after `1` (or `-` right before it) is part of it."""
    start, old_end, new_end = edit
    if node.type == "array":
        before = _first(node, lambda child: child.end_byte >= start)
        after = node.named_child_count - _first(node, lambda child: child.start_byte > old_end)
        for i in range(min(before, len(value))):
            value[i] = old_value[i]
        for i in range(1, min(after, len(value) - before) + 1):
            value[-i] = old_value[-i]
        return
    touched = _keys(old, node, start, old_end) | _keys(new, twin, start, new_end)
    for key, member in old_value.items():
        if key not in touched and key in value:
            value[key] = member


def _keys(source: JsonSource, node: Node, start: int, end: int) -> set[str]:
    """Keys of the members that overlap `[start, end]`."""
    keys = set()
    for pair in node.named_children:
        if pair.type == "pair" and pair.start_byte <= end and pair.end_byte >= start:
            key = pair.child_by_field_name("key")
            if key is not None:
                keys.add(string_value(source.text_of(key)))
    return keys
