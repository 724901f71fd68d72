"""JSON pointers (RFC 6901) as tuples of reference tokens, and back."""

from __future__ import annotations

from collections.abc import Iterable

Pointer = tuple[str, ...]
PointerLike = str | Iterable[str | int]


def parse_pointer(pointer: PointerLike) -> Pointer:
    """Reference tokens of a pointer: "" is the root; "/a~1b/0" is ("a/b", "0").

    Token sequences (e.g. a jsonschema error's `absolute_path`) are accepted as they are. A
    string without the leading "/" is read as if it had one: callers build these by hand, and a
    lookup should not fail on that.
    """
    if not isinstance(pointer, str):
        return tuple(str(token) for token in pointer)
    if pointer == "":
        return ()
    if pointer.startswith("/"):
        pointer = pointer[1:]
    return tuple(_unescape(token) for token in pointer.split("/"))


def format_pointer(tokens: Iterable[str | int]) -> str:
    return "".join("/" + _escape(str(token)) for token in tokens)


def _unescape(token: str) -> str:
    # Order matters: "~01" is "~1" literally, not "/".
    return token.replace("~1", "/").replace("~0", "~") if "~" in token else token


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1") if ("~" in token or "/" in token) else token


def array_index(token: str) -> int | None:
    """The index a token names in an array, or None ("-", leading zeros, signs, not a number)."""
    if not token.isdigit() or not token.isascii() or (len(token) > 1 and token[0] == "0"):
        return None
    return int(token)


def resolve_pointer(document: object, pointer: PointerLike) -> object:
    """The value a pointer names in a parsed document, or None when it names nothing."""
    node = document
    for token in parse_pointer(pointer):
        if isinstance(node, list):
            index = array_index(token)
            if index is None or index >= len(node):
                return None
            node = node[index]
        elif isinstance(node, dict):
            node = node.get(token)
        else:
            return None
    return node


def escape_token(token: str) -> str:
    """One reference token, escaped for a pointer ("a/b" -> "a~1b")."""
    return _escape(token)
