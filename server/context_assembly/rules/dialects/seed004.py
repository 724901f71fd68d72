"""The seed-004 "context rules" JSON dialect -> canonical rules.

A file holds one rule or an array of rules:
`{"name", "condition": {field, op, value} | [ ... ], "action": {include | exclude | cap | setPriority}}`.
Definition order is evaluation order (all priorities stay 0), so "the first matching rule for a
reference wins" falls out of the canonical engine's tie order.
"""

from __future__ import annotations

from typing import Any

from ...registry.operators import lookup_operator
from ...registry.variables import canonical_field
from .common import NormalisedRule, as_list, dialect_problem, rule_id

DIALECT = "seed-004"


def normalise_condition(raw: Any) -> Any:
    """`{field, op, value}` -> `{field, operator, value}`; groups are passed through recursively."""
    if not isinstance(raw, dict):
        return raw
    if "any" in raw or "all" in raw:
        key = "any" if "any" in raw else "all"
        items = raw[key]
        return {key: [normalise_condition(c) for c in items]} if isinstance(items, list) else raw
    if "not" in raw:
        return {"not": normalise_condition(raw["not"])}
    out = {k: v for k, v in raw.items() if k not in ("op", "operator", "field")}
    spelling = raw.get("op", raw.get("operator"))
    operator = lookup_operator(spelling)
    field = raw.get("field")
    return {
        "field": canonical_field(field) if isinstance(field, str) else field,
        "operator": operator.name if operator else spelling,
        **out,
    }


def _cap(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    target = raw.get("source", raw.get("section", raw.get("target")))
    if not isinstance(target, str):
        return None
    if target.endswith("://"):
        target += "**"  # a bare scheme caps every source of that store
    cap: dict[str, Any] = {"target": target}
    if "tokens" in raw or "max_tokens" in raw:
        cap["max_tokens"] = raw.get("tokens", raw.get("max_tokens"))
    if "items" in raw or "max_items" in raw:
        cap["max_items"] = raw.get("items", raw.get("max_items"))
    return cap


def normalise_actions(action: Any, where: str, problems: list) -> dict[str, Any]:
    then: dict[str, Any] = {}
    if not isinstance(action, dict):
        problems.append(dialect_problem(f"{where}/action", "'action' must be an object"))
        return then
    if "include" in action:
        then["add_memories"] = as_list(action["include"])
    if "exclude" in action:
        then["exclude_memories"] = as_list(action["exclude"])
    if "cap" in action:
        caps = [_cap(c) for c in as_list(action["cap"])]
        if any(c is None for c in caps):
            problems.append(dialect_problem(f"{where}/action/cap", "'cap' needs 'source' or 'section'"))
        then["caps"] = [c for c in caps if c is not None]
    if "setPriority" in action:
        sp = action["setPriority"]
        if isinstance(sp, dict) and isinstance(sp.get("section"), str):
            then["set_priority"] = {sp["section"]: sp.get("value")}
        else:
            problems.append(dialect_problem(f"{where}/action/setPriority",
                                            "'setPriority' needs 'section' and 'value'"))
    return then


def normalise(document: Any, stem: str) -> tuple[list[NormalisedRule], list]:
    """One seed-004 file -> canonical rule dicts (with their source pointers) and problems."""
    problems: list = []
    items = document if isinstance(document, list) else [document]
    base = "" if not isinstance(document, list) else None
    rules: list[NormalisedRule] = []
    for index, item in enumerate(items):
        where = base if base is not None else f"/{index}"
        if not isinstance(item, dict):
            problems.append(dialect_problem(where, "a context rule must be an object"))
            continue
        condition = item.get("condition", [])
        conditions = condition if isinstance(condition, list) else [condition]
        rule = {
            "id": rule_id(item.get("name"), stem, index, len(items)),
            "when": [normalise_condition(c) for c in conditions],
            "then": normalise_actions(item.get("action"), where, problems),
        }
        if isinstance(item.get("name"), str):
            rule["name"] = item["name"]
        if "description" in item:
            rule["description"] = item["description"]
        rules.append(NormalisedRule(rule, where, f"{where}/condition", isinstance(condition, list)))
    return rules, problems
