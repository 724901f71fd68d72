"""`context-assembly db migrate`: apply the store backend's schema migrations now.

They also apply on first connect; this command lets an operator migrate a shared database before
the sidecars start (or check that it is current), using the same settings and DSN as `serve`.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ContextAssemblyError
from .terminal import add_common, json_text, required_root


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "db", help="the store database: migrate its schema",
        description="Apply the store backend's schema migrations (stores.backend in "
                    ".codebolt/context-assembly.json; CONTEXT_ASSEMBLY_DSN overrides stores.dsn) and print "
                    "what was applied as JSON. Exit status 1 when the database cannot be reached.")
    parser.add_argument("action", choices=("migrate",))
    add_common(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # found walking up as by every command: from a subfolder it read the embedded default and said "done"
    root = required_root("db", args.workspace)
    if root is None:
        return 2
    from ..runtime import Runtime  # the engine loads only when a command runs it

    runtime = Runtime(root)
    try:
        result = runtime.memory.stores.migrate()
    except ContextAssemblyError as exc:
        print(f"context-assembly db: {exc.message}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    print(json_text(result))
    return 0
