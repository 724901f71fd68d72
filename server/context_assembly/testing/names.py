"""The names a case's expectations give: a rule or memory id the workspace does not have is a
failure of its own, so a misspelt `rules_not_fired` or `memories_excluded` cannot pass by naming
nothing (store URIs are references, not ids: they are taken as written)."""

from __future__ import annotations

import difflib
from typing import Any

from ..workspace.loader import Workspace
from .expect import Failure

RULE_LISTS = ("rules_fired", "rules_not_fired")
MEMORY_LISTS = ("memories_included", "memories_excluded")
ITEM_LISTS = ("items_present", "items_absent")


def unknown_names(expect: dict[str, Any], workspace: Workspace, pointer: str) -> list[Failure]:
    rules = _rule_names(workspace)
    memories = set(workspace.memories)
    failures: list[Failure] = []

    def unknown(key: str, index: int, name: Any, known: set[str], what: str, suffix: str = "") -> None:
        guess = difflib.get_close_matches(str(name), sorted(known), n=1)
        hint = f" (did you mean '{guess[0]}'?)" if guess else ""
        failures.append(Failure(key, f"no {what} '{name}' in the workspace{hint}: this expectation checks nothing",
                                name, sorted(known)[:8], f"{pointer}/expect/{key}/{index}{suffix}"))

    for key in RULE_LISTS:
        for i, name in enumerate(expect.get(key, [])):
            if name not in rules:
                unknown(key, i, name, rules, "rule")
    for key in MEMORY_LISTS:
        for i, name in enumerate(expect.get(key, [])):
            if _is_id(name) and name not in memories:
                unknown(key, i, name, memories, "memory")
    for key in ITEM_LISTS:
        for i, spec in enumerate(expect.get(key, [])):
            name = spec.get("memory") if isinstance(spec, dict) else None
            if _is_id(name) and name not in memories:
                unknown(key, i, name, memories, "memory", "/memory")
    return failures


def _is_id(name: Any) -> bool:
    return isinstance(name, str) and "://" not in name


def _rule_names(workspace: Workspace) -> set[str]:
    """`engine/rule` and the bare `rule` of every rule, as expectations may name them."""
    names: set[str] = set()
    for engine_id, engine in workspace.engines.items():
        for rule in engine.rules:
            if isinstance(rule.id, str) and rule.id:
                names |= {f"{engine_id}/{rule.id}", rule.id}
    return names
