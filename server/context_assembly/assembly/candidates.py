"""An item on its way through stages 4-6, with what ranking and caps need to know about it."""

from __future__ import annotations

from typing import Any

from attrs import define, field

from ..model.context import ContextItem
from ..registry.sections import PRIORITY_WEIGHTS


@define
class Candidate:
    item: ContextItem
    reference: str  # the resolved memory reference (definition id or store URI) it came from
    order: int  # arrival order: the stable tie-break
    limits: dict[str, Any] = field(factory=dict)  # the definition's contribution max_items / max_tokens
    boost: float = 1.0
    raw_content: str | None = None  # before a `format` template: what duplicates are recognised by
    timestamp: float | None = None  # when it was said or written, where the store knows (turns: their order)

    @property
    def dedupe_text(self) -> str:
        return self.item.content if self.raw_content is None else self.raw_content

    @property
    def weight(self) -> int:
        return PRIORITY_WEIGHTS.get(self.item.priority, 2)

    @property
    def effective_score(self) -> float:
        # an unscored item (a direct reference, a note) counts as fully relevant
        return (1.0 if self.item.score is None else self.item.score) * self.boost

    @property
    def rank_key(self) -> tuple[int, float, int]:
        """Sorts best first: priority weight, then score (times boost), then arrival."""
        return (-self.weight, -self.effective_score, self.order)
