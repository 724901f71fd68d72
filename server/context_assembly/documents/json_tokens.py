"""JSON tokens: one shape for tokens that come from tree-sitter nodes and from the fallback
regex tokenizer, so one token-stack machine (`json_stack`) can validate and locate over both.

Offsets are `str` character offsets. The tokenizer is deliberately tolerant: it recognises the
things people type by mistake (single quotes, comments, NaN, unquoted keys, a string left open
at the end of a line) so the machine can name them instead of saying "unexpected character".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import attrs

# Token kinds. Punctuation uses the character itself.
STRING = "string"  # double-quoted; may be unclosed (runs to the end of its line)
SQ_STRING = "sq_string"  # single-quoted: an error, but a string for the structure
SCALAR = "scalar"  # a valid number, true, false or null
INVALID = "invalid"  # any other run of characters (NaN, 0x1F, undefined, an unquoted word)
COMMENT = "comment"
NODE = "node"  # a whole tree-sitter object/array, descended into only when needed
PUNCTUATION = frozenset("{}[]:,")
ATOMS = frozenset({STRING, SQ_STRING, SCALAR, INVALID})


@attrs.define(slots=True)
class Token:
    kind: str
    start: int
    end: int
    text: str = ""
    node: Any = None  # the tree-sitter node of a NODE token
    unclosed: bool = False  # a NODE whose closing bracket tree-sitter had to make up


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\n\r]+)
  | (?P<string>"[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"?)
  | (?P<sq>'[^'\\\n\r]*(?:\\[^\n\r][^'\\\n\r]*)*'?)
  | (?P<punct>[{}\[\]:,])
  | (?P<comment>//[^\n\r]*|/\*(?:[^*]|\*(?!/))*(?:\*/)?)
  | (?P<word>[^ \t\n\r"'{}\[\]:,/]+)
  | (?P<other>[\s\S])
    """,
    re.VERBOSE,
)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_CLOSED_STRING = re.compile(r'"(?:[^"\\\n\r]|\\[^\n\r])*"')
_STRING_PROBLEM = re.compile(
    r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|(?P<escape>\\(?:u[0-9a-fA-F]{0,3}|[\s\S]?))|(?P<control>[\x00-\x1f])'
)


def tokenize(text: str) -> Iterator[Token]:
    """The fallback tokenizer: every character of `text` ends up in a token or in whitespace."""
    for match in _TOKEN.finditer(text):
        group = match.lastgroup
        if group == "ws":
            continue
        value = match.group()
        if group == "punct":
            kind = value
        elif group == "comment":
            kind = COMMENT
        else:
            kind = classify_piece(value)
        yield Token(kind, match.start(), match.end(), value)


def classify_piece(text: str) -> str:
    """Kind of a run of non-punctuation characters."""
    if text.startswith('"'):
        return STRING
    if text.startswith("'"):
        return SQ_STRING
    if text in ("true", "false", "null") or _NUMBER.fullmatch(text):
        return SCALAR
    return INVALID


def is_closed_string(text: str) -> bool:
    return _CLOSED_STRING.fullmatch(text) is not None


def string_value(text: str) -> str:
    """The decoded content of a (possibly unclosed, possibly badly escaped) string token."""
    body = text[1:-1] if is_closed_quoted(text) else text[1:]
    if "\\" not in body or not text.startswith('"'):
        return body
    try:
        decoded = json.loads('"' + body + '"')
    except ValueError:
        return body
    return decoded if isinstance(decoded, str) else body


def is_closed_quoted(text: str) -> bool:
    """Whether a string token (either quote style) has its closing quote."""
    if text.startswith('"'):
        return is_closed_string(text)
    if len(text) < 2 or not text.endswith("'"):
        return False
    inner = text[1:-1]
    trailing_backslashes = len(inner) - len(inner.rstrip("\\"))
    return trailing_backslashes % 2 == 0  # an odd count escapes the final quote


def bare_text(token: Token) -> str:
    """What a token names when used (wrongly) as a property key."""
    if token.kind in (STRING, SQ_STRING):
        return string_value(token.text)
    return token.text


def string_problems(text: str) -> Iterator[tuple[str, int, int]]:
    """(message, start, end) relative to the token for what makes a string token invalid JSON."""
    if not is_closed_string(text):
        yield "unclosed string", 0, len(text)
        body_end = len(text)
    else:
        body_end = len(text) - 1
    for match in _STRING_PROBLEM.finditer(text, 1, body_end):
        if match.group("escape") is not None:
            shown = match.group("escape")
            yield f"invalid escape sequence '{shown}'", match.start(), match.end()
        elif match.group("control") is not None:
            yield (
                f"control character U+{ord(match.group('control')):04X} in string (escape it, e.g. \\n or \\t)",
                match.start(),
                match.end(),
            )


def invalid_message(text: str) -> str:
    """Readable message for an INVALID token used as a value."""
    shown = text if len(text) <= 30 else text[:27] + "..."
    if text in ("NaN", "Infinity", "-Infinity", "+Infinity"):
        return f"{text} is not allowed in JSON"
    replacements = {
        "True": "true",
        "False": "false",
        "None": "null",
        "TRUE": "true",
        "FALSE": "false",
        "NULL": "null",
        "Null": "null",
    }
    if text in replacements:
        return f"'{text}' is not valid JSON, write '{replacements[text]}'"
    if text == "undefined":
        return "'undefined' is not valid JSON"
    if text[:1] in "0123456789-+.":
        return f"invalid number '{shown}'"
    if text == "/":
        return "unexpected '/'"
    return f"unexpected '{shown}' (strings must be in double quotes)"


def describe(token: Token) -> str:
    """How a token is named inside a message."""
    if token.kind == NODE:
        return "an object" if token.node is not None and token.node.type == "object" else "an array"
    if token.kind in (STRING, SQ_STRING):
        return "a string"
    text = token.text if len(token.text) <= 20 else token.text[:17] + "..."
    return f"'{text}'"
