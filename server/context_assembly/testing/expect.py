"""Checking a case's expectations against what it observed: one failure per expectation that
does not hold, with the expected and the actual value."""

from __future__ import annotations

from typing import Any

from attrs import define, field

from ..model.evaluation import RuleResult
from .observe import Observation

MAX_SHOWN = 8  # items shown as the actual value of an item expectation


@define
class Explanation:
    """One rule involved in a failure, evaluated against the case's request, condition by condition."""

    engine_id: str
    rule: RuleResult  # matched, and per condition the field, operator, value, actual and outcome
    adds: list[str] = field(factory=list)
    excludes: list[str] = field(factory=list)


@define
class Failure:
    expectation: str  # the key under `expect`
    message: str
    expected: Any
    actual: Any
    pointer: str = ""  # the expectation's JSON pointer in the test file
    memories: list[str] = field(factory=list)  # memories whose rules explain the failure
    rules: list[str] = field(factory=list)  # rule references (`engine/rule` or `rule`) involved
    explanations: list[Explanation] = field(factory=list)  # filled by the runner
    line: int | None = None  # where the expectation is in the test file (1-based), filled by the runner
    column: int | None = None


def rule_matches(reference: str, fired: tuple[str, str]) -> bool:
    engine, rule = fired
    return reference == f"{engine}/{rule}" if "/" in reference else reference == rule


def item_matches(spec: dict[str, Any], item: dict[str, Any]) -> bool:
    if "section" in spec and item["section"] != spec["section"]:
        return False
    if "memory" in spec and spec["memory"] not in (item["memory"], item["source"]):
        return False
    return not ("text" in spec and spec["text"].lower() not in item["content"].lower())


def describe_item(spec: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v!r}" for k, v in spec.items())


def check(expect: dict[str, Any], seen: Observation, pointer: str) -> list[Failure]:
    failures: list[Failure] = []

    def fail(key: str, message: str, expected: Any, actual: Any, index: int | None = None, **extra: Any) -> None:
        where = f"{pointer}/expect/{key}" + ("" if index is None else f"/{index}")
        failures.append(Failure(key, message, expected, actual, where, **extra))

    included = set(seen.included)
    for i, memory in enumerate(expect.get("memories_included", [])):
        if memory not in included:
            fail("memories_included", f"memory '{memory}' was not included", memory, seen.included, i,
                 memories=[memory])
    for i, memory in enumerate(expect.get("memories_excluded", [])):
        if memory in included:
            fail("memories_excluded", f"memory '{memory}' was included", memory, seen.included, i, memories=[memory])
    fired_names = [f"{e}/{r}" for e, r in seen.fired]
    # `engine/rule` or a bare `rule` (any engine): both looked up in sets, cases can list hundreds
    fired = set(fired_names) | {r for _, r in seen.fired}
    for i, rule in enumerate(expect.get("rules_fired", [])):
        if rule not in fired:
            fail("rules_fired", f"rule '{rule}' did not fire", rule, fired_names, i, rules=[rule])
    for i, rule in enumerate(expect.get("rules_not_fired", [])):
        if rule in fired:
            fail("rules_not_fired", f"rule '{rule}' fired", rule, fired_names, i, rules=[rule])
    _check_assembly(expect, seen, fail)
    _check_warnings(expect, seen, fail)
    order = list(expect)  # failures in the order the file lists its expectations
    return sorted(failures, key=lambda f: order.index(f.expectation))


def _check_assembly(expect: dict[str, Any], seen: Observation, fail: Any) -> None:
    if seen.items is None:
        return
    present = sorted({item["section"] for item in seen.items})
    for i, section in enumerate(expect.get("sections_present", [])):
        if section not in present:
            fail("sections_present", f"section '{section}' is empty", section, present, i)
    for i, section in enumerate(expect.get("sections_absent", [])):
        if section in present:
            fail("sections_absent", f"section '{section}' is not empty", section, present, i)
    for key, wanted in (("items_present", True), ("items_absent", False)):
        for i, spec in enumerate(expect.get(key, [])):
            found = [item for item in seen.items if item_matches(spec, item)]
            if bool(found) != wanted:
                actual = [_short(item) for item in (found if found else seen.items)][:MAX_SHOWN]
                verb = "no item has" if wanted else f"{len(found)} item(s) have"
                fail(key, f"{verb} {describe_item(spec)}", spec, actual, i,
                     memories=[spec["memory"]] if "memory" in spec else [])
    limit = expect.get("max_token_estimate")
    if limit is not None and seen.token_estimate is not None and seen.token_estimate > limit:
        fail("max_token_estimate", f"token_estimate {seen.token_estimate} is above {limit}", limit,
             seen.token_estimate)


def _check_warnings(expect: dict[str, Any], seen: Observation, fail: Any) -> None:
    for i, text in enumerate(expect.get("warnings", [])):
        if not any(text.lower() in warning.lower() for warning in seen.warnings):
            fail("warnings", f"no warning contains {text!r}", text, seen.warnings, i)
    if expect.get("no_warnings") and seen.warnings:
        fail("no_warnings", f"{len(seen.warnings)} warning(s)", [], seen.warnings)


def _short(item: dict[str, Any]) -> dict[str, Any]:
    content = item["content"]
    return {"memory": item["memory"] or item["source"], "section": item["section"],
            "content": content if len(content) <= 80 else content[:77] + "..."}
