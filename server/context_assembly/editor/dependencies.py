"""What one definition file gives the rest of the workspace, and who can notice a change of it.

The meaning checks of a document read three things from other files (see `workspace/lint.py`):
the set of memory ids, the variables memories declare (`addVar.<name>`), and ids other files claim
(duplicate engine, memory and context-rule ids). `contributions` lists those of one file; when an
edit leaves them unchanged (almost every keystroke) no other document's diagnostics can change.
When they do change, only documents whose text names a changed id or variable can be affected
(`affected`): a reference to a memory id, a read of a variable and a duplicate id all spell the
name out. The editor re-checks just those.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..pipelines.shorthand import normalise_memory
from ..registry.values import as_list
from ..workspace.loader import SourceFile

Contribution = tuple[str, str]  # (what, name): ("id", "planning"), ("variable", "phase"), ...


def contributions(source: SourceFile | None) -> frozenset[Contribution]:
    """The ids and declared variables one file contributes (empty when it does not parse)."""
    if source is None or source.document.syntax_errors:
        return frozenset()
    value: Any = source.value
    if source.kind == "persistent-memory" and isinstance(value, dict):
        value = normalise_memory(value, source.path.stem)  # as the loader reads it (shorthand, id from the file)
    found: set[Contribution] = set()
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        found.add((f"{source.kind}-id", value["id"]))
    if source.kind == "persistent-memory" and isinstance(value, dict):
        for var in as_list(value.get("additional_variables")):
            if isinstance(var, dict) and isinstance(var.get("name"), str):
                found.add(("variable", var["name"]))
    if source.kind == "context-rules":
        found |= {("context-rule-id", str(rule.rule.get("id"))) for rule in source.rules}
    return frozenset(found)


def changed_names(before: frozenset[Contribution], after: frozenset[Contribution]) -> set[str]:
    return {name for _, name in before ^ after if name}


def affected(names: set[str], documents: Iterable[tuple[str, str]]) -> list[str]:
    """The uris of the (uri, text) documents whose text names any of `names`."""
    if not names:
        return []
    return [uri for uri, text in documents if any(name in text for name in names)]
