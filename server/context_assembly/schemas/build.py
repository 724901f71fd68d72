"""The published schemas by name, built from the registries, and their files in `schemas/`."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

from . import memory, rules, tests, wire
from .fragments import Schema, schema_id
from .sources import Sources

Builder = Callable[[Sources], Schema]

_BUILDERS: dict[str, Builder] = {
    "rule-engine": rules.rule_engine,
    "context-rules": rules.context_rules,
    "persistent-memory": memory.persistent_memory,
    "ingestion-pipeline": memory.ingestion_pipeline,
    "graph-view": memory.graph_view,
    "assembly-request": wire.assembly_request,
    "assembled-context": wire.assembled_context,
    "settings": wire.settings,
    "rule-test": tests.rule_test,
}

SCHEMA_NAMES: tuple[str, ...] = tuple(_BUILDERS)

__all__ = ["SCHEMA_NAMES", "all_schemas", "build_schema", "check_files", "file_name", "render",
           "schema_id", "write_files"]


def build_schema(name: str, sources: Sources | None = None) -> Schema:
    """A fresh copy of the schema `name` (callers may change it freely)."""
    try:
        builder = _BUILDERS[name]
    except KeyError:
        raise KeyError(f"unknown schema {name!r} (schemas: {', '.join(SCHEMA_NAMES)})") from None
    # Builders share registry fragments (TEMPLATE, STRING, ...): copy so no caller can alter them.
    return copy.deepcopy(builder(sources or Sources.current()))


def all_schemas(sources: Sources | None = None) -> dict[str, Schema]:
    src = sources or Sources.current()
    return {name: build_schema(name, src) for name in SCHEMA_NAMES}


def file_name(name: str) -> str:
    return f"{name}.schema.json"


def render(schema: Schema) -> str:
    """The file text: stable key order (as built), two-space indent, a final newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write_files(directory: Path, sources: Sources | None = None) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in all_schemas(sources).items():
        path = directory / file_name(name)
        text = render(schema)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def check_files(directory: Path, sources: Sources | None = None) -> list[str]:
    """Why the files in `directory` are not what the registries generate ([] = up to date)."""
    problems = []
    expected = {file_name(name): render(schema) for name, schema in all_schemas(sources).items()}
    for fname, text in expected.items():
        path = directory / fname
        if not path.exists():
            problems.append(f"missing: {path}")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"differs: {path}")
    for path in sorted(directory.glob("*.schema.json")):
        if path.name not in expected:
            problems.append(f"not generated (stale?): {path}")
    return problems
