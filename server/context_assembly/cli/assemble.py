"""`context-assembly assemble`: what the agent would know this turn, and why."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import ContextAssemblyError, InvalidParamsError
from ..registry.sections import SECTION_NAMES
from .evaluate import read_json

if TYPE_CHECKING:
    from ..model.context import AssembledContext

BAR_WIDTH = 30
PREVIEW_LINES = 6


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "assemble", help="assemble the context for a request and show it with its trace",
        description="Run the seven assembly stages on a workspace: rules, pipelines, merge, caps and budget.",
    )
    parser.add_argument("--workspace", default=".", help="the workspace root (default: .)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--request", help="a JSON file holding an assembly request ('-' = stdin)")
    source.add_argument("--text", help="just the task text (a request with empty scope variables)")
    parser.add_argument("--max-tokens", type=int, help="the token budget (overrides the request and settings)")
    parser.add_argument("--json", action="store_true", help="print the assembled context as JSON")
    parser.add_argument("--html", metavar="FILE", help="also write the trace page (one self-contained HTML file)")
    parser.set_defaults(run=run)


def _request(args: argparse.Namespace) -> Any:
    data = read_json(args.request) if args.request else {"scope_variables": {}, "input": {"text": args.text}}
    if args.max_tokens is not None and isinstance(data, dict):
        data = {**data, "constraints": {**(data.get("constraints") or {}), "max_tokens": args.max_tokens}}
    return data


def run(args: argparse.Namespace) -> int:
    if not Path(args.workspace).is_dir():
        print(f"context-assembly assemble: no such directory: {args.workspace}", file=sys.stderr)
        return 2
    try:
        data = _request(args)
    except (OSError, ValueError) as exc:
        print(f"context-assembly assemble: cannot read the request: {exc}", file=sys.stderr)
        return 2
    from ..model.converter import unstructure  # the engine loads only when a command runs it
    from ..runtime import Runtime

    runtime = Runtime(args.workspace)
    try:
        result = runtime.assemble(data)
    except InvalidParamsError as exc:
        print("context-assembly assemble: " + exc.message, file=sys.stderr)
        for error in exc.errors:
            print(f"  {error['path'] or '/'}: {error['message']}", file=sys.stderr)
        return 2
    except ContextAssemblyError as exc:
        print(f"context-assembly assemble: {exc.message}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    if args.html:
        from ..trace_page import assembly_page

        Path(args.html).write_text(assembly_page(unstructure(result)), encoding="utf-8")
    if args.json:
        print(orjson.dumps(unstructure(result), option=orjson.OPT_INDENT_2).decode())
    else:
        print(render(result))
    return 0


def _bar(tokens: int, total: int) -> str:
    filled = round(BAR_WIDTH * tokens / total) if total else 0
    return "#" * filled + "." * (BAR_WIDTH - filled)


def _preview(content: str) -> list[str]:
    lines = content.splitlines() or [""]
    shown = [f"      {line}" for line in lines[:PREVIEW_LINES]]
    if len(lines) > PREVIEW_LINES:
        shown.append(f"      … ({len(lines) - PREVIEW_LINES} more lines)")
    return shown


def render(result: AssembledContext) -> str:
    meta, trace = result.meta, result.trace
    budget = f" of {meta.max_tokens}" if meta.max_tokens else " (no budget)"
    out = [f"Assembly {meta.assembly_id}: {meta.total_items} items, {meta.token_estimate} tokens{budget}, "
           f"{meta.duration_ms:.1f} ms" + (" — TRUNCATED" if meta.truncated else "")]
    for name in trace.section_order:
        items = result.context[name]
        if not items:
            continue
        out += ["", f"== {name} ({sum(i.tokens for i in items)} tokens)"]
        for item in items:
            title = item.metadata.get("title") or item.id
            score = f", score {item.score:.2f}" if item.score is not None else ""
            out.append(f"  - [{item.priority}{score}, {item.tokens} tok] {title}  <{item.source}>")
            out += _preview(item.content)
    total = sum(s.tokens for s in trace.sections.values())
    out += ["", "Section          tokens  items  dropped", "-" * 72]
    for name in SECTION_NAMES:
        section = trace.sections[name]
        out.append(f"{name:<15} {section.tokens:>7} {section.items:>6} {section.dropped:>8}  "
                   f"{_bar(section.tokens, total)}" + ("  truncated" if section.truncated else ""))
    if trace.rules_applied:
        out += ["", "Rules that fired:"]
        out += [f"  {r['engine_id']}/{r['rule_id']} -> {', '.join(r.get('memories') or []) or '(actions only)'}"
                for r in trace.rules_applied]
    out += ["", "Memories:"]
    for call in trace.memory_calls:
        detail = f": {call.error}" if call.error else ""
        out.append(f"  {call.reference} [{call.status}] {call.items} items, {call.duration_ms:.1f} ms "
                   f"(from {', '.join(call.origin)}){detail}")
    dropped = [d for d in trace.decisions if d.kind != "conflict"]
    if dropped:
        out += ["", "Dropped:"]
        out += [f"  {d.item_id or d.source} ({d.section}): {d.kind}: {d.reason}" for d in dropped]
    conflicts = [d for d in trace.decisions if d.kind == "conflict"]
    if conflicts:
        out += ["", "Conflicts settled by rule order:"]
        out += [f"  {d.source}: {d.reason} by {d.by}" for d in conflicts]
    return "\n".join(out)
