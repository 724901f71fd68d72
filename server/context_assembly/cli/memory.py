"""`context-assembly memory read|write|delete|list URI [VALUE]`: the `memory/*` calls from a terminal."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import ContextAssemblyError, InvalidParamsError
from ..json_numbers import InexactNumber, loads_exact
from ..limits import Limits, applied, check_value_size
from .terminal import add_common, json_text, one_line, report_invalid, workspace_root

if TYPE_CHECKING:
    from ..runtime import Runtime

ACTIONS = ("read", "write", "delete", "list", "import", "export")
BULK_BUFFER_MB = 2048  # the embedded graph's buffer pool for import and export (memory is used as needed)


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "memory", help="read, write, delete or list memory by store URI (kv://, markdown://, log://, ...)",
        description="Read, write, delete or list the workspace's memory by store URI, as the memory/* "
                    "JSON-RPC calls do, and print the result as JSON. VALUE is JSON ('-' reads it from "
                    "stdin); --text TEXT writes a plain string instead (a markdown note, say). "
                    "Exit status 2 for a bad URI or value, 1 for a storage failure. "
                    "import checks the whole file first, then writes it all or nothing: every store in "
                    "the database (KV, JSON, working memory, blobs, event log, turns, vector documents; "
                    "with PostgreSQL the graph too) in one transaction, the embedded graph in its own, "
                    "committed just before the database's, markdown notes staged in temp files and "
                    "renamed into place after it. A failure before the database commits writes nothing; "
                    "the output lists each unit's state ('units'), and an error names the unit and item "
                    "that failed and what was rolled back or already committed.",
        epilog="examples: memory write kv://users/alice '{\"theme\": \"dark\"}'   "
               "memory write markdown://decisions --text 'We use SQLite.'   memory list kv://users/   "
               "memory import seed.json   memory export backup.json",
    )
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("uri", help="a store URI (for list: a URI prefix such as kv:// or markdown://notes/; "
                                    "for import: a JSON file of writes, threads and graph data; for export: the "
                                    "file to write, '-' for standard output)")
    parser.add_argument("value", nargs="?", help="write only: the value, as JSON ('-' = stdin)")
    parser.add_argument("--text", metavar="TEXT", help="write only: this plain string instead of a JSON VALUE "
                                                       "('-' = stdin)")
    parser.add_argument("--idempotency-key", metavar="KEY",
                        help="write only: an append (log://, episodic://) run again with the same KEY lands once")
    add_common(parser)
    parser.set_defaults(run=run, adopt_extra=_late_value)


_NEGATIVE = re.compile(r"-\d+(\.\d+)?([eE][+-]?\d+)?")  # a JSON number, not an option


def _late_value(args: argparse.Namespace, extra: list[str]) -> bool:
    """`memory write URI --workspace DIR VALUE`: argparse gives an optional positional its place
    before the options, so a VALUE after them is left over; it is the VALUE when there is none yet."""
    if len(extra) == 1 and args.value is None and (extra[0] == "-" or not extra[0].startswith("-")
                                                   or _NEGATIVE.fullmatch(extra[0])):
        args.value = extra[0]
        return True
    return False


def _fail(message: str, errors: list[dict[str, Any]] | None = None) -> int:
    report_invalid("memory", message, errors or [])
    return 2


def _value(args: argparse.Namespace) -> Any:
    if args.text is not None:
        return sys.stdin.read() if args.text == "-" else args.text
    return loads_exact(sys.stdin.read() if args.value == "-" else args.value)


def _import(runtime: Runtime, path: str) -> dict[str, Any]:
    from ..stores.importer import import_file

    return {"imported": import_file(runtime.memory, path, runtime.layout.codebolt)}


def _export(runtime: Runtime, target: str) -> int:
    from ..stores.exporter import export_memory

    exported = export_memory(runtime.memory)
    if target == "-":
        sys.stdout.write(json_text(exported) + "\n")
        return 0
    data = orjson.dumps(exported, option=orjson.OPT_INDENT_2) + b"\n"
    try:
        Path(target).write_bytes(data)
    except OSError as exc:
        print(f"context-assembly memory: cannot write {target}: {exc}", file=sys.stderr)
        return 1
    return 0


def _act(runtime: Runtime, args: argparse.Namespace, value: Any, limits: Limits) -> dict[str, Any]:
    service = runtime.memory
    if args.action == "import":
        return _import(runtime, args.uri)
    if args.action == "read":
        return service.read(args.uri)
    if args.action == "write":
        check_value_size(value, limits.write_value_bytes)
        return service.write(args.uri, value, key=args.idempotency_key)
    if args.action == "delete":
        return service.delete(args.uri)
    return service.list(args.uri)


def run(args: argparse.Namespace) -> int:
    root = workspace_root(args.workspace)
    if not root.is_dir():
        return _fail(f"no such directory: {root}")
    given = [v for v in (args.value, args.text) if v is not None]
    if args.action == "write" and len(given) != 1:
        return _fail("write needs a VALUE (JSON) or --text TEXT, not both" if given else
                     "write needs a VALUE (JSON) or --text TEXT")
    if args.action != "write" and given:
        return _fail(f"{args.action} takes no VALUE")
    if args.action != "write" and args.idempotency_key is not None:
        return _fail(f"{args.action} takes no --idempotency-key")
    try:
        value = _value(args) if args.action == "write" else None
    except orjson.JSONDecodeError as exc:
        return _fail(f"VALUE is not JSON ({exc}); pass --text to write a plain string")
    except InexactNumber as exc:
        return _fail(f"VALUE: {exc}")
    # a whole graph in one transaction or one read: room for it, for this command only
    bulk = None
    if args.action in ("import", "export"):
        from ..stores.kuzu.session import BUFFER_ENV  # (the graph database: only for these)

        bulk = BUFFER_ENV if BUFFER_ENV not in os.environ else None
    if bulk:
        os.environ[bulk] = str(BULK_BUFFER_MB)
    try:
        return _run(args, root, value)
    finally:
        if bulk:
            os.environ.pop(bulk, None)


def _run(args: argparse.Namespace, root: Path, value: Any) -> int:
    from ..runtime import Runtime  # the engine loads only when a command runs it

    runtime = Runtime(root)
    limits = runtime.file_settings.limits
    try:
        with applied(limits):  # the workspace's limits, as the memory/* calls of a sidecar check them
            if args.action == "export":
                return _export(runtime, args.uri)
            result = _act(runtime, args, value, limits)
    except InvalidParamsError as exc:
        return _fail(exc.message, exc.errors)
    except ContextAssemblyError as exc:
        print(f"context-assembly memory: {one_line(exc.message)}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    print(json_text(result))
    return 0
