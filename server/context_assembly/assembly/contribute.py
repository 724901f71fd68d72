"""Stage 5: group by section, rank, and apply per-memory limits, rule caps and boosts.

Within a section items sort by priority weight (critical 4 … low 1), then score × boost, then
arrival. Sections pack in their effective priority order: the seed-001 defaults, moved by rules'
`set_priority`. Every item a limit or cap removes is recorded with the limit that removed it.
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import define, evolve, field

from ..model.context import DroppedItem, preview
from ..model.rules import Boost, Cap
from ..registry.sections import PRIORITY_WEIGHTS, SECTION_NAMES
from ..rules.globs import is_pattern, reference_matches
from .candidates import Candidate
from .summary import MIN_CUT_TOKENS, shorten_item
from .tokens import Counter

# seed 001: state highest; warnings, constraints high; knowledge, history medium; the rest low
DEFAULT_SECTION_PRIORITY = {
    "state": "critical", "warnings": "high", "constraints": "high", "knowledge": "medium",
    "history": "medium", "suggestions": "low", "working_memory": "low",
}
KG_ENTITY = "kg_entity:"


@define
class SourceRules:
    """What per-source rules (reading memory.source) decided for one reference."""

    caps: list[Cap] = field(factory=list)
    set_priority: dict[str, str] = field(factory=dict)
    rules: list[str] = field(factory=list)
    priority_rules: dict[str, str] = field(factory=dict)  # section -> the rule whose priority applies


@define
class Contribution:
    sections: dict[str, list[Candidate]]
    order: list[str]  # effective section order
    dropped: list[DroppedItem] = field(factory=list)


def section_order(set_priority: dict[str, str]) -> list[str]:
    def key(section: str) -> tuple[int, int]:
        priority = set_priority.get(section, DEFAULT_SECTION_PRIORITY[section])
        return (-PRIORITY_WEIGHTS.get(priority, 2), SECTION_NAMES.index(section))

    return sorted(SECTION_NAMES, key=key)


def matches_target(target: str, candidate: Candidate) -> bool:
    """A cap/boost target: a memory id, a URI or URI pattern, a section, or kg_entity:<name>."""
    item = candidate.item
    if target.startswith(KG_ENTITY):
        entity = target[len(KG_ENTITY):].casefold()
        haystack = " ".join(str(v) for v in (item.metadata.get("entities"), item.metadata.get("name"),
                                             item.metadata.get("title"), item.content[:500]) if v)
        return entity in haystack.casefold()
    if target in (item.memory_id, candidate.reference, item.source, item.section):
        return True
    if is_pattern(target):
        return any(reference_matches(target, value) for value in (item.source, candidate.reference) if value)
    return False


def apply_boosts(candidates: Iterable[Candidate], boosts: list[Boost]) -> None:
    """Multiply each candidate's boost by every boost that targets it; an item with a score then
    carries the boosted score (a copy: items may be shared with the pipeline cache), so the score
    an agent reads explains the order, and the candidate's boost is spent (its ranking is unchanged)."""
    for candidate in candidates:
        for boost in boosts:
            if matches_target(boost.target, candidate):
                candidate.boost *= boost.weight
        if candidate.boost != 1.0 and candidate.item.score is not None:
            candidate.item = evolve(candidate.item, score=candidate.item.score * candidate.boost)
            candidate.boost = 1.0


def _limit(candidates: list[Candidate], max_items: int | None, max_tokens: int | None, kind: str,
           by: str, count: Counter | None = None,
           min_cut: int = MIN_CUT_TOKENS) -> tuple[list[Candidate], list[DroppedItem]]:
    """Keep candidates (already in rank order) while both limits hold; report the rest. With a
    counter, the item that crosses `max_tokens` is shortened to the room left rather than dropped
    (the first that crosses it only, and only when the cut keeps `min_cut` tokens: every later
    one was cut again to the scraps left, 8 tokens of content and a marker)."""
    kept: list[Candidate] = []
    dropped: list[DroppedItem] = []
    tokens = 0
    crossed = False
    for candidate in candidates:
        item = candidate.item
        over_items = max_items is not None and len(kept) >= max_items
        over_tokens = max_tokens is not None and tokens + item.tokens > max_tokens
        if over_tokens and not over_items and not crossed and count is not None and max_tokens is not None:
            crossed = True
            shortened = shorten_item(item, max_tokens - tokens, count, min_cut)
            if shortened is not None:
                dropped.append(DroppedItem("shortened", f"max_tokens of {by}: cut to {shortened.tokens} tokens",
                                           item.id, item.memory_id, item.source, item.section, item.tokens, by))
                candidate.item = shortened
                kept.append(candidate)
                tokens += shortened.tokens
                continue
        if over_items or over_tokens:
            reason = f"{'max_items' if over_items else 'max_tokens'} of {by}"
            dropped.append(DroppedItem(kind if kind == "cap" else ("max_items" if over_items else "max_tokens"),
                                       reason, item.id, item.memory_id, item.source, item.section, item.tokens, by,
                                       preview(item.content)))
            continue
        kept.append(candidate)
        tokens += item.tokens
    return kept, dropped


def _apply_limit(sections: dict[str, list[Candidate]], selected: set[int], max_items: int | None,
                 max_tokens: int | None, kind: str, by: str, count: Counter | None = None,
                 min_cut: int = MIN_CUT_TOKENS) -> list[DroppedItem]:
    """Apply one limit to the selected candidates across sections (in section rank order)."""
    group = [c for name in SECTION_NAMES for c in sections[name] if id(c) in selected]
    kept, dropped = _limit(group, max_items, max_tokens, kind, by, count, min_cut)
    keep = {id(c) for c in kept}
    removed = selected - keep
    for name in SECTION_NAMES:
        sections[name] = [c for c in sections[name] if id(c) not in removed]
    return dropped


def _reprioritised(candidate: Candidate, rules: SourceRules) -> list[DroppedItem]:
    """A per-source rule's priority for the item's section, recorded when it changes the item's."""
    item = candidate.item
    priority = rules.set_priority[item.section]
    if priority == item.priority:
        return []
    by = rules.priority_rules.get(item.section, ", ".join(rules.rules))
    decision = DroppedItem("priority", f"priority {item.priority} -> {priority} by a per-source rule", item.id,
                           item.memory_id, item.source, item.section, item.tokens, by)
    item.priority = priority
    return [decision]


def threads_in_time(history: list[Candidate]) -> list[Candidate]:
    """Each thread's turns in the order they were said, the thread where its best-ranked turn is:
    a thread read by two references (`?limit=3` and all of it) showed its newest turns first."""
    threads: dict[str, list[Candidate]] = {}
    for candidate in history:
        threads.setdefault(candidate.item.source, []).append(candidate)
    ordered: list[Candidate] = []
    for turns in threads.values():
        stamps = [c.timestamp for c in turns]
        timed = all(isinstance(s, int | float) and not isinstance(s, bool) for s in stamps)
        ordered += sorted(turns, key=lambda c: c.timestamp or 0.0) if timed else turns  # whatever the priority
    return ordered


def contribute(candidates: list[Candidate], caps: list[Cap], set_priority: dict[str, str],
               boosts: list[Boost], per_source: dict[str, SourceRules], count: Counter | None = None,
               cap_rules: dict[str, str] | None = None, min_cut: int = MIN_CUT_TOKENS) -> Contribution:
    """`cap_rules`: each cap target's rule, named in what its cap removes; `min_cut`: the fewest
    tokens a cut may keep (budget.min_truncated_tokens), else the item is dropped."""
    apply_boosts(candidates, boosts)
    dropped: list[DroppedItem] = []
    for candidate in candidates:
        rules = per_source.get(candidate.reference)
        if rules and candidate.item.section in rules.set_priority:
            dropped += _reprioritised(candidate, rules)
    sections: dict[str, list[Candidate]] = {name: [] for name in SECTION_NAMES}
    for candidate in candidates:
        sections[candidate.item.section].append(candidate)
    for name in SECTION_NAMES:
        sections[name].sort(key=lambda c: c.rank_key)
    for reference in dict.fromkeys(c.reference for c in candidates):
        limits = next(c.limits for c in candidates if c.reference == reference)
        if limits.get("max_items") is not None or limits.get("max_tokens") is not None:
            selected = {id(c) for c in candidates if c.reference == reference}
            dropped += _apply_limit(sections, selected, limits.get("max_items"), limits.get("max_tokens"),
                                    "limit", f"contribution of {reference}", count, min_cut)
    for cap in caps:
        selected = {id(c) for name in SECTION_NAMES for c in sections[name] if matches_target(cap.target, c)}
        rule = (cap_rules or {}).get(cap.target)
        by = f"cap of {rule} on {cap.target}" if rule else f"cap on {cap.target}"
        dropped += _apply_limit(sections, selected, cap.max_items, cap.max_tokens, "cap", by, count, min_cut)
    for reference, rules in per_source.items():
        for cap in rules.caps:
            selected = {id(c) for name in SECTION_NAMES for c in sections[name] if c.reference == reference}
            dropped += _apply_limit(sections, selected, cap.max_items, cap.max_tokens, "cap",
                                    f"per-source cap of {', '.join(rules.rules)} on {reference}", count, min_cut)
    # shown in the order said, once limits and caps (which keep the best-ranked: the newest) are applied
    sections["history"] = threads_in_time(sections["history"])
    return Contribution(sections, section_order(set_priority), dropped)
