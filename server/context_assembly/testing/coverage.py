"""Coverage of rule tests: which rules fired and failed, which conditions were seen true and
false, which memories were activated, across every case that ran.

A rule has two outcomes (fired, not fired) and each leaf condition two (true, false); the
coverage ratio is the outcomes seen over all outcomes. Per-source rules (reading memory.source)
are evaluated during assembly per reference and are left out.
"""

from __future__ import annotations

from typing import Any

from attrs import define, field

from ..model.evaluation import ConditionResult, EvaluationResult
from ..workspace.loader import Workspace


@define
class _RuleSeen:
    fired: int = 0
    failed: int = 0
    conditions: dict[str, list[Any]] = field(factory=dict)  # path -> [label, seen true, seen false]


@define
class Coverage:
    rules: dict[str, _RuleSeen] = field(factory=dict)  # "engine/rule" -> outcomes
    memories: dict[str, int] = field(factory=dict)  # memory id -> cases that activated it
    cases: int = 0
    # a disabled engine's rules: counted once a case runs the engine by name (no case can otherwise)
    disabled: dict[str, _RuleSeen] = field(factory=dict)

    @classmethod
    def of(cls, workspace: Workspace) -> Coverage:
        coverage = cls(memories=dict.fromkeys(sorted(workspace.memories), 0))
        for engine in workspace.rule_set.engines:
            into = coverage.rules if engine.enabled else coverage.disabled
            for rule in engine.rules:
                if not rule.per_source:
                    into[f"{engine.id}/{rule.rule_id}"] = _RuleSeen()
        return coverage

    def record(self, evaluation: EvaluationResult, included: list[str]) -> None:
        self.cases += 1
        for engine in evaluation.engine_results:
            for rule in engine.rules:
                key = f"{engine.engine_id}/{rule.rule_id}"
                seen = self.rules.get(key)
                if seen is None and key in self.disabled:
                    seen = self.rules[key] = self.disabled.pop(key)
                if seen is None:
                    continue
                if rule.matched:
                    seen.fired += 1
                else:
                    seen.failed += 1
                _walk(rule.conditions, "when", seen.conditions)
        for memory in included:
            if memory in self.memories:
                self.memories[memory] += 1

    def report(self) -> dict[str, Any]:
        never_fired = [r for r, s in self.rules.items() if not s.fired]
        never_failed = [r for r, s in self.rules.items() if not s.failed]
        never_true, never_false = [], []
        total = covered = 0
        for ref, seen in self.rules.items():
            total += 2
            covered += bool(seen.fired) + bool(seen.failed)
            for path, (label, true, false) in seen.conditions.items():
                total += 2
                covered += bool(true) + bool(false)
                entry = {"rule": ref, "path": path, "condition": label}
                if not true:
                    never_true.append(entry)
                if not false:
                    never_false.append(entry)
        return {
            "percent": round(100.0 * covered / total, 2) if total else 100.0,
            "covered": covered, "outcomes": total, "cases": self.cases, "rules": len(self.rules),
            "rules_never_fired": never_fired, "rules_never_failed": never_failed,
            "conditions_never_true": never_true, "conditions_never_false": never_false,
            "memories_never_activated": [m for m, n in self.memories.items() if not n],
        }


def _label(condition: ConditionResult) -> str:
    if condition.operator in ("exists", "not_exists"):
        return f"{condition.field} {condition.operator}"
    return f"{condition.field} {condition.operator} {condition.value!r}"


def _walk(conditions: list[ConditionResult], path: str, out: dict[str, list[Any]]) -> None:
    for index, condition in enumerate(conditions):
        here = f"{path}/{index}"
        if condition.group:
            _walk(condition.conditions or [], f"{here}/{condition.group}", out)
            continue
        entry = out.setdefault(here, [_label(condition), 0, 0])
        entry[1 if condition.result else 2] += 1
