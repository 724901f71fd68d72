"""Stage 4: deduplicate by content hash, keeping the highest-priority copy (ties: the first).

The hash is of the raw content, before any `format` template rendered it, so one chunk reached
through two pipelines that format it differently is still one chunk."""

from __future__ import annotations

import hashlib

from ..model.context import DroppedItem, preview
from .candidates import Candidate


def content_hash(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8", "surrogatepass")).hexdigest()


def deduplicate(candidates: list[Candidate]) -> tuple[list[Candidate], list[DroppedItem]]:
    best: dict[str, Candidate] = {}
    for candidate in candidates:
        key = content_hash(candidate.dedupe_text)
        kept = best.get(key)
        if kept is None or candidate.rank_key < kept.rank_key:
            best[key] = candidate
    winners = {id(c) for c in best.values()}
    dropped = [
        DroppedItem("duplicate", "the same content is already included", c.item.id, c.item.memory_id,
                    c.item.source, c.item.section, c.item.tokens, by=best[content_hash(c.dedupe_text)].item.id,
                    preview=preview(c.item.content))
        for c in candidates if id(c) not in winners
    ]
    return [c for c in candidates if id(c) in winners], dropped
