"""Markdown reference tables rendered from the registries (README, `context-assembly reference`).

The README embeds these tables between markers and a test keeps them equal to this output, so
the documentation cannot drift from what the evaluator and the schemas actually accept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from .ingestion import PROCESSORS, TRIGGERS
from .ladder import LADDER
from .operators import OPERATORS
from .sections import PRIORITIES, SECTIONS
from .steps import step_types
from .variables import FIELD_ALIASES, SCOPES


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _code(value: object) -> str:
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def operators() -> str:
    rows = [(f"`{op.name}`", ", ".join(f"`{a}`" for a in op.aliases), op.value_kind.label,
             "yes" if op.absent_matches else "no", op.description, _code(op.example)) for op in OPERATORS]
    return _table(("operator", "aliases", "value", "true when absent", "meaning", "example"), rows)


def variables() -> str:
    rows = [(f"`scope.{s.name}.{f}`", s.description) for s in SCOPES for f in s.fields]
    rows += [("`addVar.<name>`", "additional_variables (phase, query, active_file, any custom name)"),
             ("`input.text`", "the task text of this turn")]
    rows += [(f"`{alias}`", f"seed-004 alias of `{key}`") for alias, key in FIELD_ALIASES.items()]
    return _table(("variable", "from"), rows)


def sections() -> str:
    rows = [(f"`{s.name}`", s.description) for s in SECTIONS]
    rows += [(f"priority `{p.name}`", f"weight {p.weight}: {p.description}") for p in PRIORITIES]
    return _table(("section / priority", "meaning"), rows)


def steps() -> str:
    rows = [(f"`{s.name}`", s.group, s.description, ", ".join(f"`{p.name}`" for p in s.params)) for s in step_types()]
    return _table(("step", "group", "what it does", "parameters"), rows)


def ingestion() -> str:
    rows = [(f"trigger `{t.name}`", t.description) for t in TRIGGERS]
    rows += [(f"processor `{p.name}`", p.description) for p in PROCESSORS]
    return _table(("trigger / processor", "meaning"), rows)


def ladder() -> str:
    rows = [(f"{i}. `{s.name}`", s.description, ", ".join(f"`budget.{k}`" for k in s.settings), s.example)
            for i, s in enumerate(LADDER, start=1)]
    return _table(("strategy", "what it does", "settings", "a trace step"), rows)


TOPICS: dict[str, Callable[[], str]] = {
    "operators": operators, "variables": variables, "sections": sections, "steps": steps, "ingestion": ingestion,
    "ladder": ladder,
}


_MARKER = re.compile(r"(<!-- reference:(\w+) -->\n)(.*?)(<!-- /reference -->)", re.S)


def fill_markers(text: str) -> str:
    """`text` with every `<!-- reference:TOPIC -->` block replaced by the current table."""
    return _MARKER.sub(lambda m: f"{m.group(1)}{TOPICS[m.group(2)]()}\n{m.group(4)}", text)
