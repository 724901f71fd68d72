"""`context-assembly test [WORKSPACE]`: run the rule tests under `.codebolt/tests/`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .terminal import add_common, json_text, painter, required_root, shown, visible

if TYPE_CHECKING:
    from ..testing import TestRun


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "test", help="run the rule tests under .codebolt/tests/",
        description="Run every case of the test files under WORKSPACE/.codebolt/tests/: rules only, or the "
                    "full assembly against the stores when a case asks. Exit status 1 when a case fails or "
                    "a test file is broken (or coverage is below --min-coverage); 2 when there is no .codebolt/ "
                    "folder.",
    )
    parser.add_argument("positional_workspace", nargs="?", metavar="WORKSPACE",
                        help="the workspace root (the same as --workspace)")
    add_common(parser)
    parser.add_argument("-k", dest="pattern", metavar="PATTERN",
                        help="run only cases whose `file::name` contains PATTERN (or matches it as a glob)")
    parser.add_argument("--format", choices=("text", "json", "junit", "github"), default="text")
    parser.add_argument("--coverage", action="store_true",
                        help="also report rules never fired or never failed, conditions never true or false, "
                             "memories never activated")
    parser.add_argument("--min-coverage", type=float, metavar="PERCENT",
                        help="fail when coverage is below PERCENT (implies --coverage)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = required_root("test", args.workspace, args.positional_workspace)
    if root is None:
        return 2
    from ..runtime import Runtime  # the engine loads only when a command runs it
    from ..testing import run_tests
    from ..testing.run import as_json
    from .results import as_github, as_junit, as_text, coverage_text

    coverage = args.coverage or args.min_coverage is not None
    runtime = Runtime(root)
    try:
        result = run_tests(runtime.workspace(), lambda request: runtime.assemble(request, snapshot=False),
                           pattern=args.pattern, coverage=coverage, lookup_of=runtime.lookup)
    finally:
        runtime.close()
    below = _below(result, args.min_coverage)
    if args.format == "json":
        document: Any = as_json(result)
        if args.min_coverage is not None:
            document["coverage"]["min_percent"] = args.min_coverage
        print(json_text(document))
    elif args.format == "junit":
        print(as_junit(result))
    elif args.format == "github":
        print(visible(as_github(result, root, args.min_coverage)))
    else:
        paint = painter(args, sys.stdout)
        print(paint.finish(as_text(result, root, paint)))
        if result.coverage is not None:
            print(visible(coverage_text(result.coverage.report(), args.min_coverage)))
    if not result.results and not result.problems:
        print(f"context-assembly test: no test cases under {shown(root / '.codebolt' / 'tests')}"
              + (f" matching {args.pattern!r}" if args.pattern else ""), file=sys.stderr)
    return 1 if not result.ok or below else 0


def _below(result: TestRun, minimum: float | None) -> bool:
    return minimum is not None and result.coverage is not None and result.coverage.report()["percent"] < minimum
