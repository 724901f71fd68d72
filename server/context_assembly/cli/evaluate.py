"""`context-assembly evaluate --workspace DIR --request FILE [--json]`: which memories, and why."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidParamsError
from .terminal import Painter, add_common, json_text, one_line, painter, report_invalid, workspace_root

if TYPE_CHECKING:
    from ..model.evaluation import ConditionResult, EvaluationResult


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "evaluate", help="evaluate the workspace's rules against a request and explain the outcome",
        description="Evaluate every enabled rule engine (or the request's rule_engine_ids) and print the "
                    "matched memories with the per-condition explanation.",
    )
    parser.add_argument("positional_workspace", nargs="?", metavar="WORKSPACE", help="the same as --workspace")
    add_common(parser)
    parser.add_argument("--request", required=True, help="a JSON file holding an assembly request ('-' = stdin)")
    parser.add_argument("--json", action="store_true", help="print the evaluation result as JSON")
    parser.set_defaults(run=run)


def read_json(path: str) -> Any:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return json.loads(text)


def run(args: argparse.Namespace) -> int:
    from ..assembly.request import parse_request  # the engine loads only when a command runs it
    from ..model.converter import unstructure
    from ..runtime import Runtime

    try:
        data = read_json(args.request)
        request = parse_request(data)
    except (OSError, ValueError) as exc:
        print(f"context-assembly evaluate: cannot read the request: {exc}", file=sys.stderr)
        return 2
    except InvalidParamsError as exc:
        report_invalid("evaluate", exc.message, exc.errors)
        return 2
    runtime = Runtime(workspace_root(args.workspace or args.positional_workspace))
    try:
        result = runtime.evaluate(request)
    finally:
        runtime.close()
    if args.json:
        print(json_text(unstructure(result)))
    else:
        paint = painter(args, sys.stdout)
        print(paint.finish(render(result, paint)))
    return 0


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _condition_lines(result: ConditionResult, depth: int, paint: Painter | None = None) -> list[str]:
    paint = paint or Painter(False)
    pad = "    " * depth
    mark = paint("[x]", "ok") if result.result else paint("[ ]", "no")
    if result.group:
        lines = [f"{pad}{mark} {one_line(result.group)}:"]
        for child in result.conditions or []:
            lines += _condition_lines(child, depth + 1, paint)
        return lines
    if not isinstance(result.field, str) or result.operator is None:  # not a readable condition
        return [f"{pad}{mark} (not a condition)   " + paint(f"ERROR: {one_line(result.error or 'unreadable')}",
                                                                "error")]
    value = "" if result.operator in ("exists", "not_exists") else " " + _show(result.value)
    actual = _show(result.actual) if result.present else "absent"
    line = f"{pad}{mark} {one_line(result.field)} {one_line(result.operator)}{value}   " + \
        paint(f"(actual: {actual})", "dim")
    if result.error:
        line += "   " + paint(f"ERROR: {one_line(result.error)}", "error")
    return [line]


def render(result: EvaluationResult, paint: Painter | None = None) -> str:
    paint = paint or Painter(False)
    matched = one_line(", ".join(result.matched_memories)) or "-"
    lines = [paint(f"Matched memories ({len(result.matched_memories)}): ", "bold") + matched]
    if result.excluded_memories:
        lines.append(paint("Excluded: ", "bold") + one_line(", ".join(result.excluded_memories)))
    if result.missing_variables:
        lines.append(paint("Missing variables: ", "bold") + ", ".join(result.missing_variables))
    for key, value in result.derived_variables.items():
        lines.append(f"Derived: {key} = {_show(value)}")
    for warning in result.warnings:
        lines.append(paint("Warning: ", "warning") + one_line(warning))
    for decision in result.decisions:
        lines.append(f"Decision: {one_line(decision.reference)} {decision.outcome} by {one_line(decision.rule)}"
                     + (f" (overrides {one_line(', '.join(decision.overridden))})" if decision.overridden else ""))
    for engine in result.engine_results:
        lines.append("")
        lines.append(paint(f"engine {one_line(engine.engine_id)}", "bold")
                     + ("" if engine.enabled else " (disabled, named explicitly)"))
        for rule in engine.rules:
            mark = paint("[x]", "ok") if rule.matched else paint("[ ]", "no")
            adds = f" -> {one_line(', '.join(rule.memories))}" if rule.memories else ""
            note = "  (per source: evaluated during assembly)" if rule.per_source else ""
            lines.append(f"  {mark} {one_line(rule.rule_id)} (priority {rule.priority}){adds}{note}")
            if rule.error and not rule.conditions:
                lines.append("        " + paint(f"ERROR: {one_line(rule.error)}", "error"))
            for condition in rule.conditions:
                lines += _condition_lines(condition, 2, paint)
    return "\n".join(lines)
