"""Rule-test files in the editor: what each place expects (keys from the rule-test schema, rule
references, memory ids, sections), failing cases as diagnostics at the case, and the code lenses
"Run test" (on cases) and "Evaluate this rule" (on rules) whose commands the server executes."""

from __future__ import annotations

import functools
from typing import Any

from ..model.problems import Problem, Severity
from ..rules.dialects import CONTEXT_RULES_ID
from ..schemas import build_schema
from ..testing.cases import read_test_file
from ..testing.run import CaseResult, LookupOf, plain_lookup, run_case
from ..workspace.loader import Workspace
from .capabilities import EVALUATE_RULE, RUN_TEST
from .documents import EditorDocument

RULE_LISTS = ("rules_fired", "rules_not_fired")
MEMORY_LISTS = ("memories_included", "memories_excluded")
SECTION_LISTS = ("sections_present", "sections_absent")
ITEM_LISTS = ("items_present", "items_absent")


@functools.cache
def _defs() -> dict[str, Any]:
    schema = build_schema("rule-test")
    return {"": schema, **schema["$defs"]}


def _properties(definition: str) -> list[tuple[str, str | None]]:
    properties = _defs()[definition].get("properties") or {}
    return [(key, (spec.get("description") or "").split("\n")[0] or None) for key, spec in properties.items()]


def _definition_at(container: tuple[str, ...]) -> str | None:
    """Which object of the rule-test schema `container` (pointer tokens) is, when it is one."""
    n = len(container)
    if n == 0:
        return ""
    if n == 2 and container[0] == "cases" and container[1].isdigit():
        return "case"
    if n == 3 and container[0] == "cases" and container[2] == "expect":
        return "expect"
    if n == 5 and container[0] == "cases" and container[3] in ITEM_LISTS and container[4].isdigit():
        return "item_match"
    return None


def key_choices(container: tuple[str, ...]) -> list[tuple[str, str | None]]:
    definition = _definition_at(container)
    return [] if definition is None else _properties(definition)


def key_description(tokens: tuple[str, ...]) -> str | None:
    """The schema's description of the key at `tokens` (for hover)."""
    definition = _definition_at(tokens[:-1]) if tokens else None
    if definition is None:
        return None
    spec = (_defs()[definition].get("properties") or {}).get(tokens[-1])
    return spec.get("description") if isinstance(spec, dict) else None


def place(tokens: tuple[str, ...]) -> str | None:
    """"rule", "memory" or "section" when the value at `tokens` names one, else None."""
    if len(tokens) >= 2 and tokens[-1].isdigit():
        if tokens[-2] in RULE_LISTS:
            return "rule"
        if tokens[-2] in MEMORY_LISTS:
            return "memory"
        if tokens[-2] in SECTION_LISTS:
            return "section"
    if len(tokens) >= 3 and tokens[-3] in ITEM_LISTS:
        return {"memory": "memory", "section": "section"}.get(tokens[-1])
    return None


def rule_choices(workspace: Workspace) -> list[tuple[str, str]]:
    """(`engine/rule`, name) of every rule."""
    out = []
    for engine_id, engine in sorted(workspace.engines.items(), key=lambda e: (e[0] == CONTEXT_RULES_ID, e[0])):
        for rule in engine.rules:
            if isinstance(rule.id, str) and rule.id:
                out.append((f"{engine_id}/{rule.id}", rule.name or rule.description or ""))
    return out


def rule_markdown(reference: str, workspace: Workspace) -> str | None:
    engine_id, _, rule_id = reference.rpartition("/")
    for engine in ([workspace.engines[engine_id]] if engine_id in workspace.engines else workspace.engines.values()):
        for rule in engine.rules:
            if rule.id == rule_id:
                then = rule.then
                lines = [f"**{engine.id}/{rule.id}**" + (f": {rule.name}" if rule.name else ""),
                         "", f"priority {rule.priority}, {len(rule.when)} condition(s)"]
                if then.add_memories:
                    lines.append("adds " + ", ".join(f"`{m}`" for m in then.add_memories))
                if then.exclude_memories:
                    lines.append("excludes " + ", ".join(f"`{m}`" for m in then.exclude_memories))
                source = workspace.engine_sources.get(engine.id or "")
                if source is not None:
                    lines += ["", f"in `{source.relpath}`"]
                return "\n".join(lines)
    return None


# -- failing cases as diagnostics --------------------------------------------------------------------


def case_results(document: EditorDocument, workspace: Workspace,
                 lookup_of: LookupOf = plain_lookup) -> list[CaseResult]:
    """The rules-only cases of the document, run against the workspace as the editor sees it
    (cases that need the full assembly run from the "Run test" lens)."""
    test_file = read_test_file(document.source, workspace)
    if test_file.problems:
        return []
    return [run_case(case, workspace, None, lookup_of=lookup_of)
            for case in test_file.cases if not case.assemble and not case.skip]


def case_problems(results: list[CaseResult]) -> list[Problem]:
    problems = []
    for result in results:
        if result.status == "error" and result.error is not None:
            problems.append(Problem(f"test '{result.name}' cannot run: {result.error.message}", "test-request",
                                    path=result.error.path))
        for failure in result.failures:
            problems.append(Problem(f"test '{result.name}' failed: {failure.message} (actual: "
                                    f"{_short(failure.actual)})", "test-failed", Severity.ERROR,
                                    path=failure.pointer, data={"case": result.name}))
    return problems


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 200 else text[:197] + "..."


# -- code lenses -----------------------------------------------------------------------------------


def _lens(document: EditorDocument, pointer: str, title: str, command: str, arguments: list[Any],
          encoding: str) -> dict[str, Any] | None:
    span = document.parsed.span(pointer, "key" if pointer else "value")
    if span is None:
        return None
    start = span[0]
    return {"range": document.range(start, start, encoding),
            "command": {"title": title, "command": command, "arguments": arguments}}


def code_lenses(document: EditorDocument, encoding: str = "utf-16") -> list[dict[str, Any]]:
    value = document.value
    lenses: list[dict[str, Any] | None] = []
    if document.kind == "rule-test" and isinstance(value, dict) and isinstance(value.get("cases"), list):
        lenses.append(_lens(document, "/cases", "Run all tests", RUN_TEST, [document.relpath], encoding))
        for index, case in enumerate(value["cases"]):
            if isinstance(case, dict) and isinstance(case.get("name"), str):
                lenses.append(_lens(document, f"/cases/{index}", "Run test", RUN_TEST,
                                    [document.relpath, case["name"]], encoding))
    elif document.kind == "rule-engine" and document.source.engine is not None:
        engine = document.source.engine
        for index, rule in enumerate(engine.rules):
            rule_id = rule.id if isinstance(rule.id, str) and rule.id else f"#{index}"  # as the engine names it
            lenses.append(_lens(document, f"/rules/{index}", "Evaluate this rule", EVALUATE_RULE,
                                [engine.id, rule_id], encoding))
    elif document.kind == "context-rules":
        for normalised in document.source.rules:
            lenses.append(_lens(document, normalised.pointer, "Evaluate this rule", EVALUATE_RULE,
                                [CONTEXT_RULES_ID, normalised.rule["id"]], encoding))
    return [lens for lens in lenses if lens is not None]
