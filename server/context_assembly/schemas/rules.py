"""rule-engine (SPEC §4.1, canonical) and context-rules (§4.5, seed-004 and seed-003 dialects)."""

from __future__ import annotations

from .conditions import condition_defs, variable_key
from .fragments import (
    SCHEMA_KEY,
    Schema,
    boolean,
    described,
    document,
    enum,
    fields,
    file_id,
    integer,
    listing,
    obj,
    one_or_list,
    ref,
    string,
    strings,
)
from .sources import Sources

_REFERENCE = "A memory reference: a persistent-memory id or a store URI (kv://, markdown://, vector://, ...)"


def _sections(src: Sources, description: str) -> Schema:
    return enum(src.section_names,
                description + "\n" + listing((s.name, s.description) for s in src.sections),
                title="Section")


def _priorities(src: Sources, description: str) -> Schema:
    return enum(src.priority_names, description + "\n"
                + listing((p.name, f"weight {p.weight}. {p.description}") for p in src.priorities),
                title="Priority")


def _cap() -> Schema:
    return obj("Cap", "Limit what a memory id, URI pattern or section contributes; give max_tokens, "
               "max_items or both.", {
                   "target": described({"type": "string", "minLength": 1},
                                       "A memory id, a URI pattern (vector://**; * stays within one path "
                                       "segment) or a section name."),
                   "max_tokens": integer("The most tokens the target may contribute."),
                   "max_items": integer("The most items the target may contribute."),
               }, ["target"], anyOf=[{"required": ["max_tokens"]}, {"required": ["max_items"]}])


def _boost() -> Schema:
    return obj("Boost", "Multiply the score of what a target contributes.", {
        "target": described({"type": "string", "minLength": 1},
                            "A memory id, a URI pattern or a knowledge-graph entity."),
        "weight": described({"type": "number", "exclusiveMinimum": 0}, "The score multiplier (> 0)."),
    }, ["target", "weight"])


def _then(src: Sources) -> Schema:
    return obj("Actions", "What a matching rule does.", {
        "add_memories": strings("Memories to include: persistent-memory ids or store URIs.", unique=True),
        "exclude_memories": strings("Memories to suppress: ids, store URIs or glob patterns "
                                    "(vector://test-*). Explicit memories of the request are kept.",
                                    unique=True),
        "caps": described({"type": "array", "items": ref("cap")}, "Contribution caps."),
        "set_priority": obj(
            "Section priorities", "Change a section's effective priority.",
            {s.name: _priorities(src, f"The priority of the {s.name} section. {s.description}")
             for s in src.sections}),
        "boost": described({"type": "array", "items": ref("boost")}, "Score multipliers."),
    })


def _rule(src: Sources) -> Schema:
    return obj("Rule", "When every condition holds, the actions in `then` apply.", {
        "id": described({"type": "string", "minLength": 1}, "The rule's id, unique in the engine."),
        "name": string("A human-readable name."),
        "description": string("What the rule is for."),
        "priority": described({"type": "number"}, "Rules with a higher priority run first; ties keep "
                              "file order.", 0),
        "when": described({**ref("condition_list"), "default": []},
                          "Conditions that must all hold (AND); empty = always."),
        "then": ref("then"),
    }, ["id", "then"])


def rule_engine(src: Sources) -> Schema:
    defs = {
        "rule": _rule(src),
        "then": _then(src),
        "cap": _cap(),
        "boost": _boost(),
        **condition_defs(src, variable_key(src)),
    }
    body = fields({
        "$schema": SCHEMA_KEY,
        "id": file_id("rule engine"),
        "name": string("A human-readable name."),
        "description": string("What the engine is for."),
        "enabled": boolean("Disabled engines are not evaluated unless named in rule_engine_ids.", True),
        "rules": described({"type": "array", "items": ref("rule")}, "The rules, in file order."),
    }, ["id", "rules"])
    return document(
        "rule-engine", "Context rule engine",
        "A rule engine in .codebolt/context-rule-engines/{id}.json: rules whose conditions over the "
        "request's variables decide which memories an assembly includes.",
        {**body, "$defs": defs},
    )


# -- context-rules: the seed-004 JSON dialect (and the seed-003 YAML one) ---------------------------


def _references(description: str) -> Schema:
    return one_or_list(described({"type": "string", "minLength": 1}, _REFERENCE), "Memory references",
                       description)


def _action(src: Sources) -> Schema:
    cap = obj("Cap", "Limit the tokens a source (a URI or URI prefix) or a section contributes.", {
        "source": described({"type": "string", "minLength": 1}, "A memory reference or URI prefix (vector://)."),
        "section": _sections(src, "A context section."),
        "tokens": integer("The most tokens it may contribute."),
    }, ["tokens"], anyOf=[{"required": ["source"]}, {"required": ["section"]}])
    set_priority = obj("Set priority", "Move a section's effective priority.", {
        "section": _sections(src, "The section."),
        "value": _priorities(src, "Its new priority."),
    }, ["section", "value"])
    return obj("Action", "What the rule does when its condition holds.", {
        "include": _references("Add these memory references to the assembly."),
        "exclude": _references("Suppress these memory references."),
        "cap": cap,
        "setPriority": set_priority,
    }, minProperties=1)


def _rule_004(src: Sources) -> Schema:
    return obj("Context rule", "A condition -> action pair (seed 004). Rules run in file order; the "
               "first matching rule decides for a memory reference.", {
                   "$schema": SCHEMA_KEY,
                   "id": described({"type": "string", "minLength": 1},
                                   "Not read (SPEC §4.5 names seed-004 rules by `name`): the rule's id in the "
                                   "context-rules engine (rules_fired, traces, tests) is its `name` slugged, "
                                   "else the file name (plus -<n> when the file holds several). Write `name`."),
                   "name": string("The rule's name; slugged, its id in the context-rules engine."),
                   "description": string("What the rule is for."),
                   "condition": described(ref("conditions"),
                                          "A condition, or an array of conditions that must all hold."),
                   "action": ref("action"),
               }, ["action"])


def _target_003(title: str, keys: tuple[str, ...], weight: bool = False) -> Schema:
    props: dict[str, Schema] = {
        "path": string("A workspace path or glob; means file://<path>."),
        "memory": string(_REFERENCE + "."),
        "kg_entity": string("A knowledge-graph entity."),
    }
    props = {k: v for k, v in props.items() if k in keys}
    if weight:
        props["weight"] = described({"type": "number", "exclusiveMinimum": 0}, "The score multiplier.")
    return obj(title, f"One of: {', '.join(keys)}.", props,
               anyOf=[{"required": [k]} for k in keys])


def _rule_003() -> Schema:
    when = obj("When (seed 003)", "Conditions of a seed-003 rule.", {
        "task_contains": one_or_list(string("A word."), "Words",
                                     "True when input.text contains any of the words (case-insensitive)."),
    })
    then = obj("Then (seed 003)", "Actions of a seed-003 rule.", {
        "always_include": described({"type": "array", "items": _target_003("Include", ("path", "memory"))},
                                    "Include these files or memories."),
        "boost": described({"type": "array",
                            "items": _target_003("Boost", ("kg_entity", "memory", "path"), weight=True)},
                           "Score multipliers."),
        "exclude": described({"type": "array", "items": _target_003("Exclude", ("path", "memory"))},
                             "Suppress these files (globs) or memories."),
    })
    return obj("Context rule (seed 003)", "The YAML dialect: `when.task_contains` -> include, boost, "
               "exclude.", {
                   "$schema": SCHEMA_KEY,
                   "id": string("The rule's id in the context-rules engine (slugged) when it has no `name`; "
                                "with neither, the file name (plus -<n> when the file holds several)."),
                   "name": string("The rule's name; slugged, its id in the context-rules engine."),
                   "description": string("What the rule is for."),
                   "when": when,
                   "then": then,
               }, ["when", "then"])


def context_rules(src: Sources) -> Schema:
    defs = {
        "rule": {"title": "Context rule", "description": "A seed-004 rule (condition/action) or a "
                 "seed-003 rule (when/then).",
                 "if": {"type": "object", "required": ["when"]}, "then": ref("rule_003"),
                 "else": ref("rule_004")},
        "rule_004": _rule_004(src),
        "rule_003": _rule_003(),
        "rules_003": obj("Context rules (seed 003)", "A seed-003 file's rules under `rules` (only seed-003 "
                         "files take this form).", {
                             "$schema": SCHEMA_KEY,
                             "rules": described({"type": "array", "items": ref("rule_003")},
                                                "The rules, in file order."),
                         }, ["rules"]),
        "action": _action(src),
        **condition_defs(src, variable_key(src), op_key="op"),
    }
    # what rules/dialects reads: an array of rules, `{rules: [...]}` (seed 003) or one rule
    single = {"if": {"type": "object", "required": ["rules"]}, "then": ref("rules_003"), "else": ref("rule")}
    return document(
        "context-rules", "Context rules",
        "A file in .codebolt/ContextRuleEngine/: a rule, an array of rules or (seed 003) `rules:` and an "
        "array. Files load in name order and are normalised into the `context-rules` engine.",
        {"if": {"type": "array"}, "then": {"type": "array", "items": ref("rule")}, "else": single,
         "$defs": defs},
    )
