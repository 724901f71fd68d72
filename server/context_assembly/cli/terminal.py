"""What every command shares about the terminal: finding the workspace, colour, counted nouns.

The workspace is `--workspace DIR` (or a command's positional), else the nearest folder holding
`.codebolt/` walking up from the current directory (as git and ruff find their roots), else the
current directory. Colour is on when the stream is a terminal, unless `--no-color` or `NO_COLOR`
(any value, https://no-color.org) says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

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
    if getattr(args, "no_color", False) or "NO_COLOR" in os.environ:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Painter:
    """Wraps text in ANSI styles, or leaves it alone when colour is off."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        if not self.enabled or style not in _STYLES:
            return text
        return f"\x1b[{_STYLES[style]}m{text}\x1b[0m"


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
    print(f"context-assembly {command}: {message}", file=sys.stderr)
    for line in lines:
        print(line, file=sys.stderr)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 item`, `2 items`, `0 errors`."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
