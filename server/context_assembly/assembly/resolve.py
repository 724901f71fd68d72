"""Stage 2: which memories run this turn, and where each came from.

Explicit memories, `@mentions` in the task text and rule-matched memories, deduplicated in that
order. A reference is a persistent-memory id or a store URI; anything else is a miss that
becomes a warning (never a silent drop, never a failure of the whole assembly).
"""

from __future__ import annotations

from attrs import define, field

from ..model.evaluation import EvaluationResult
from ..model.request import AssemblyRequest
from ..rules.explicit import mentions


@define
class Reference:
    reference: str
    origin: list[str] = field(factory=list)  # "explicit", "mention", "rule:<engine>/<rule>"
    kind: str = "definition"  # "definition" | "uri" | "unknown"
    error: str | None = None  # why it does not resolve

    @property
    def explicit(self) -> bool:
        return "explicit" in self.origin or "mention" in self.origin


def resolve(request: AssemblyRequest, evaluation: EvaluationResult, memory_ids: set[str],
            check_uri: object) -> list[Reference]:
    """`check_uri(text) -> str | None` says why a store URI is invalid (None when it is fine)."""
    references: dict[str, Reference] = {}

    def add(reference: str, origin: str) -> None:
        entry = references.setdefault(reference, Reference(reference))
        if origin not in entry.origin:
            entry.origin.append(origin)

    for reference in request.explicit_memory:
        add(reference, "explicit")
    for reference in mentions(request.input.text if request.input else None):
        add(reference, "mention")
    rule_origin = _rule_origins(evaluation)
    for reference in evaluation.matched_memories:
        for origin in rule_origin.get(reference, ["rule"]):
            add(reference, origin)
    for entry in references.values():
        _classify(entry, memory_ids, check_uri)
    return list(references.values())


def _rule_origins(evaluation: EvaluationResult) -> dict[str, list[str]]:
    origins: dict[str, list[str]] = {}
    for engine in evaluation.engine_results:
        for rule in engine.rules:
            if rule.matched:
                for memory in rule.memories:
                    origins.setdefault(memory, []).append(f"rule:{engine.engine_id}/{rule.rule_id}")
    return origins


def _classify(entry: Reference, memory_ids: set[str], check_uri: object) -> None:
    if "://" in entry.reference:
        entry.kind = "uri"
        entry.error = check_uri(entry.reference) if callable(check_uri) else None
        if entry.error:
            entry.kind = "unknown"
    elif entry.reference not in memory_ids:
        entry.kind = "unknown"
        entry.error = f"no persistent memory '{entry.reference}' in this workspace"
