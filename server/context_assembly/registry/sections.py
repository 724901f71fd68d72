"""Context sections and priorities (seed 000 / 001)."""

from __future__ import annotations

from attrs import frozen


@frozen
class Section:
    name: str
    description: str


# The fixed order of sections in an assembled context, highest priority first.
SECTIONS: tuple[Section, ...] = (
    Section("state", "The current task, active file and environment."),
    Section("warnings", "Memory misses, budget truncation, validation problems, pipeline errors."),
    Section("constraints", "Rules the agent must follow: guardrails, style guides."),
    Section("knowledge", "Persistent memory results and explicit @mentions."),
    Section("history", "Recent turns from episodic memory and events."),
    Section("suggestions", "Lower-confidence recalled chunks."),
    Section("working_memory", "The per-turn scratchpad."),
)
SECTION_NAMES: tuple[str, ...] = tuple(s.name for s in SECTIONS)


@frozen
class Priority:
    name: str
    weight: int
    description: str


PRIORITIES: tuple[Priority, ...] = (
    Priority("critical", 4, "Always packed first within its section."),
    Priority("high", 3, "Important for the task."),
    Priority("medium", 2, "The default for memory contributions."),
    Priority("low", 1, "Dropped first when the budget is tight."),
)
PRIORITY_NAMES: tuple[str, ...] = tuple(p.name for p in PRIORITIES)
PRIORITY_WEIGHTS: dict[str, int] = {p.name: p.weight for p in PRIORITIES}
