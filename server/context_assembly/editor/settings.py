"""The settings file (`.codebolt/context-assembly.json`) in the editor: its keys and enum values
come from the built settings schema, the ladder's strategy names and their documentation from
registry/ladder.py, so completion and hover offer exactly what the settings accept."""

from __future__ import annotations

from typing import Any

from ..registry.ladder import LADDER, lookup_strategy
from ..schemas.validate import built_schema
from .docs import strategy_markdown

SCHEMA = "settings"
LADDER_POINTER = ("budget", "ladder")


def schema_node(tokens: tuple[str, ...]) -> dict[str, Any] | None:
    """The settings schema of the value at `tokens` (array items by index), None off the schema."""
    node: dict[str, Any] = built_schema(SCHEMA)
    for token in tokens:
        if token.isdigit() and isinstance(node.get("items"), dict):
            node = node["items"]
        elif token in node.get("properties", {}):
            node = node["properties"][token]
        elif isinstance(node.get("additionalProperties"), dict):  # a map's entry (an access grant)
            node = node["additionalProperties"]
        else:
            return None
    return node


def setting_keys(container: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """The keys of the settings object at `container`, with their descriptions' first lines."""
    node = schema_node(container)
    properties: dict[str, Any] = node.get("properties", {}) if node else {}
    return [(key, str(value["description"]).split("\n")[0] if value.get("description") else None)
            for key, value in properties.items()]


def is_strategy(tokens: tuple[str, ...]) -> bool:
    """A value in `budget.ladder` (or the array itself, before its first item is typed)."""
    return tokens[:2] == LADDER_POINTER and (len(tokens) == 2 or len(tokens) == 3 and tokens[2].isdigit())


def strategies() -> list[tuple[str, str]]:
    """(name, markdown) of each strategy, in the default order."""
    return [(s.name, strategy_markdown(s)) for s in LADDER]


def enum_values(tokens: tuple[str, ...]) -> list[str]:
    """The values the settings schema enumerates at `tokens` (`tokenizer`, `stores.backend`, ...)."""
    node = schema_node(tokens)
    values = node.get("enum", []) if node else []
    return [v for v in values if isinstance(v, str)]


def setting_hover(tokens: tuple[str, ...], part: str, word: str) -> str | None:
    """Markdown for a settings key (its schema description) or a strategy name (the registry's)."""
    if part == "value" and is_strategy(tokens):
        strategy = lookup_strategy(word)
        return strategy_markdown(strategy) if strategy else None
    if part != "key":
        return None
    node = schema_node(tokens)
    if node is None or not node.get("description"):
        return None
    dotted = ".".join(tokens)
    default = node.get("default")
    lines = [f"**{dotted}** (setting)", "", str(node["description"])]
    if "default" in node and not isinstance(default, (dict, list)):
        lines += ["", f"Default: `{'null' if default is None else default}`"]
    return "\n".join(lines)
