"""The condition language (SPEC §4.2, §4.6) as JSON Schema, built from the operator registry.

A condition is a field condition or an `any`/`all`/`not` group, nested to any depth. Groups are
told apart with `if`/`then`/`else` on their key rather than `anyOf`, so a mistake deep inside a
nested condition is reported at its own JSON pointer instead of as "no branch matched" at the top.
The operator decides the type of `value` through one `if`/`then` per operator (aliases included).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..registry.operators import Operator, ValueKind
from ..registry.values import _NUMERIC_STRING  # the one definition of a "numeric string"
from ..registry.variables import ADDVAR_PREFIX, INPUT_TEXT, MEMORY_SOURCE, SCOPE_PREFIX
from .fragments import Schema, boolean, ref
from .sources import Sources

# The identifier forms registry.variables accepts (field_problem) for additional variables and
# for scope fields; tests check the pattern built here agrees with field_problem.
ADDVAR_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
SCOPE_FIELD = r"[A-Za-z_][A-Za-z0-9_]*"
NUMERIC_STRING = f"^{_NUMERIC_STRING.pattern}$"

GROUP_KEYS = ("any", "all", "not")


def variable_key_pattern(src: Sources) -> str:
    scopes = "|".join(re.escape(name) for name in src.scope_names)
    fixed = "|".join(re.escape(key) for key in (INPUT_TEXT, MEMORY_SOURCE, *src.field_aliases))
    return (f"^(?:{re.escape(SCOPE_PREFIX)}(?:{scopes})\\.{SCOPE_FIELD}"
            f"|{re.escape(ADDVAR_PREFIX)}{ADDVAR_NAME}|{fixed})$")


def variable_key(src: Sources) -> Schema:
    """`field` in rules: a documented key, addVar.<name>, scope.<scope>.<field>, or a seed-004 name."""
    aliases = ", ".join(f"`{a}` (= `{k}`)" for a, k in src.field_aliases.items())
    return {
        "title": "Variable key",
        "type": "string",
        "pattern": variable_key_pattern(src),
        "description": (
            f"The variable the condition reads: `scope.<scope>.<field>` (scopes: "
            f"{', '.join(src.scope_names)}), `addVar.<name>`, `input.text`, or `memory.source` "
            f"(per-source rules). Seed-004 names are aliases: {aliases}."
        ),
        "examples": [*src.documented_keys, "addVar.phase", "addVar.query", MEMORY_SOURCE,
                     *src.field_aliases],
    }


ITEM_FIELD: Schema = {
    "title": "Field",
    "type": "string",
    "minLength": 1,
    "description": "An item field (`score`, `content`, `metadata.<key>`) or a variable key "
    "(`addVar.<name>`, `scope.<scope>.<field>`, `input.text`).",
}


def operator_schema(src: Sources) -> Schema:
    lines = []
    for op in src.operators:
        spelled = f"`{op.name}`" + "".join(f" / `{a}`" for a in op.aliases)
        lines.append(f"- {spelled} ({op.value_kind.label}): {op.description}")
    return {
        "title": "Operator",
        "enum": src.operator_spellings,
        "description": "How the field is compared with `value`. Aliases (seed 004) mean the same.\n"
        + "\n".join(lines),
    }


def value_schema(op: Operator) -> Schema:
    schema: Schema = {"description": f"`{op.name}` expects {op.value_kind.label}.", **op.value_kind.schema}
    if op.value_kind is ValueKind.NUMBER:
        schema["pattern"] = NUMERIC_STRING  # applies to strings only: "2" yes, "two" no
    return schema


def value_rules(src: Sources, op_key: str) -> Iterator[Schema]:
    """One `if operator is X then value must be ...` per operator that takes a value."""
    for op in src.operators:
        if op.value_kind is ValueKind.NONE:
            continue
        yield {
            "if": {"properties": {op_key: {"enum": [op.name, *op.aliases]}}, "required": [op_key]},
            "then": {"properties": {"value": value_schema(op)}, "required": ["value"]},
        }


def condition_defs(src: Sources, field: Schema, op_key: str = "operator") -> dict[str, Schema]:
    """`$defs` for conditions whose leaves read `field` and spell the operator `op_key`."""
    leaf: Schema = {
        "type": "object",
        "title": "Field condition",
        "description": f"Compares a field with a value: `{{field, {op_key}, value}}`.",
        "properties": {
            "field": field,
            op_key: operator_schema(src),
            "value": {"description": "The value to compare with; its type depends on the operator."},
            "ignore_case": boolean("Override case handling of the string operators and regex "
                                   "(contains and not_contains ignore case by default)."),
        },
        "required": ["field", op_key],
        "additionalProperties": False,
        "allOf": list(value_rules(src, op_key)),
    }
    return {
        "condition": {
            "title": "Condition",
            "description": "A field condition, or `{any: [...]}` (OR), `{all: [...]}` (AND), "
            "`{not: {...}}`, nested to any depth.",
            **_dispatch(),
        },
        "field_condition": leaf,
        "any_condition": _group("any", "Any (OR)", "True when at least one condition holds."),
        "all_condition": _group("all", "All (AND)", "True when every condition holds."),
        "not_condition": {
            "type": "object",
            "title": "Not",
            "description": "True when the inner condition does not hold.",
            "properties": {"not": ref("condition")},
            "required": ["not"],
            "additionalProperties": False,
        },
        "condition_list": {
            "title": "Conditions",
            "description": "Conditions that must all hold (AND).",
            "type": "array",
            "items": ref("condition"),
        },
        "conditions": {
            "title": "Condition or conditions",
            "description": "One condition, or an array of conditions that must all hold.",
            "if": {"type": "array"},
            "then": ref("condition_list"),
            "else": ref("condition"),
        },
    }


def _dispatch() -> Schema:
    """if it has `any` -> any_condition, else if `all` ..., else a field condition."""
    schema: Schema = ref("field_condition")
    for key in reversed(GROUP_KEYS):
        schema = {"if": {"type": "object", "required": [key]}, "then": ref(f"{key}_condition"),
                  "else": schema}
    return schema


def _group(key: str, title: str, description: str) -> Schema:
    return {
        "type": "object",
        "title": title,
        "description": description,
        "properties": {key: {"type": "array", "items": ref("condition"), "description": description}},
        "required": [key],
        "additionalProperties": False,
    }
