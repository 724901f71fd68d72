"""Context-rule files (`.codebolt/ContextRuleEngine/`) in the seed-004 and seed-003 dialects.

Files are loaded in file-name order, concatenated, and normalised into one canonical engine with
id `context-rules`, keeping definition order as evaluation order (SPEC §4.5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import seed003, seed004
from .common import NormalisedRule

CONTEXT_RULES_ID = "context-rules"

Normaliser = Callable[[Any, str], tuple[list[NormalisedRule], list]]


def detect_dialect(document: Any, suffix: str) -> str:
    """seed-004 (`condition`/`action`) or seed-003 (`when`/`then`); the suffix breaks ties."""
    items = document.get("rules", [document]) if isinstance(document, dict) else document
    items = items if isinstance(items, list) else [items]
    for item in items:
        if isinstance(item, dict):
            if "condition" in item or "action" in item:
                return seed004.DIALECT
            if "when" in item or "then" in item:
                return seed003.DIALECT
    return seed003.DIALECT if suffix in (".yaml", ".yml") else seed004.DIALECT


NORMALISERS: dict[str, Normaliser] = {seed004.DIALECT: seed004.normalise, seed003.DIALECT: seed003.normalise}


def normalise_file(document: Any, stem: str, suffix: str) -> tuple[str, list[NormalisedRule], list]:
    dialect = detect_dialect(document, suffix)
    rules, problems = NORMALISERS[dialect](document, stem)
    return dialect, rules, problems


def context_rules_engine(rules: list[dict[str, Any]]) -> dict[str, Any]:
    """The canonical engine all context-rule files normalise into."""
    return {
        "id": CONTEXT_RULES_ID,
        "name": "Context rules",
        "description": "Rules from .codebolt/ContextRuleEngine/, in file-name order.",
        "enabled": True,
        "rules": rules,
    }
