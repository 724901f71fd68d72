"""Hover (LSP shape): operators, variable keys, memory ids, step types, sections, priorities,
and an ingestion pipeline's triggers and processors,
documented from the registries and the workspace."""

from __future__ import annotations

from typing import Any

from ..registry.ingestion import lookup_processor, lookup_trigger
from ..registry.operators import lookup_operator
from ..registry.sections import PRIORITIES, SECTIONS
from ..registry.steps import lookup_step
from ..workspace.loader import Workspace
from ..workspace.variables import possible_variables
from . import context as ctx
from . import tests
from .docs import (
    memory_markdown,
    operator_markdown,
    priority_markdown,
    processor_markdown,
    section_markdown,
    step_markdown,
    trigger_markdown,
    variable_markdown,
)
from .documents import EditorDocument
from .settings import setting_hover


def _value_span(document: EditorDocument, tokens: tuple[str, ...]) -> tuple[int, int] | None:
    return document.parsed.span(list(tokens), "value") if document.parsed.value is not None else None


def _token_text(document: EditorDocument, cursor: ctx.Cursor) -> str:
    """The whole string or word under the cursor (works on documents that do not parse)."""
    return document.text[cursor.start:cursor.end]


def _test_hover(document: EditorDocument, cursor: ctx.Cursor, word: str, workspace: Workspace) -> str | None:
    """Rule-test files: their keys (from the rule-test schema), rule references, memory ids, sections."""
    if cursor.part == "key":
        return tests.key_description(cursor.tokens)
    where = tests.place(cursor.tokens)
    if where == "rule":
        return tests.rule_markdown(word, workspace)
    if where == "memory" and word in workspace.memories:
        source = workspace.memory_sources.get(word)
        return memory_markdown(word, workspace.memories[word], source.relpath if source else None)
    if where == "section":
        section = next((s for s in SECTIONS if s.name == word), None)
        return section_markdown(section) if section else None
    return None


def hover(document: EditorDocument, offset: int, workspace: Workspace, encoding: str = "utf-16") \
        -> dict[str, Any] | None:
    cursor = ctx.cursor_at(document, offset)
    word = _token_text(document, cursor)
    markdown = None
    if document.kind == "settings":
        markdown = setting_hover(cursor.tokens, cursor.part, word)
    elif document.kind == "rule-test":
        markdown = _test_hover(document, cursor, word, workspace)
    if markdown is not None or document.kind == "settings":
        pass
    elif cursor.part == "key" and ctx.is_section(cursor):
        section = next((s for s in SECTIONS if s.name == cursor.last), None)
        markdown = section_markdown(section) if section else None
    elif cursor.part == "value":
        if ctx.is_operator(cursor):
            op = lookup_operator(word)
            markdown = operator_markdown(op) if op else None
        elif ctx.is_field(cursor):
            variables = {v.key: v for v in possible_variables(workspace)}
            markdown = variable_markdown(word, variables.get(word), workspace) if word else None
        elif ctx.is_step_type(cursor):
            step = lookup_step(word)
            markdown = step_markdown(step) if step else None
        elif ctx.is_trigger(document, cursor):
            trigger = lookup_trigger(word)
            markdown = trigger_markdown(trigger) if trigger else None
        elif ctx.is_processor_type(document, cursor):
            processor = lookup_processor(word)
            markdown = processor_markdown(processor) if processor else None
        elif ctx.is_priority(cursor):
            priority = next((p for p in PRIORITIES if p.name == word), None)
            markdown = priority_markdown(priority) if priority else None
        elif ctx.is_reference(cursor) or cursor.tokens == ("id",) and document.kind == "persistent-memory":
            memory = workspace.memories.get(word)
            if memory is not None:
                source = workspace.memory_sources.get(word)
                markdown = memory_markdown(word, memory, source.relpath if source else None)
            elif cursor.last == "target":
                section = next((s for s in SECTIONS if s.name == word), None)
                markdown = section_markdown(section) if section else None
        elif cursor.last == "section":
            section = next((s for s in SECTIONS if s.name == word), None)
            markdown = section_markdown(section) if section else None
    if markdown is None:
        return None
    return {"contents": {"kind": "markdown", "value": markdown},
            "range": document.range(cursor.start, cursor.end, encoding)}
