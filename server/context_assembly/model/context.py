"""What an assembly returns (SPEC §6 stage 7): sections of ContextItems, the trace and meta."""

from __future__ import annotations

from typing import Any

from attrs import define, field

from ..registry.sections import SECTION_NAMES


@define
class ContextItem:
    id: str
    content: str
    memory_id: str | None
    source: str
    section: str
    priority: str
    score: float | None
    tokens: int
    metadata: dict[str, Any] = field(factory=dict)


@define
class SectionTrace:
    tokens: int = 0
    items: int = 0
    truncated: bool = False
    dropped: int = 0


@define
class MemoryCall:
    """One memory activated for this turn: where it came from and what running it gave."""

    reference: str  # a memory id or a store URI
    origin: list[str]  # "explicit", "mention", or "rule:<engine>/<rule>"
    status: str  # ok | cached | failed | timeout | skipped | missing | excluded | cancelled
    kind: str = "definition"  # "definition" | "uri"
    duration_ms: float = 0.0
    items: int = 0
    error: str | None = None
    missing_variables: list[str] = field(factory=list)
    steps: list[dict[str, Any]] = field(factory=list)
    cached: bool = False  # the pipeline's result came from the result cache


@define
class LadderStep:
    """One step of the budget ladder (registry/ladder.py) on one item."""

    strategy: str  # relevance_floor | compress_turns | summarize | truncate
    action: str  # dropped | compressed | summarised | truncated
    item_id: str | None
    tokens_before: int
    tokens_after: int
    reason: str
    memory_id: str | None = None
    source: str | None = None
    section: str | None = None
    method: str | None = None  # summaries: "llm" or "extractive" (and why the model was not used)


@define
class DroppedItem:
    """A decision the trace records: an item left out (or a conflict settled) and why."""

    # "duplicate" | "cap" | "max_items" | "max_tokens" | "shortened" | "budget" | "relevance" | "excluded" | "conflict"
    # | "access" (snapshots of earlier versions only: what a token may not read is now never read or counted)
    # | "priority" (a per-source rule changed the item's priority: it stays)
    kind: str
    reason: str
    item_id: str | None = None
    memory_id: str | None = None
    source: str | None = None
    section: str | None = None
    tokens: int | None = None
    by: str | None = None  # the rule, cap or copy responsible
    preview: str | None = None  # the start of the dropped item's content (one line), for people
    overridden: list[str] | None = None  # conflict: the rules the winning one overrode


PREVIEW_CHARS = 80


def preview(content: str) -> str:
    """The start of a text on one line, at most PREVIEW_CHARS characters (`…` when cut)."""
    flat = " ".join(content.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1].rstrip() + "…"


@define
class Trace:
    memory_calls: list[MemoryCall] = field(factory=list)
    rules_applied: list[dict[str, Any]] = field(factory=list)
    variables_used: list[str] = field(factory=list)
    missing_variables: list[str] = field(factory=list)
    sections: dict[str, SectionTrace] = field(factory=lambda: {name: SectionTrace() for name in SECTION_NAMES})
    decisions: list[DroppedItem] = field(factory=list)
    section_order: list[str] = field(factory=lambda: list(SECTION_NAMES))  # effective packing order
    stages: dict[str, float] = field(factory=dict)  # stage name -> duration in ms
    ladder: list[LadderStep] = field(factory=list)  # what the budget ladder did, step by step
    tools: list[dict[str, Any]] = field(factory=list)  # request tools: score, kept or not, and why


@define
class Meta:
    assembly_id: str
    token_estimate: int = 0
    total_items: int = 0
    truncated: bool = False
    duration_ms: float = 0.0
    max_tokens: int | None = None
    tokenizer: str = "estimate"
    snapshot: str | None = None  # the replay snapshot's path, when settings enable snapshots


@define
class AssembledContext:
    context: dict[str, list[ContextItem]]
    trace: Trace
    meta: Meta
