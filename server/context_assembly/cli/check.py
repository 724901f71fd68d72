"""`context-assembly check [WORKSPACE]`: lint every `.codebolt/` definition file."""

from __future__ import annotations

import argparse
import sys

from .terminal import add_common, json_text, painter, required_root, visible

FORMATS = ("text", "json", "sarif", "github")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check", help="lint every .codebolt/ definition file (syntax, schema, meaning)",
        description="Lint every definition file under WORKSPACE/.codebolt/. Exit status 1 when there is a "
                    "problem at the fail level (error by default), 2 when there is no .codebolt/ folder, "
                    "0 otherwise.",
    )
    parser.add_argument("positional_workspace", nargs="?", metavar="WORKSPACE",
                        help="the workspace root (the same as --workspace)")
    add_common(parser)
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (path:line:col: severity: message [code]), json, sarif (2.1.0) or github "
                             "(workflow commands that annotate a pull request)")
    parser.add_argument("--fail-level", choices=("error", "warning"), default="error",
                        help="the least severe problem that makes the exit status 1 (default: error)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = required_root("check", args.workspace, args.positional_workspace)
    if root is None:
        return 2
    from ..workspace.lint import lint_workspace  # the engine loads only when a command runs it
    from ..workspace.loader import load_workspace
    from .report import as_github, as_json, as_sarif, as_text

    problems = lint_workspace(load_workspace(root))
    if args.format == "text":
        paint = painter(args, sys.stdout)
        print(paint.finish(as_text(problems, root, paint)))
    elif args.format == "github":
        print(visible(as_github(problems, root)))
    else:
        document = as_json(problems) if args.format == "json" else as_sarif(problems, root)
        print(json_text(document))
    failing = {"error": ("error",), "warning": ("error", "warning")}[args.fail_level]
    return 1 if any(p.severity.value in failing for p in problems) else 0
