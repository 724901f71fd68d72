"""`context-assembly replay SNAPSHOT` and `context-assembly diff A B`: re-run a stored assembly and
see what drifted; compare two assemblies (snapshots or requests)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import ContextAssemblyError, InvalidParamsError
from .evaluate import read_json
from .terminal import add_common, json_text, one_line, required_root, visible, write_page


def register(commands: argparse._SubParsersAction) -> None:
    replay = commands.add_parser(
        "replay", help="re-run a stored assembly against today's definitions and stores; show the drift",
        description="SNAPSHOT is an assembly id (.codebolt/memory/context/{id}.json, written when the settings "
                    "enable snapshots) or a snapshot file. Exit status 0, or 1 with --exit-code when it drifted.",
    )
    replay.add_argument("snapshot", metavar="SNAPSHOT")
    _common(replay)
    replay.add_argument("--exit-code", action="store_true", help="exit with status 1 when the assembly drifted")
    replay.set_defaults(run=run_replay)
    diff = commands.add_parser(
        "diff", help="compare two assemblies: items added, removed, moved, re-ranked; tokens per section",
        description="A and B are each an assembly id (a snapshot of the workspace), a snapshot file, an "
                    "assembled-context JSON file (assemble --json) or a request file (assembled now).",
    )
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")
    _common(diff)
    diff.set_defaults(run=run_diff)


def _common(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--html", metavar="FILE", help="also write the trace page (one self-contained HTML file)")


def _side(text: str) -> Any:
    """A file given on the command line is read as it is; anything else names a snapshot."""
    return read_json(text) if text == "-" or Path(text).is_file() else text


def _fail(command: str, exc: Exception) -> int:
    if isinstance(exc, InvalidParamsError):
        print(f"context-assembly {command}: {one_line(exc.message)}", file=sys.stderr)
        for error in exc.errors:
            if error.get("message") != exc.message:
                print(one_line(f"  {error.get('path') or '/'}: {error.get('message')}"), file=sys.stderr)
    elif isinstance(exc, ContextAssemblyError):
        print(f"context-assembly {command}: {one_line(exc.message)}", file=sys.stderr)
    else:
        print(f"context-assembly {command}: {one_line(exc)}", file=sys.stderr)
    return 2


def run_replay(args: argparse.Namespace) -> int:
    root = required_root("replay", args.workspace)
    if root is None:
        return 2
    from ..assembly.replay import read_snapshot, replay  # the engine loads only when a command runs it
    from ..runtime import Runtime

    runtime = Runtime(root)
    try:
        side = _side(args.snapshot)
        document = read_snapshot(runtime.root, side) if isinstance(side, str) else side
        result = replay(document, lambda request: runtime.assemble(request, snapshot=False))
    except (ContextAssemblyError, OSError, ValueError) as exc:
        return _fail("replay", exc)
    finally:
        runtime.close()
    if args.json:
        print(json_text(result))
    else:
        before = result["before"].get("meta") or {}
        print(visible(f"Replay of {one_line(before.get('assembly_id'))}: "
                      + ("drifted" if result["drifted"] else "no drift")))
        print(visible(render_diff(result["drift"])))
    if args.html:  # after the result: a page that cannot be written loses nothing printed
        from ..trace_page import replay_page

        if not write_page("replay", args.html, replay_page(result)):
            return 2
    return 1 if args.exit_code and result["drifted"] else 0


def run_diff(args: argparse.Namespace) -> int:
    root = required_root("diff", args.workspace)
    if root is None:
        return 2
    from ..assembly.diff import diff
    from ..assembly.replay import resolve_side
    from ..runtime import Runtime

    runtime = Runtime(root)
    try:
        def assemble(request: dict[str, Any]) -> Any:
            return runtime.assemble(request, snapshot=False)
        before = resolve_side(_side(args.a), runtime.root, assemble, "A")
        after = resolve_side(_side(args.b), runtime.root, assemble, "B")
        result = diff(before, after)
    except (ContextAssemblyError, OSError, ValueError) as exc:
        return _fail("diff", exc)
    finally:
        runtime.close()
    if args.json:
        print(json_text(result))
    else:
        print(visible(render_diff(result)))
    if args.html:
        from ..trace_page import diff_page

        if not write_page("diff", args.html, diff_page(result, before, after)):
            return 2
    return 0


def render_diff(result: dict[str, Any]) -> str:
    b, a = result["before"], result["after"]
    lines = [f"Tokens: {b.get('token_estimate')} -> {a.get('token_estimate')}; items: {b.get('total_items')} -> "
             f"{a.get('total_items')}" + ("  (identical)" if result["identical"] else "")]
    def named(item: dict[str, Any]) -> str:
        return f"{one_line(item['memory'])} {one_line(item['id'])}"

    for key, sign in (("added", "+"), ("removed", "-")):
        for item in result[key]:
            lines.append(f"  {sign} [{item['section']}] {named(item)} ({item['tokens']} tok)")
    for item in result["moved"]:
        lines.append(f"  > {named(item)}: moved {item['from']} -> {item['to']}")
    for item in result["reranked"]:
        lines.append(f"  ~ [{item['section']}] {named(item)}: rank {item['from_rank']} -> {item['to_rank']}")
    for item in result["changed"]:
        lines.append(f"  * [{item['section']}] {named(item)}: content changed "
                     f"({item['tokens_before']} -> {item['tokens']} tok)")
    for rule in result["rules"]["fired"]:
        lines.append(f"  rule now fires: {one_line(rule)}")
    for rule in result["rules"]["no_longer_fired"]:
        lines.append(f"  rule no longer fires: {one_line(rule)}")
    for memory in result["memories"]["added"]:
        lines.append(f"  memory now activated: {one_line(memory)}")
    for memory in result["memories"]["removed"]:
        lines.append(f"  memory no longer activated: {one_line(memory)}")
    for change in result["memories"]["status_changed"]:
        lines.append(f"  memory {one_line(change['reference'])}: {change['before']} -> {change['after']}")
    lines += ["", "Section          before   after   delta"]
    for name, tokens in result["sections"].items():
        lines.append(f"{name:<15} {tokens['before']:>7} {tokens['after']:>7} {tokens['delta']:>+7}")
    return "\n".join(lines)
