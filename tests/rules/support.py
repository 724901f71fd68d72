"""Building engines and requests from plain JSON for rule tests."""

from __future__ import annotations

from typing import Any

from context_assembly.model import AssemblyRequest, EvaluationResult, RuleEngine, structure
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.evaluate import RuleSet


def engine(rules: list[dict[str, Any]], engine_id: str = "e", enabled: bool = True) -> dict[str, Any]:
    return {"id": engine_id, "enabled": enabled, "rules": rules}


def rule(rule_id: str, when: list[Any], memories: list[str] | None = None, priority: float = 0,
         **then: Any) -> dict[str, Any]:
    return {"id": rule_id, "priority": priority, "when": when,
            "then": {"add_memories": memories if memories is not None else [rule_id], **then}}


def request(variables: dict[str, Any] | None = None, text: str | None = None, **extra: Any) -> AssemblyRequest:
    data: dict[str, Any] = {"scope_variables": extra.pop("scopes", {}), "additional_variables": variables or {}}
    if text is not None:
        data["input"] = {"text": text}
    data.update(extra)
    return structure(data, AssemblyRequest)


def evaluate(engines: list[dict[str, Any]], req: AssemblyRequest, explain: bool | str = True) -> EvaluationResult:
    compiled = [compile_engine(structure(e, RuleEngine)) for e in engines]
    return RuleSet(compiled).evaluate(req, explain=explain)


def holds(condition: dict[str, Any], variables: dict[str, Any] | None = None, text: str | None = None) -> bool:
    """Does one condition hold? Checked on both paths, which must agree."""
    engines = [engine([rule("r", [condition])])]
    fast = evaluate(engines, request(variables, text), explain=False)
    slow = evaluate(engines, request(variables, text), explain=True)
    assert fast.matched_memories == slow.matched_memories
    return fast.matched_memories == ["r"]
