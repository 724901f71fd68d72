"""`context-assembly` entry point: one subcommand per module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from . import assemble, check, db, evaluate, formatting, memory, reference, replay, serve, test

COMMANDS = (assemble, check, db, evaluate, formatting, memory, reference, replay, serve, test)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="context-assembly",
        description="Context Assembly Server: rules, memory pipelines and token-budgeted context for agents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:  # `context-assembly check | head` is fine
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
