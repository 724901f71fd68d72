"""The budget ladder of seed 003: the strategies the assembly applies, in order, when the context is
over its budget. Defined once here; the settings schema, the budget stage, the trace and the README
read this table. Settings (`budget.ladder`) may reorder the strategies or leave some out.
"""

from __future__ import annotations

from attrs import frozen


@frozen
class Strategy:
    name: str
    description: str
    settings: tuple[str, ...]  # the `budget.*` settings keys it reads
    example: str  # what a trace step of it looks like


LADDER: tuple[Strategy, ...] = (
    Strategy("relevance_floor",
             "Drop each source's lowest-relevance hits: first every scored hit below `relevance_floor`, then, "
             "from the lowest-priority end, the weakest hit of each source that has more than one (a source's "
             "best hit is kept for the later strategies to shorten).",
             ("relevance_floor",), "dropped vector://docs#7 (score 0.12), 85 -> 0 tokens"),
    Strategy("compress_turns",
             "Compress older episodic turns: keep the newest `keep_recent_turns` of a thread verbatim and replace "
             "the older ones by one summary item.",
             ("keep_recent_turns", "summary_tokens"), "compressed 9 turns of episodic://t-1, 640 -> 96 tokens"),
    Strategy("summarize",
             "Summarise long items (above `summarize_above_tokens`), from the lowest-priority end: through the "
             "client's model (llm/complete) when it offers one, else an extractive summary (the lead sentence and "
             "the sentences sharing most words with the task).",
             ("summarize_above_tokens", "summary_tokens", "summary_timeout_ms"),
             "summarised tool-output-3, 973 -> 118 tokens"),
    Strategy("truncate",
             "Hard-truncate as a last resort: the item at the budget's edge is cut at a sentence (else word) "
             "boundary and ends with a marker saying how much was left out; an item after it is kept only if it "
             "fits whole in what is left (not a turn older than a dropped one of its thread: a conversation keeps "
             "no hole). Any item in any section, so a critical document is shortened rather than lost.",
             ("min_truncated_tokens",), "truncated architecture-docs#0, 973 -> 120 tokens"),
)
STRATEGY_NAMES: tuple[str, ...] = tuple(s.name for s in LADDER)


def lookup_strategy(name: object) -> Strategy | None:
    return next((s for s in LADDER if s.name == name), None)
