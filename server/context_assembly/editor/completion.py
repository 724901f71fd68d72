"""Completion items (LSP shape) for definition files, from the registries and the workspace:
`field` values level by level, operators with their docs, memory ids with descriptions, sections,
priorities, step types, ingestion triggers, processors and destinations, object keys not yet
present, and snippets for a new rule, condition or step (when the client takes snippets). Replace
ranges cover the partly typed string or word, also when the document does not parse."""

from __future__ import annotations

import json
from typing import Any

from ..pipelines.shorthand import SHORTHAND_KEYS
from ..registry.ingestion import (
    COMMON_PROCESSOR_PARAMS,
    DESTINATION_SCHEMES,
    PIPELINE_STATUSES,
    PROCESSORS,
    ROUTE_FIELDS,
    TRIGGERS,
    lookup_processor,
)
from ..registry.operators import OPERATORS
from ..registry.sections import PRIORITIES, SECTIONS
from ..registry.steps import COMMON_PARAMS, lookup_step, step_types
from ..registry.variables import FIELD_ALIASES, SCOPES, documented_keys
from ..rules.checks import WELL_KNOWN_ADDVARS
from ..schemas.validate import built_schema
from ..workspace.lint import declared_variables
from ..workspace.loader import Workspace
from ..workspace.variables import possible_variables
from . import context as ctx
from . import settings as settings_file
from . import tests
from .docs import (
    memory_markdown,
    operator_markdown,
    processor_markdown,
    step_markdown,
    trigger_markdown,
    variable_markdown,
)
from .documents import EditorDocument

# CompletionItemKind
PROPERTY, VALUE, ENUM, MODULE, REFERENCE, OPERATOR, SNIPPET, FIELD, EVENT = 10, 12, 20, 9, 18, 24, 15, 5, 23
RETRIGGER = {"title": "Suggest", "command": "editor.action.triggerSuggest"}

Keys = list[tuple[str, str | None]]  # (key, its description's first line)


def schema_keys(schema: str, *path: str, skip: tuple[str, ...] = ()) -> Keys:
    """The keys of an object in a built schema (`path` walks `$defs` / `properties` names), with
    their descriptions: the schemas are built from the registries, so completion offers what they accept."""
    node: dict[str, Any] = built_schema(schema)
    for step in path:
        node = node["$defs"][step] if step in node.get("$defs", {}) else node["properties"][step]
    return [(key, str(value["description"]).split("\n")[0] if value.get("description") else None)
            for key, value in node.get("properties", {}).items() if key not in skip]


def condition_keys(schema: str) -> Keys:
    return [*schema_keys(schema, "field_condition"), *(key for group in ("any_condition", "all_condition",
                                                                          "not_condition")
                                                       for key in schema_keys(schema, group))]

SNIPPETS = {
    "rule": ('{\n\t"id": "${1:rule-id}",\n\t"priority": ${2:10},\n\t"when": [\n\t\t{ "field": "${3:addVar.phase}", '
             '"operator": "${4:eq}", "value": "${5:planning}" }\n\t],\n\t"then": { "add_memories": ["$6"] }\n}'),
    "condition": '{ "field": "${1:input.text}", "operator": "${2:contains}", "value": "${3}" }',
    "seed004-rule": ('{\n\t"name": "${1:rule-name}",\n\t"condition": { "field": "${2:task.text}", '
                     '"op": "${3:contains}", "value": "${4}" },\n\t"action": { "include": "${5}" }\n}'),
    "seed004-condition": '{ "field": "${1:task.text}", "op": "${2:contains}", "value": "${3}" }',
    "step": '{ "type": "${1:vector_search}", "collection": "${2:docs}", "topK": ${3:5} }',
}


def snippet_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


class Completer:
    def __init__(self, document: EditorDocument, workspace: Workspace, encoding: str, snippets: bool) -> None:
        self.document = document
        self.workspace = workspace
        self.encoding = encoding
        self.snippets = snippets

    def item(self, cursor: ctx.Cursor, label: str, kind: int, detail: str | None = None,
             documentation: str | None = None, text: str | None = None, retrigger: bool = False,
             sort: str | None = None) -> dict[str, Any]:
        new_text = label if text is None else text
        snippet = False
        if not cursor.in_string and self.document.kind_format == "json":
            new_text = json.dumps(new_text)
            if retrigger and self.snippets:  # the cursor stays inside the string the next suggestion completes
                new_text, snippet = snippet_escape(new_text[:-1]) + '$0"', True
        elif not cursor.in_string and self.document.text[cursor.start - 1:cursor.start] == ":":
            new_text = " " + new_text  # YAML: `section:` + `state` would be one scalar, "section:state"
        item: dict[str, Any] = {
            "label": label, "kind": kind, "filterText": label,
            "textEdit": {"range": self.document.range(cursor.start, cursor.end, self.encoding), "newText": new_text},
        }
        if snippet:
            item["insertTextFormat"] = 2
        if detail:
            item["detail"] = detail
        if documentation:
            item["documentation"] = {"kind": "markdown", "value": documentation}
        if retrigger:
            item["command"] = RETRIGGER
        if sort is not None:
            item["sortText"] = sort
        return item

    # -- values ---------------------------------------------------------------------------------

    def fields(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        variables = {v.key: v for v in possible_variables(self.workspace)}
        keys = set(documented_keys()) | set(variables) | declared_variables(self.workspace)
        keys |= {f"addVar.{name}" for name in WELL_KNOWN_ADDVARS}
        if self.document.dialect == "seed-004":
            keys |= set(FIELD_ALIASES)
        keys.discard("memory.source")
        typed = cursor.typed
        base = typed[: typed.rfind(".") + 1] if "." in typed else ""
        items: dict[str, dict[str, Any]] = {}
        groups: dict[str, int] = {}
        for key in keys:
            if key.startswith(base) and "." in key[len(base):]:
                group = key[len(base):].split(".", 1)[0]
                groups[group] = groups.get(group, 0) + 1
        for key in sorted(keys):
            if not key.startswith(base):
                continue
            rest = key[len(base):]
            if "." in rest and groups[rest.split(".", 1)[0]] > 1:
                label = base + rest.split(".", 1)[0] + "."
                if label not in items:
                    scope = next((s for s in SCOPES if label == f"scope.{s.name}."), None)
                    items[label] = self.item(cursor, label, MODULE, scope.description if scope else None,
                                             retrigger=True)
            else:
                items[key] = self.item(cursor, key, FIELD, "variable",
                                       variable_markdown(key, variables.get(key), self.workspace))
        return list(items.values())

    def operators(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        items = []
        for i, op in enumerate(OPERATORS):
            spellings = (op.name, *op.aliases) if self.document.dialect == "seed-004" else (op.name,)
            for spelling in spellings:
                items.append(self.item(cursor, spelling, OPERATOR, f"value: {op.value_kind.label}",
                                       operator_markdown(op), sort=f"{i:03d}{spelling}"))
        return items

    def references(self, cursor: ctx.Cursor, sections: bool = False) -> list[dict[str, Any]]:
        items = []
        for memory_id, memory in sorted(self.workspace.memories.items()):
            source = self.workspace.memory_sources.get(memory_id)
            items.append(self.item(cursor, memory_id, REFERENCE, memory.label or memory.description,
                                   memory_markdown(memory_id, memory, source.relpath if source else None)))
        if sections:
            items += self.sections(cursor)
        return items

    def sections(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        return [self.item(cursor, s.name, ENUM, "section", s.description, sort=f"{i:02d}")
                for i, s in enumerate(SECTIONS)]

    def priorities(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        return [self.item(cursor, p.name, ENUM, "priority", p.description, sort=f"{i:02d}")
                for i, p in enumerate(PRIORITIES)]

    def steps(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        return [self.item(cursor, s.name, VALUE, f"{s.group} step", step_markdown(s)) for s in step_types()]

    def triggers(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        return [self.item(cursor, t.name, EVENT, "trigger", trigger_markdown(t), sort=f"{i:02d}")
                for i, t in enumerate(TRIGGERS)]

    def processors(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        return [self.item(cursor, p.name, VALUE, "processor", processor_markdown(p), sort=f"{i:02d}")
                for i, p in enumerate(PROCESSORS)]

    def setting_values(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        """Strategy names in `budget.ladder` (those not listed yet first), else the schema's enum."""
        tokens = cursor.tokens
        if settings_file.is_strategy(tokens):
            listed = self.document.parsed.value
            ladder = listed.get("budget", {}).get("ladder") if isinstance(listed, dict) \
                and isinstance(listed.get("budget"), dict) else None
            present = set(ladder) if isinstance(ladder, list) and all(isinstance(n, str) for n in ladder) else set()
            return [self.item(cursor, name, ENUM, "budget ladder strategy", markdown,
                              sort=f"{int(name in present and name != cursor.typed)}{i:02d}")
                    for i, (name, markdown) in enumerate(settings_file.strategies())]
        return [self.item(cursor, value, ENUM, ".".join(tokens), sort=f"{i:02d}")
                for i, value in enumerate(settings_file.enum_values(tokens))]

    def pipeline_values(self, cursor: ctx.Cursor) -> list[dict[str, Any]] | None:
        """Statuses and destination schemes in an ingestion pipeline (None: not such a place)."""
        tokens = cursor.tokens
        if tokens == ("status",):
            return [self.item(cursor, s, ENUM, "status") for s in PIPELINE_STATUSES]
        if len(tokens) == 3 and tokens[0] == "routing" and tokens[2] == "write_to":
            return [self.item(cursor, f"{s}://", MODULE, "store", retrigger=True) for s in DESTINATION_SCHEMES]
        return None

    def test_values(self, cursor: ctx.Cursor) -> list[dict[str, Any]] | None:
        """Rule references, memory ids and sections in a rule-test file (None: not such a place)."""
        where = tests.place(cursor.tokens)
        if where == "rule":
            return [self.item(cursor, ref, REFERENCE, name or "rule", tests.rule_markdown(ref, self.workspace),
                            sort=f"{i:05d}") for i, (ref, name) in enumerate(tests.rule_choices(self.workspace))]
        if where == "memory":
            return self.references(cursor)
        if where == "section":
            return self.sections(cursor)
        return None

    # -- keys -----------------------------------------------------------------------------------

    def key_choices(self, container: tuple[str, ...]) -> list[tuple[str, str | None]]:
        kind, dialect = self.document.kind, self.document.dialect
        n = len(container)
        last = container[-1] if container else ""
        parent = container[-2] if n >= 2 else ""
        plain: list[tuple[str, str | None]] = []
        if kind == "settings":
            return settings_file.setting_keys(container)
        if kind == "rule-engine":
            if n == 0:
                return schema_keys(kind)
            if n == 2 and container[0] == "rules":
                return schema_keys(kind, "rule")
            if last == "then":
                return schema_keys(kind, "then")
            if parent in ("when", "any", "all") or last == "not":
                return condition_keys(kind)
        elif kind == "context-rules":
            if dialect == "seed-003":
                if last in ("then", "when"):
                    return schema_keys(kind, "rule_003", last)
                if n <= 1 or (n == 2 and container[0] == "rules"):
                    return schema_keys(kind, "rule_003")
            else:
                if last == "action":
                    return schema_keys(kind, "action")
                if last == "condition" or parent == "condition":
                    return schema_keys(kind, "field_condition")
                if n <= 1 or (n == 2 and container[0] == "rules"):
                    return schema_keys(kind, "rule_004")
        elif kind == "ingestion-pipeline":
            return self.pipeline_keys(container)
        elif kind == "rule-test":
            return tests.key_choices(container)
        elif kind == "persistent-memory":
            if n == 0:
                return schema_keys(kind, skip=SHORTHAND_KEYS)
            if last == "contribution":
                return schema_keys(kind, "contribution")
            if n >= 2 and parent in ctx.STEP_LISTS and last.isdigit():
                step = self.step_object(container)
                spec = lookup_step(step.get("type", step.get("step")) if step else None)
                if spec is None:
                    return [("type", "the step type")]
                return [(p.name, p.description) for p in (*spec.params, *COMMON_PARAMS)]
            if parent in ("where",) or last == "not":
                return condition_keys(kind)
        return plain

    def pipeline_keys(self, container: tuple[str, ...]) -> list[tuple[str, str | None]]:
        n, last = len(container), (container[-1] if container else "")
        if n == 0:
            return schema_keys("ingestion-pipeline")
        if n == 1 and last == "trigger_config":
            return schema_keys("ingestion-pipeline", "trigger_config")
        if n == 2 and container[0] == "processors" and last.isdigit():
            processor = ctx.object_at(self.document, container)
            spec = lookup_processor(processor.get("type", "") if processor else "")
            params = (*COMMON_PROCESSOR_PARAMS, *(spec.params if spec else ()))
            return [("type", "The processor type."), *((p.name, p.description) for p in params)]
        if n == 2 and container[0] == "routing" and last.isdigit():
            return [(p.name, p.description) for p in ROUTE_FIELDS]
        if "where" in container or "condition" in container:
            return condition_keys("ingestion-pipeline")
        return []

    def step_object(self, container: tuple[str, ...]) -> dict[str, Any] | None:
        found = ctx.object_at(self.document, container)
        if found is not None:
            return found
        # a document that does not parse: read the step's `type` from the text around the cursor
        return None

    def keys(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        container = cursor.container
        present = self.document.parsed.keys_at(container) or set()
        items = []
        yaml = self.document.kind_format == "yaml"
        for i, (key, description) in enumerate(self.key_choices(container)):
            # the key being typed or edited is offered (in YAML it already counts as present)
            if key in present and not (key == cursor.last and (cursor.in_string or yaml)):
                continue
            text = key
            if not cursor.in_string and self.document.kind_format == "json":
                text = f'{json.dumps(key)}: '
                item = self.item(cursor, key, PROPERTY, description, sort=f"{i:02d}")
                item["textEdit"]["newText"] = text
            else:
                item = self.item(cursor, key, PROPERTY, description, sort=f"{i:02d}")
            items.append(item)
        return items

    def snippet_items(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        """A new rule / condition / step where an array element starts (outside any string)."""
        if not self.snippets or cursor.in_string or self.document.kind_format != "json" or cursor.part != "value":
            return []
        tokens = cursor.tokens
        owner = tokens[-2] if len(tokens) >= 2 and tokens[-1].isdigit() else (tokens[-1] if tokens else "")
        seed004 = self.document.dialect == "seed-004" and self.document.kind == "context-rules"
        name = None
        if owner == "rules" or (seed004 and len(tokens) <= 1):
            name = "seed004-rule" if seed004 else "rule"
        elif owner in ("when", "any", "all", "condition", "where"):
            name = "seed004-condition" if seed004 else "condition"
        elif owner in ctx.STEP_LISTS:
            name = "step"
        if name is None:
            return []
        label = {"seed004-rule": "new rule", "seed004-condition": "new condition"}.get(name, f"new {name}")
        return [{"label": label, "kind": SNIPPET, "insertTextFormat": 2, "detail": "snippet",
                 "textEdit": {"range": self.document.range(cursor.start, cursor.end, self.encoding),
                              "newText": SNIPPETS[name]}}]

    def complete(self, offset: int) -> list[dict[str, Any]]:
        cursor = ctx.cursor_at(self.document, offset)
        if cursor.after_string or cursor.in_comment:
            return []
        items = self.complete_at(cursor)
        if not items:  # a YAML word alone on its line, read as a value: the first key of a mapping?
            as_key = ctx.key_reading(self.document, cursor)
            if as_key is not None:
                return self.complete_at(as_key)
        return items

    def complete_at(self, cursor: ctx.Cursor) -> list[dict[str, Any]]:
        if cursor.part == "key":
            if ctx.is_section(cursor):
                return self.sections(cursor)
            return self.keys(cursor)
        if self.document.kind == "settings":
            return self.setting_values(cursor)
        if self.document.kind == "rule-test" and cursor.part == "value":
            found = self.test_values(cursor)
            if found is not None:
                return found
        if ctx.is_field(cursor):
            return self.fields(cursor)
        if ctx.is_operator(cursor):
            return self.operators(cursor)
        if ctx.is_step_type(cursor):
            return self.steps(cursor)
        if ctx.is_trigger(self.document, cursor):
            return self.triggers(cursor)
        if ctx.is_processor_type(self.document, cursor):
            return self.processors(cursor)
        if self.document.kind == "ingestion-pipeline" and cursor.part == "value":
            values = self.pipeline_values(cursor)
            if values is not None:
                return values
        if ctx.is_priority(cursor):
            return self.priorities(cursor)
        if cursor.last == "section":
            return self.sections(cursor)
        if ctx.is_reference(cursor):
            return self.references(cursor, sections=cursor.last == "target")
        return self.snippet_items(cursor)


def complete(document: EditorDocument, offset: int, workspace: Workspace, encoding: str = "utf-16",
             snippets: bool = True) -> list[dict[str, Any]]:
    return Completer(document, workspace, encoding, snippets).complete(offset)
