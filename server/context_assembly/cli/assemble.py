"""`context-assembly assemble`: what the agent would know this turn, and why."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ContextAssemblyError, InvalidParamsError
from ..registry.sections import SECTION_NAMES
from .evaluate import read_json
from .terminal import (
    Painter,
    add_common,
    counted,
    json_text,
    one_line,
    painter,
    report_invalid,
    workspace_root,
    write_page,
)

if TYPE_CHECKING:
    from ..model.context import AssembledContext, DroppedItem

BAR_WIDTH = 30
PREVIEW_LINES = 6
PREVIEW_WIDTH = 200  # characters of one preview line
KEPT_CHANGED = ("shortened", "priority")  # decisions about items still in the context (not drops)


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "assemble", help="assemble the context for a request and show it with its trace",
        description="Run the seven assembly stages on a workspace: rules, pipelines, merge, caps and budget.",
    )
    parser.add_argument("positional_workspace", nargs="?", metavar="WORKSPACE", help="the same as --workspace")
    add_common(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--request", help="a JSON file holding an assembly request ('-' = stdin)")
    source.add_argument("--text", help="just the task text (a request with empty scope variables)")
    parser.add_argument("--max-tokens", type=int, help="the token budget (overrides the request and settings)")
    parser.add_argument("--json", action="store_true", help="print the assembled context as JSON")
    parser.add_argument("--html", metavar="FILE", help="also write the trace page (one self-contained HTML file)")
    parser.set_defaults(run=run)


def _request(args: argparse.Namespace) -> Any:
    data = read_json(args.request) if args.request else {"scope_variables": {}, "input": {"text": args.text}}
    constraints = data.get("constraints") if isinstance(data, dict) else None
    # constraints that are no object are left as they are, for the request's check to name
    if args.max_tokens is not None and isinstance(data, dict) and isinstance(constraints, dict | None):
        data = {**data, "constraints": {**(constraints or {}), "max_tokens": args.max_tokens}}
    return data


def run(args: argparse.Namespace) -> int:
    root = workspace_root(args.workspace or args.positional_workspace)
    if not root.is_dir():
        print(f"context-assembly assemble: no such directory: {root}", file=sys.stderr)
        return 2
    try:
        data = _request(args)
    except (OSError, ValueError) as exc:
        print(f"context-assembly assemble: cannot read the request: {exc}", file=sys.stderr)
        return 2
    from ..model.converter import unstructure  # the engine loads only when a command runs it
    from ..runtime import Runtime

    runtime = Runtime(root)
    try:
        result = runtime.assemble(data)
    except InvalidParamsError as exc:
        report_invalid("assemble", exc.message, exc.errors)
        return 2
    except ContextAssemblyError as exc:
        print(f"context-assembly assemble: {one_line(exc.message)}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    if args.json:
        print(json_text(unstructure(result)))
    else:
        paint = painter(args, sys.stdout)
        print(paint.finish(render(result, paint)))
    if args.html:  # after the result: a page that cannot be written loses nothing printed
        from ..trace_page import assembly_page

        if not write_page("assemble", args.html, assembly_page(unstructure(result))):
            return 2
    return 0


def _bar(tokens: int, total: int) -> str:
    filled = min(BAR_WIDTH, round(BAR_WIDTH * tokens / total)) if total else 0
    return "#" * filled + "." * (BAR_WIDTH - filled)


def _preview(content: str) -> list[str]:
    lines = content.splitlines() or [""]
    shown = [f"      {_cut(line)}" for line in lines[:PREVIEW_LINES]]
    if len(lines) > PREVIEW_LINES:
        shown.append(f"      … ({counted(len(lines) - PREVIEW_LINES, 'more line')})")
    return shown


def _cut(line: str) -> str:
    """A line of a preview at most PREVIEW_WIDTH characters (one line of a 5 MB note printed whole)."""
    return line if len(line) <= PREVIEW_WIDTH else line[: PREVIEW_WIDTH - 1] + "…"


def _dropped_line(d: DroppedItem, paint: Painter) -> list[str]:
    """`  architecture-docs (knowledge, 120 tokens): budget: over the budget …` and the item's start."""
    name = one_line(d.memory_id or d.source or d.item_id or "(an item)")
    where = ", ".join(x for x in (d.section, counted(d.tokens, "token") if d.tokens is not None else None) if x)
    lines = [f"  {paint(name, 'bold')}" + (f" ({where})" if where else "") + f": {d.kind}: {one_line(d.reason)}"
             + (f" [{one_line(d.by)}]" if d.by and d.kind != "excluded" else "")]
    if d.source and one_line(d.source) != name:
        lines.append(f"      from {one_line(d.source)}")
    if d.preview:
        lines.append(paint(f"      “{_cut(one_line(d.preview))}”", "dim"))
    return lines


def render(result: AssembledContext, paint: Painter | None = None) -> str:
    paint = paint or Painter(False)
    meta, trace = result.meta, result.trace
    budget = f" of a {meta.max_tokens}-token budget" if meta.max_tokens else " (no budget)"
    head = (f"Assembly {meta.assembly_id}: {counted(meta.total_items, 'item')}, "
            f"{counted(meta.token_estimate, 'token')}{budget}, {meta.duration_ms:.1f} ms")
    out = [paint(head, "bold") + (" — " + paint("TRUNCATED", "warning") if meta.truncated else "")]
    for name in trace.section_order:
        items = result.context[name]
        if not items:
            continue
        out += ["", paint(f"== {name} ({counted(sum(i.tokens for i in items), 'token')})", "bold")]
        for item in items:
            title = _cut(one_line(item.metadata.get("title") or item.id))
            score = f", score {item.score:.2f}" if item.score is not None else ""
            out.append(f"  - [{item.priority}{score}, {item.tokens} tok] {title}  <{one_line(item.source)}>")
            out += _preview(item.content)
    total = sum(s.tokens for s in trace.sections.values())
    whole = meta.max_tokens or total
    share = f"share of the {meta.max_tokens}-token budget" if meta.max_tokens else \
        f"share of the {counted(total, 'token')} assembled"
    out += ["", f"Section          tokens  items  dropped  {share}", "-" * 72]
    for name in SECTION_NAMES:
        section = trace.sections[name]
        out.append(f"{name:<15} {section.tokens:>7} {section.items:>6} {section.dropped:>8}  "
                   f"{_bar(section.tokens, whole)}" + ("  truncated" if section.truncated else ""))
    if trace.rules_applied:
        out += ["", paint("Rules that fired:", "bold")]
        out += [f"  {one_line(r['engine_id'])}/{one_line(r['rule_id'])} -> "
                + (one_line(", ".join(r.get("memories") or [])) or "(actions only)")
                + (f" (per source, for {one_line(r['source'])})" if r.get("source") else "")
                for r in trace.rules_applied]
    out += ["", paint("Memories:", "bold")]
    for call in trace.memory_calls:
        detail = ": " + paint(one_line(call.error), "warning") if call.error else ""
        out.append(f"  {one_line(call.reference)} [{call.status}] {counted(call.items, 'item')}, "
                   f"{call.duration_ms:.1f} ms (from {one_line(', '.join(call.origin))}){detail}")
    for title, kinds in (("Dropped:", None), ("Kept, changed:", KEPT_CHANGED)):
        shown = [d for d in trace.decisions if d.kind != "conflict" and (d.kind in KEPT_CHANGED) == (kinds is not None)]
        if shown:
            out += ["", paint(title, "bold")]
            for decision in shown:
                out += _dropped_line(decision, paint)
    conflicts = [d for d in trace.decisions if d.kind == "conflict"]
    if conflicts:
        out += ["", paint("Conflicts settled by rule order:", "bold")]
        out += [f"  {one_line(d.source)}: {d.reason} by {one_line(d.by)}"
                + (f" (over {one_line(', '.join(d.overridden))})" if d.overridden else "") for d in conflicts]
    return "\n".join(out)
