"""`context-assembly` entry point: one subcommand per module.

A command line that names its command builds the parser of that command alone, so `serve` (an
editor's or an agent's start-up) does not import the modules of the others (the registries, RE2).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .. import __version__

COMMANDS = {  # command -> the module of this package that registers it
    "assemble": "assemble", "check": "check", "db": "db", "evaluate": "evaluate", "format": "formatting",
    "memory": "memory", "reference": "reference", "replay": "replay", "diff": "replay", "serve": "serve",
    "test": "test",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone."""
    parser = argparse.ArgumentParser(
        prog="context-assembly",
        description="Context Assembly Server: rules, memory pipelines and token-budgeted context for agents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(f"{__package__}.{name}").register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
    args, extra = parser.parse_known_args(argv)
    adopt = getattr(args, "adopt_extra", None)  # a command may take a positional given after its options
    if extra and not (adopt is not None and adopt(args, extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.run(args))
    except BrokenPipeError:  # `context-assembly check | head` is fine
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
