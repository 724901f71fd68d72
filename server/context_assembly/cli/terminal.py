"""What every command shares about the terminal: finding the workspace, colour, counted nouns.

The workspace is `--workspace DIR` (or a command's positional), else the nearest folder holding
`.codebolt/` walking up from the current directory (as git and ruff find their roots), else the
current directory. Colour is on when the stream is a terminal, unless `--no-color` or `NO_COLOR`
(any non-empty value, https://no-color.org) says otherwise.

What the commands print comes from memory and definition files, which anyone may have written:
`Painter.finish` shows every control character, C1 code and bidirectional override in it as an
escape (`\x1b`, `\r`, `\u202e`), so no text can move the cursor, rewrite a line, set the window
title or the clipboard, or reorder what follows; the painter's own styles are put in only after
that, from markers no text can forge. `one_line` also shows a text's line breaks, for fields that
are one line of the report (a title, a reference, a reason).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any, TextIO

import orjson

from ..controls import BIDI, C1, LINE_BREAKS

CODEBOLT = ".codebolt"

_STYLES = {"error": "1;31", "warning": "1;33", "note": "1;36", "bold": "1", "dim": "2", "ok": "32",
           "path": "1", "code": "2", "no": "31"}


def add_common(parser: argparse.ArgumentParser, *, workspace_help: str = "the workspace root") -> None:
    parser.add_argument("--workspace", metavar="DIR", default=None,
                        help=f"{workspace_help} (default: the nearest folder holding .codebolt/, from the "
                             "current directory up)")
    parser.add_argument("--no-color", "--no-colour", dest="no_color", action="store_true",
                        help="plain text even on a terminal (also: the NO_COLOR environment variable)")


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds `.codebolt/`."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / CODEBOLT).is_dir():
            return folder
    return None


def workspace_root(given: str | None) -> Path:
    """The folder named, else the one found walking up from the current directory, else it."""
    if given is not None:
        return Path(given)
    return find_root(Path.cwd()) or Path.cwd()


def required_root(command: str, option: str | None, positional: str | None = None) -> Path | None:
    """The workspace of a command that needs one (`--workspace`, or its positional WORKSPACE, else
    found walking up); None, with why on stderr, when it is given twice, is not a directory or
    holds no `.codebolt/` (the command's exit status is then 2)."""
    if option and positional and option != positional:
        print(f"context-assembly {command}: give the workspace once (WORKSPACE or --workspace)", file=sys.stderr)
        return None
    given = option or positional
    if given is None:
        root = find_root(Path.cwd())
        if root is None:
            print(f"context-assembly {command}: no {CODEBOLT}/ folder in {Path.cwd()} or any folder above it "
                  f"(give the workspace root: --workspace DIR)", file=sys.stderr)
        return root
    root = Path(given)
    if not root.is_dir():
        print(f"context-assembly {command}: no such directory: {given}", file=sys.stderr)
        return None
    if not (root / CODEBOLT).is_dir():
        inside = find_root(root)
        hint = f" (it is inside the workspace {shown(inside)})" if inside is not None else ""
        print(f"context-assembly {command}: no {CODEBOLT}/ folder in {shown(root)}{hint}", file=sys.stderr)
        return None
    return root


def write_page(command: str, path: str, page: str) -> bool:
    """Write a trace page (`--html FILE`); False, with why on stderr, when it cannot be written."""
    try:
        Path(path).write_text(page, encoding="utf-8")
    except OSError as exc:
        print(f"context-assembly {command}: cannot write the trace page {path}: {exc.strerror or exc}",
              file=sys.stderr)
        return False
    return True


def shown(path: Path | str) -> str:
    """A path relative to the current directory, so a terminal or a CI log links it to the file."""
    try:
        return os.path.relpath(Path(path).resolve(), Path.cwd())
    except ValueError:  # another drive on Windows
        return os.fspath(path)


def colour_wanted(args: argparse.Namespace, stream: TextIO) -> bool:
    if getattr(args, "no_color", False) or os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional marks and overrides
_HIDDEN = "\x00-\x08\x0b-\x1f" + C1 + BIDI + LINE_BREAKS
_UNSEEN = re.compile(f"[{_HIDDEN}]")
_UNSEEN_OR_BREAK = re.compile(f"[{_HIDDEN}\t\n]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


# what JSON may hold raw but a terminal must not get: DEL, C1 controls, bidirectional overrides
_JSON_UNSEEN = re.compile(f"[{C1}{BIDI}{LINE_BREAKS}]")


def json_text(value: Any) -> str:
    """`value` as indented JSON for the terminal: what orjson writes, with the characters JSON
    leaves raw but a terminal acts on written as `\\uXXXX` escapes (the same JSON value)."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    return _JSON_UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def visible(text: str) -> str:
    """`text` with its control characters and bidirectional overrides shown as escapes."""
    return _UNSEEN.sub(_escape, text)


def one_line(text: object) -> str:
    """A field of one line: its line breaks and tabs shown too (a title must not print a line of its own)."""
    return _UNSEEN_OR_BREAK.sub(_escape, str(text))


class Painter:
    """Wraps text in ANSI styles, or leaves it alone when colour is off. The styles are markers
    (private-use characters and a nonce of this painter) that `finish` turns into escape codes
    after it showed every control character of the text."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._mark = secrets.token_hex(8)
        self._marked = re.compile(f"\ue000{self._mark}([0-9;]+)\ue001")

    def __call__(self, text: str, style: str) -> str:
        if not self.enabled or style not in _STYLES:
            return text
        return f"\ue000{self._mark}{_STYLES[style]}\ue001{text}\ue000{self._mark}0\ue001"

    def finish(self, text: str) -> str:
        """The report as the terminal gets it: controls shown, then the styles put in."""
        shown = visible(text)
        return self._marked.sub(lambda m: f"\x1b[{m.group(1)}m", shown) if self.enabled else shown


def painter(args: argparse.Namespace, stream: TextIO) -> Painter:
    return Painter(colour_wanted(args, stream))


def report_invalid(command: str, message: str, errors: list[dict[str, Any]]) -> None:
    """An InvalidParams error on stderr: the headline, then each `{path, message}` it lists, each
    said once (an error whose message is the headline adds only its path)."""
    lines = []
    for error in errors:
        detail = str(error.get("message") or "")
        path = str(error.get("path") or "/")
        if detail == message:
            message = f"{path}: {message}" if len(errors) == 1 else message
            if len(errors) == 1:
                continue
        lines.append(f"  {path}: {detail}")
    print(visible(f"context-assembly {command}: {one_line(message)}"), file=sys.stderr)
    for line in lines:
        print(one_line(line), file=sys.stderr)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 item`, `2 items`, `0 errors`."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
