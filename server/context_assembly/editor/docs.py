"""Markdown documentation of operators, variables, memories, step types and sections, read from
the registries and the workspace (completion and hover show the same text)."""

from __future__ import annotations

import json

from ..model.definitions import Contribution, MemoryDefinition
from ..model.variables import PossibleVariable
from ..registry.ingestion import ProcessorSpec, Trigger
from ..registry.ladder import Strategy
from ..registry.operators import Operator
from ..registry.sections import Priority, Section
from ..registry.steps import StepSpec
from ..registry.variables import ADDVAR_PREFIX, INPUT_TEXT, SCOPES, canonical_field
from ..workspace.loader import Workspace


def operator_markdown(op: Operator) -> str:
    lines = [f"**{op.name}**" + (f" (aliases: {', '.join(f'`{a}`' for a in op.aliases)})" if op.aliases else ""),
             "", op.description, "", f"Value: {op.value_kind.label}",
             f"True when the field is absent: {'yes' if op.absent_matches else 'no'}", "",
             "```json", json.dumps(op.example), "```"]
    return "\n".join(lines)


def _requirers(key: str, workspace: Workspace) -> list[str]:
    out = []
    for memory_id, memory in sorted(workspace.memories.items()):
        if key.startswith(ADDVAR_PREFIX):
            for var in memory.declared_variables:
                if var.name == key[len(ADDVAR_PREFIX):]:
                    out.append(f"`{memory_id}`" + (" (required)" if var.required else ""))
        elif key.startswith("scope."):
            scope = key.split(".")[1]
            if scope in memory.scopes:
                out.append(f"`{memory_id}` (required scope)")
    return out


def variable_markdown(field: str, variable: PossibleVariable | None, workspace: Workspace) -> str:
    key = canonical_field(field)
    lines = [f"**{key}**" + (f" (seed-004 spelling `{field}`)" if key != field else "")]
    if key.startswith("scope."):
        scope = next((s for s in SCOPES if s.name == key.split(".")[1]), None)
        lines += ["", f"Scope `{key.split('.')[1]}`" + (f": {scope.description}" if scope else "")]
    elif key == INPUT_TEXT:
        lines += ["", "The task text of this turn."]
    elif key.startswith(ADDVAR_PREFIX):
        lines += ["", "An additional variable sent with the request."]
    if variable is not None and variable.description:
        lines += ["", variable.description]
    if variable is not None and variable.type:
        lines += ["", f"Type: {variable.type}"]
    requirers = _requirers(key, workspace)
    if requirers:
        lines += ["", "Read by memories: " + ", ".join(requirers)]
    return "\n".join(lines)


def _pipeline(memory: MemoryDefinition) -> list[str]:
    return [str(s.get("type")) for s in memory.steps or [] if isinstance(s, dict)]


def memory_placement(memory: MemoryDefinition) -> tuple[str, str]:
    """The section and priority a memory contributes to (the defaults when it names none)."""
    contribution = memory.contribution or Contribution()
    return contribution.section or "knowledge", contribution.priority or "medium"


def memory_markdown(memory_id: str, memory: MemoryDefinition, relpath: str | None) -> str:
    lines = [f"**{memory.label or memory_id}** (`{memory_id}`)"]
    if memory.description:
        lines += ["", memory.description]
    section, priority = memory_placement(memory)
    lines += ["", f"Section: `{section}` · priority: `{priority}`"]
    steps = _pipeline(memory)
    if steps:
        lines += ["", "Pipeline: " + " → ".join(steps)]
    if relpath:
        lines += ["", f"Defined in `{relpath}`"]
    return "\n".join(lines)


def step_markdown(step: StepSpec) -> str:
    lines = [f"**{step.name}** ({step.group} step)", "", step.description]
    if step.params:
        lines += [""] + [f"- `{p.name}`{' (required)' if p.required else ''}: {p.description}" for p in step.params]
    lines += ["", "```json", json.dumps(step.example), "```"]
    return "\n".join(lines)


def section_markdown(section: Section) -> str:
    return f"**{section.name}** (section)\n\n{section.description}"


def priority_markdown(priority: Priority) -> str:
    return f"**{priority.name}** (priority, weight {priority.weight})\n\n{priority.description}"


def processor_markdown(processor: ProcessorSpec) -> str:
    lines = [f"**{processor.name}** (ingestion processor" + (", runs the client's model)" if processor.uses_llm
                                                             else ")"), "", processor.description]
    if processor.params:
        lines += [""] + [f"- `{p.name}`{' (required)' if p.required else ''}: {p.description}"
                         for p in processor.params]
    lines += ["", "```json", json.dumps(processor.example), "```"]
    return "\n".join(lines)


def trigger_markdown(trigger: Trigger) -> str:
    return f"**{trigger.name}** (ingestion trigger)\n\n{trigger.description}"


def strategy_markdown(strategy: Strategy) -> str:
    settings = ", ".join(f"`budget.{name}`" for name in strategy.settings)
    return (f"**{strategy.name}** (budget ladder strategy)\n\n{strategy.description}\n\n"
            f"Settings: {settings}\n\nIn the trace: `{strategy.example}`")
