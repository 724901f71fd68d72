"""`context-assembly reference TOPIC`: the registries as Markdown tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..registry.reference import TOPICS, fill_markers


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("reference", help="print operators, variables, sections, steps or "
                                 "ingestion triggers/processors as a Markdown table")
    parser.add_argument("topic", nargs="?", choices=sorted(TOPICS))
    parser.add_argument("--fill", metavar="FILE", help="rewrite the <!-- reference:TOPIC --> blocks of FILE")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.fill:
        path = Path(args.fill)
        path.write_text(fill_markers(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if not args.topic:
        print("context-assembly reference: name a topic (" + ", ".join(sorted(TOPICS)) + ") or --fill FILE")
        return 2
    print(TOPICS[args.topic]())
    return 0
