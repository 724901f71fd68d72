"""`context-assembly format [--check] [PATHS]`: lay out every definition file canonically."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

# folders under .codebolt/ that hold data, never definitions
_DATA_DIRS = {"db", "memory", "vectordb", "kuzu", ".locks"}


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "format", help="format the .codebolt/ definition files (canonical key order, stable indentation)",
        description="Format every definition file (rule engines, context rules, persistent memory, ingestion "
                    "pipelines, graph views, settings) under PATHS: keys in the order of their schema, two-space "
                    "indentation, YAML comments kept. A directory is searched for .codebolt/ folders. With --check "
                    "nothing is written; the exit status is 1 when a file would change or cannot be formatted.",
    )
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                        help="files or directories (default: .)")
    parser.add_argument("--check", action="store_true", help="report the files that would change, write nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..formatting import FormatError, format_text, schema_of_path
    from ..workspace.atomic import write_atomic

    missing = [p for p in args.paths if not Path(p).exists()]
    for path in missing:
        print(f"context-assembly format: no such file or directory: {path}")
    if missing:
        return 2
    status, changed, seen = 0, 0, 0
    for path, explicit in _targets([Path(p) for p in args.paths]):
        schema_name = schema_of_path(path.absolute())
        if schema_name is None:
            if explicit:
                print(f"{path}: not a definition file under .codebolt/ (skipped)")
            continue
        seen += 1
        try:
            text = path.read_bytes().decode("utf-8")  # its line endings as they are (format_text keeps them)
            formatted = format_text(text, path.name, schema_name)
        except (OSError, UnicodeDecodeError, FormatError) as exc:
            print(f"{path}: cannot format: {exc}")
            status = 1
            continue
        if formatted == text:
            continue
        changed += 1
        if args.check:
            print(f"would reformat {path}")
            status = 1
        else:
            write_atomic(path, formatted.encode("utf-8"))
            print(f"reformatted {path}")
    verb = "would be reformatted" if args.check else "reformatted"
    print(f"{changed} file(s) {verb}, {seen - changed} already formatted")
    return status


def _targets(paths: list[Path]) -> Iterator[tuple[Path, bool]]:
    for path in paths:
        if path.is_file():
            yield path, True
            continue
        owner = _enclosing_codebolt(path)
        if owner is not None:  # a folder inside .codebolt/ (it found nothing and passed --check)
            yield from _files(owner, path.resolve())
            continue
        for codebolt in sorted(_codebolt_dirs(path)):
            yield from _files(codebolt, codebolt)


def _files(codebolt: Path, under: Path) -> Iterator[tuple[Path, bool]]:
    """The definition files under `under`, a folder of `codebolt` (its data folders left out)."""
    for file in sorted(under.rglob("*")):
        relative = file.relative_to(codebolt).parts
        if file.is_file() and not _DATA_DIRS & set(relative[:-1]):
            yield file, False


def _enclosing_codebolt(directory: Path) -> Path | None:
    """The `.codebolt/` folder `directory` lies inside (not: is), if any."""
    return next((parent for parent in directory.resolve().parents if parent.name == ".codebolt"), None)


def _codebolt_dirs(directory: Path) -> Iterator[Path]:
    if directory.name == ".codebolt":
        yield directory
        return
    for found in directory.rglob(".codebolt"):
        if found.is_dir() and "node_modules" not in found.parts:
            yield found
