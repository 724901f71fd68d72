"""`context-assembly check [WORKSPACE]`: lint every `.codebolt/` definition file."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check", help="lint every .codebolt/ definition file (syntax, schema, meaning)",
        description="Lint every definition file under WORKSPACE/.codebolt/. Exit status 1 when there is an "
                    "error, 0 otherwise (warnings and hints do not fail).",
    )
    parser.add_argument("workspace", nargs="?", default=".", help="the workspace root (default: .)")
    parser.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.workspace)
    if not root.is_dir():
        print(f"context-assembly check: no such directory: {root}")
        return 2
    from ..workspace.lint import lint_workspace  # the engine loads only when a command runs it
    from ..workspace.loader import load_workspace
    from .report import as_json, as_sarif, as_text

    problems = lint_workspace(load_workspace(root))
    if args.format == "text":
        print(as_text(problems))
    else:
        document = as_json(problems) if args.format == "json" else as_sarif(problems)
        print(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    return 1 if any(p.is_error for p in problems) else 0
