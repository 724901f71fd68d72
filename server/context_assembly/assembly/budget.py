"""Stage 6: fit the context into `max_tokens` by the ladder (ladder.py), then the final fit.

The final fit walks the global order (sections in effective priority order, items in section
order) and keeps what fits. With `truncate` on the ladder, the item at the budget's edge is cut at
a sentence (else word) boundary and ends with a marker saying how much was left out, so a
critical document is shortened rather than lost; what follows it is kept only if it fits whole in
what is left (but not a turn older than a dropped one of its thread: a conversation keeps no
hole). Warnings are placed
after constraints in this walk, so a warning is never the reason a constraint is dropped. The
returned token count never exceeds the budget.
"""

from __future__ import annotations

from attrs import define, field

from ..model.context import ContextItem, LadderStep
from ..workspace.settings import BudgetSettings
from .candidates import Candidate
from .ladder import STRATEGIES, Ladder
from .summary import Summariser, shorten_item
from .tokens import Counter


@define
class Packed:
    kept: list[ContextItem]
    dropped: list[tuple[ContextItem, str, str]] = field(factory=list)  # item, strategy, reason
    cut: list[ContextItem] = field(factory=list)  # items shortened by `truncate`
    tokens: int = 0
    steps: list[LadderStep] = field(factory=list)

    @property
    def truncated(self) -> bool:
        return bool(self.dropped) or bool(self.cut) or any(s.action != "dropped" for s in self.steps)


def pack(ordered: list[Candidate], max_tokens: int | None, count: Counter, settings: BudgetSettings,
         summariser: Summariser) -> Packed:
    """Fit `ordered` into `max_tokens` (None: keep all) by the ladder, then the final fit."""
    if max_tokens is None or sum(c.item.tokens for c in ordered) <= max_tokens:
        return Packed([c.item for c in ordered], tokens=sum(c.item.tokens for c in ordered))
    ladder = Ladder(list(ordered), max_tokens, count, settings, summariser)
    cut_edge = False
    for name in settings.ladder:
        if not ladder.over:
            break
        if name == "truncate":
            cut_edge = True
            break
        STRATEGIES[name](ladder)
    kept, cut = _final_fit(ladder, cut_edge) if ladder.over else (list(ladder.candidates), [])
    dropped = [(c.item, strategy, reason) for c, strategy, reason in ladder.dropped]
    return Packed([c.item for c in kept], dropped, cut, sum(c.item.tokens for c in kept), ladder.steps)


def allocation_order(candidates: list[Candidate]) -> list[Candidate]:
    """The global order with the warnings moved after the constraints (when they come before), and
    the history's turns and events newest first within each priority (they are shown oldest first:
    walked in that order, the final fit dropped the newest turns, which `compress_turns` had
    just kept verbatim as the ones that matter)."""
    candidates = _newest_history_first(candidates)
    sections = [c.item.section for c in candidates]
    if "warnings" not in sections or "constraints" not in sections:
        return list(candidates)
    last_constraint = max(i for i, s in enumerate(sections) if s == "constraints")
    first_warning = sections.index("warnings")
    if first_warning > last_constraint:
        return list(candidates)
    warnings = [c for c in candidates if c.item.section == "warnings"]
    rest = [c for c in candidates if c.item.section != "warnings"]
    at = rest.index(candidates[last_constraint]) + 1
    return rest[:at] + warnings + rest[at:]


def _newest_history_first(candidates: list[Candidate]) -> list[Candidate]:
    slots = [i for i, c in enumerate(candidates) if c.item.section == "history"]
    if len(slots) < 2:
        return list(candidates)
    history = sorted((candidates[i] for i in slots), key=lambda c: (
        -c.weight, c.timestamp is None, -(c.timestamp or 0.0)))  # stable: untimed items keep their order
    ordered = list(candidates)
    for slot, candidate in zip(slots, history, strict=True):
        ordered[slot] = candidate
    return ordered


def _final_fit(ladder: Ladder, cut_edge: bool) -> tuple[list[Candidate], list[ContextItem]]:
    remaining = ladder.max_tokens
    keep: set[int] = set()
    cut: list[ContextItem] = []
    holed: set[str] = set()  # threads a turn was dropped from
    edge_reached = False
    for candidate in allocation_order(ladder.candidates):
        item = candidate.item
        # a turn older than one of its thread that was dropped stays out too (history is walked
        # newest first): a conversation keeps no hole
        hole = item.section == "history" and item.source in holed
        if item.tokens <= remaining and not hole:  # after the edge too: what a cut left over takes what fits
            keep.add(id(candidate))
            remaining -= item.tokens
            continue
        shortened = _cut(item, remaining, ladder) if cut_edge and not edge_reached and not hole else None
        if shortened is not None:
            candidate.item = shortened
            keep.add(id(candidate))
            cut.append(shortened)
            remaining -= shortened.tokens
            ladder.record("truncate", "truncated", item, shortened.tokens,
                          f"cut to fit the budget of {ladder.max_tokens} tokens")
            edge_reached = True
            continue
        if item.section == "history":
            holed.add(item.source)
        strategy = "truncate" if cut_edge else "budget"
        why = (f"older than a turn of {item.source} that did not fit: the conversation keeps no hole" if hole
               else f"{item.tokens} tokens do not fit in the {remaining} left of the budget of {ladder.max_tokens}")
        ladder.dropped.append((candidate, strategy, why))
        ladder.record(strategy, "dropped", item, 0, why)
    kept = [c for c in ladder.candidates if id(c) in keep]
    ladder.candidates = kept
    return kept, cut


def _cut(item: ContextItem, room: int, ladder: Ladder) -> ContextItem | None:
    return shorten_item(item, room, ladder.count, ladder.settings.min_truncated_tokens)
