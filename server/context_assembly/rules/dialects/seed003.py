"""The seed-003 YAML rule sketch -> canonical rules.

```yaml
when:
  task_contains: ["auth", "login"]     # any of the words, case-insensitive, in input.text
then:
  always_include: [{path: docs/security.md}]   # path means file://<path>
  boost: [{kg_entity: AuthService, weight: 2.0}]
  exclude: [{path: "generated/**"}]
```
A file holds one such rule, a list of them, or `{rules: [...]}`.
"""

from __future__ import annotations

from typing import Any

from ...registry.variables import INPUT_TEXT
from .common import NormalisedRule, as_list, dialect_problem, rule_id, unreadable

DIALECT = "seed-003"
KG_ENTITY_PREFIX = "kg_entity:"


def _reference(item: Any) -> str | None:
    """`{path}` -> file://path; `{memory}` / `{uri}` as they are; a bare string as it is."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        if isinstance(item.get("path"), str):
            return "file://" + item["path"]
        for key in ("memory", "uri"):
            if isinstance(item.get(key), str):
                return item[key]
    return None


def _boost(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    entity = item.get("kg_entity")
    target = KG_ENTITY_PREFIX + entity if isinstance(entity, str) else _reference(item)
    if target is None:
        return None
    return {"target": target, "weight": item.get("weight", 1.0)}


def _conditions(when: Any, where: str, problems: list) -> list[dict[str, Any]]:
    if when is None:
        return []
    if not isinstance(when, dict):
        problems.append(dialect_problem(f"{where}/when", "'when' must be a mapping"))
        return [unreadable(when, "'when' must be a mapping")]
    conditions: list[dict[str, Any]] = []
    for key, value in when.items():
        if key == "task_contains":
            conditions.append({"any": [{"field": INPUT_TEXT, "operator": "contains", "value": w}
                                       for w in _words(value, f"{where}/when/{key}", problems)]})
        else:
            reason = f"unknown condition '{key}' (seed-003 rules understand task_contains)"
            problems.append(dialect_problem(f"{where}/when/{key}", reason))
            conditions.append(unreadable(key, reason))
    return conditions


def _words(value: Any, where: str, problems: list) -> list[str]:
    """The words of `task_contains`. Anything YAML read as another type is reported (quote it),
    since its text is lost: an integer is still matched as its decimal (`404`, most likely what was
    written; `010` and `1_000` read as 8 and 1000), a float, boolean or null is not (`3.10` reads as
    3.1; `yes`, `on` as true) and was dropped without a word before."""
    words = []
    for index, word in enumerate(as_list(value)):
        if isinstance(word, str):
            words.append(word)
            continue
        kept = isinstance(word, int) and not isinstance(word, bool)
        if kept:
            words.append(str(word))
        problems.append(dialect_problem(
            f"{where}/{index}" if isinstance(value, list) else where,
            f"{word!r} is no word: YAML reads it as a {type(word).__name__}, so write it in quotes "
            + (f"(matched as \"{word}\" meanwhile)" if kept else "(not matched: its text is lost)")))
    return words


def _actions(then: Any, where: str, problems: list) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(then, dict):
        problems.append(dialect_problem(f"{where}/then", "'then' must be a mapping"))
        return out
    for key, target, convert in (("always_include", "add_memories", _reference),
                                 ("exclude", "exclude_memories", _reference), ("boost", "boost", _boost)):
        if key not in then:
            continue
        items = [convert(item) for item in as_list(then[key])]
        for i, item in enumerate(items):
            if item is None:
                problems.append(dialect_problem(f"{where}/then/{key}/{i}", f"cannot read this '{key}' entry"))
        out[target] = [item for item in items if item is not None]
    for key in then:
        if key not in ("always_include", "exclude", "boost"):
            problems.append(dialect_problem(f"{where}/then/{key}", f"unknown action '{key}'"))
    return out


def normalise(document: Any, stem: str) -> tuple[list[NormalisedRule], list]:
    problems: list = []
    if isinstance(document, dict) and isinstance(document.get("rules"), list):
        items, base = document["rules"], "/rules"
    elif isinstance(document, list):
        items, base = document, ""
    else:
        items, base = [document], None
    rules: list[NormalisedRule] = []
    for index, item in enumerate(items):
        where = "" if base is None else f"{base}/{index}"
        if not isinstance(item, dict):
            problems.append(dialect_problem(where, "a rule must be a mapping with 'when' and 'then'"))
            continue
        rule: dict[str, Any] = {
            "id": rule_id(item.get("name", item.get("id")), stem, index, len(items)),
            "when": _conditions(item.get("when"), where, problems),
            "then": _actions(item.get("then", {}), where, problems),
        }
        if isinstance(item.get("name"), str):
            rule["name"] = item["name"]
        rules.append(NormalisedRule(rule, where, f"{where}/when", False))
    return rules, problems
