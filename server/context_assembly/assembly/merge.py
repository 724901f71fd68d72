"""Stage 4: deduplicate by content hash, keeping the highest-priority copy (ties: the first).

The hash is of the raw content, before any `format` template rendered it, so one chunk reached
through two pipelines that format it differently is still one chunk. The other copies are kept
aside, best first: when a cap or limit of stage 5 removes the kept copy, the next copy takes its
place (`promoted`), so content a cap met in one memory does not vanish from every other one."""

from __future__ import annotations

import hashlib

from attrs import define, field

from ..model.context import DroppedItem, preview
from .candidates import Candidate


def content_hash(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8", "surrogatepass")).hexdigest()


@define
class Merged:
    kept: list[Candidate]  # one copy of each content, in arrival order
    # the other copies of a kept candidate (by its `order`), best first: what may stand in for it
    copies: dict[int, list[Candidate]] = field(factory=dict)

    def promoted(self, lost: Candidate) -> Candidate | None:
        """The next copy in place of `lost` (a kept copy a cap removed), or None when none is left."""
        rest = self.copies.pop(lost.order, [])
        if not rest:
            return None
        successor, *others = rest
        if others:
            self.copies[successor.order] = others
        self.kept[self.kept.index(lost)] = successor
        return successor

    def duplicates(self) -> list[DroppedItem]:
        """The copies still left out, each naming the copy kept in its place."""
        kept = {c.order: c for c in self.kept}
        return [DroppedItem("duplicate", "the same content is already included", c.item.id, c.item.memory_id,
                            c.item.source, c.item.section, c.item.tokens, by=kept[order].item.id,
                            preview=preview(c.item.content))
                for order, copies in self.copies.items() for c in copies]


OCCURRENCES = ("episodic://", "log://")  # turns and events: the same words said twice are two facts


def _dedupe_key(candidate: Candidate) -> str:
    """Copies are the same content; but a turn or an event is one occurrence, its thread or log and
    its time: a user answering "yes" twice, or two identical deploy events, are kept (the same turn
    read twice, `episodic://t` and `episodic://t?limit=12`, is still one)."""
    item, text = candidate.item, content_hash(candidate.dedupe_text)
    if item.source.startswith(OCCURRENCES) and candidate.timestamp is not None:
        return f"occurrence\x00{item.source.partition('?')[0]}\x00{float(candidate.timestamp)!r}\x00{text}"
    return text


def deduplicate(candidates: list[Candidate]) -> Merged:
    best: dict[str, Candidate] = {}
    for candidate in candidates:
        key = _dedupe_key(candidate)
        kept = best.get(key)
        if kept is None or candidate.rank_key < kept.rank_key:
            best[key] = candidate
    copies: dict[int, list[Candidate]] = {}
    for candidate in candidates:
        winner = best[_dedupe_key(candidate)]
        if winner is not candidate:
            copies.setdefault(winner.order, []).append(candidate)
    for group in copies.values():
        group.sort(key=lambda c: c.rank_key)
    winners = {id(c) for c in best.values()}
    return Merged([c for c in candidates if id(c) in winners], copies)
