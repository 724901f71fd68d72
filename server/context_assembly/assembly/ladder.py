"""Stage 6, the budget ladder of seed 003: when the context is over its budget, the strategies of
registry/ladder.py run in the order the settings give, each until the context fits:

1. relevance_floor — drop each source's lowest-relevance hits;
2. compress_turns — keep the newest turns of a thread verbatim, summarise the older ones;
3. summarize — summarise long items, from the lowest-priority end;
4. truncate — fit the global order, cutting the item at the budget's edge at a sentence boundary
   with a marker rather than dropping it (budget.py); later items stay only if they fit whole.

Every step is recorded (strategy, item, tokens before and after). Items are Candidates in the
global order (sections in effective priority order, items in section order).
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import define, evolve, field

from ..model.context import ContextItem, LadderStep
from ..workspace.settings import BudgetSettings
from .candidates import Candidate
from .summary import Summariser
from .tokens import Counter

PROTECTED_SECTIONS = ("state", "warnings")  # the task and what the agent is told it misses


@define
class Ladder:
    """The state of one ladder run: the candidates still in, and what was done to them."""

    candidates: list[Candidate]
    max_tokens: int
    count: Counter
    settings: BudgetSettings
    summariser: Summariser
    steps: list[LadderStep] = field(factory=list)
    dropped: list[tuple[Candidate, str, str]] = field(factory=list)  # candidate, strategy, reason

    @property
    def tokens(self) -> int:
        return sum(c.item.tokens for c in self.candidates)

    @property
    def over(self) -> bool:
        return self.tokens > self.max_tokens

    def record(self, strategy: str, action: str, before: ContextItem, after_tokens: int, reason: str,
               method: str | None = None) -> None:
        self.steps.append(LadderStep(strategy, action, before.id, before.tokens, after_tokens, reason,
                                     before.memory_id, before.source, before.section, method))

    def drop(self, candidate: Candidate, strategy: str, reason: str) -> None:
        self.candidates.remove(candidate)
        self.dropped.append((candidate, strategy, reason))
        self.record(strategy, "dropped", candidate.item, 0, reason)

    def replace(self, candidate: Candidate, item: ContextItem) -> None:
        candidate.item = item


# -- 1. relevance floor ----------------------------------------------------------------------------


def relevance_floor(ladder: Ladder) -> None:
    floor = ladder.settings.relevance_floor
    for candidate in _lowest_first(ladder):
        if not ladder.over:
            return
        score = candidate.item.score
        if score is not None and candidate.effective_score < floor and candidate.item.section not in PROTECTED_SECTIONS:
            ladder.drop(candidate, "relevance_floor", f"score {score:.2f} is below the relevance floor {floor}")
    while ladder.over:  # rounds: the weakest hit of each source that has more than one
        dropped_any = False
        for candidate in _weakest_per_source(ladder):
            if not ladder.over:
                return
            ladder.drop(candidate, "relevance_floor",
                        f"the lowest-relevance hit of {candidate.reference} (score {candidate.item.score:.2f})")
            dropped_any = True
        if not dropped_any:
            return


def _lowest_first(ladder: Ladder) -> list[Candidate]:
    return list(reversed(ladder.candidates))


def _weakest_per_source(ladder: Ladder) -> list[Candidate]:
    """Per source with two or more scored hits, its weakest; sources from the lowest-priority end."""
    by_source: dict[str, list[Candidate]] = {}
    for candidate in ladder.candidates:
        if candidate.item.score is not None and candidate.item.section not in PROTECTED_SECTIONS:
            by_source.setdefault(candidate.reference, []).append(candidate)
    weakest = [min(reversed(group), key=lambda c: c.effective_score)
               for group in by_source.values() if len(group) > 1]
    position = {id(c): i for i, c in enumerate(ladder.candidates)}
    return sorted(weakest, key=lambda c: -position[id(c)])


# -- 2. compress older turns -----------------------------------------------------------------------


def compress_turns(ladder: Ladder) -> None:
    keep = ladder.settings.keep_recent_turns
    threads: dict[str, list[Candidate]] = {}
    for candidate in ladder.candidates:
        if candidate.item.source.startswith("episodic://"):
            threads.setdefault(candidate.item.source, []).append(candidate)
    for source, turns in sorted(threads.items(), key=lambda kv: -ladder.candidates.index(kv[1][-1])):
        if not ladder.over:
            return
        turns = _in_time(turns)
        older = turns[: max(0, len(turns) - keep)]
        if len(older) < 2 and not (older and older[0].item.tokens > ladder.settings.summary_tokens):
            continue
        _compress(ladder, source, older)


def _in_time(turns: list[Candidate]) -> list[Candidate]:
    """A thread's turns oldest first, by when they were said: their place in the packing order is
    not that (a boost on one turn, or the thread read by two references, moved the newest ahead and
    it was summarised while older turns stayed verbatim). Without every timestamp, as they stand."""
    stamps = [c.timestamp for c in turns]
    if not all(isinstance(s, int | float) and not isinstance(s, bool) for s in stamps):
        return turns
    order = sorted(range(len(turns)), key=lambda i: (stamps[i], i))
    return [turns[i] for i in order]


def _compress(ladder: Ladder, source: str, older: list[Candidate]) -> None:
    before = sum(c.item.tokens for c in older)
    text = "\n".join(c.item.content for c in older)
    head = f"Earlier turns ({len(older)}, summarised): "
    room = min(ladder.settings.summary_tokens, before // 2) - ladder.count(head)  # the head within summary_tokens
    summary = ladder.summariser.summarise(text, room) if room > 0 else None
    if summary is None:
        return
    content = head + summary[0]
    tokens = ladder.count(content)
    if tokens >= before:
        return
    first = older[0]
    merged = evolve(first.item, id=f"{source}:earlier", content=content, tokens=tokens,
                    metadata={**first.item.metadata, "compressed_turns": [c.item.id for c in older],
                              "original_tokens": before, "summary": summary[1]})
    for candidate in older[1:]:
        ladder.candidates.remove(candidate)
    ladder.replace(first, merged)
    ladder.steps.append(LadderStep("compress_turns", "compressed", merged.id, before, tokens,
                                   f"{len(older)} older turns of {source} summarised; the newest "
                                   f"{ladder.settings.keep_recent_turns} kept verbatim",
                                   first.item.memory_id, source, first.item.section, summary[1]))


# -- 3. summarise long items -----------------------------------------------------------------------


def summarize(ladder: Ladder) -> None:
    threshold = ladder.settings.summarize_above_tokens
    target = min(ladder.settings.summary_tokens, threshold)
    for candidate in _lowest_first(ladder):
        if not ladder.over:
            return
        item = candidate.item
        if item.tokens <= threshold or item.section == "state" or item.metadata.get("summarised"):
            continue
        summary = ladder.summariser.summarise(item.content, target)
        if summary is None:
            continue
        tokens = ladder.count(summary[0])
        if tokens >= item.tokens:
            continue
        ladder.replace(candidate, evolve(item, content=summary[0], tokens=tokens, metadata={
            **item.metadata, "summarised": True, "summary": summary[1], "original_tokens": item.tokens}))
        ladder.record("summarize", "summarised", item, tokens,
                      f"longer than {threshold} tokens: summarised to fit", summary[1])


STRATEGIES: dict[str, Callable[[Ladder], None]] = {
    "relevance_floor": relevance_floor, "compress_turns": compress_turns, "summarize": summarize,
}
