"""A sidecar started without compile-cache entries on a workspace of many rules answers through
interpreted matchers while it compiles the generated ones in the background: the same answers as
a one-shot runtime that compiles first, in every explain mode and trace format, and a clean, prompt
shutdown in the middle of compiling."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client import ContextAssemblyClient
from context_assembly.model import AssemblyRequest, structure
from context_assembly.rules.cache import ENV
from context_assembly.runtime import Runtime
from context_assembly.workspace.loader import BACKGROUND_FROM_RULES
from tests.workspace.builder import write

pytestmark = pytest.mark.asyncio

FILES = 8
TYPES = ["feature", "bugfix", "refactor", "docs"]
REQUESTS = [{"scope_variables": {"task": {"task_type": kind}}, "additional_variables": {"phase": phase, "n": n},
             "input": {"text": text}}
            for kind, phase, n, text in [("feature", "planning", 3, "fix the login"), ("docs", "review", 7, "notes"),
                                         ("bugfix", "planning", 0, "")]]


def rule(engine: int, index: int) -> dict[str, Any]:
    when: list[Any] = [{"field": "task.task_type", "operator": "eq", "value": TYPES[index % 4]}]
    if index % 3 == 0:
        when.append({"field": "input.text", "operator": "regex", "value": f"fi+x|{index % 5}"})
    if index % 3 == 1:
        when.append({"any": [{"field": "addVar.n", "operator": "gt", "value": index % 9},
                             {"not": {"field": "addVar.phase", "operator": "in", "value": ["planning"]}}]})
    return {"id": f"r{index}", "priority": index % 4, "when": when,
            "then": {"add_memories": [f"m{engine}-{index % 11}"],
                     **({"exclude_memories": [f"m{engine}-{index % 7}"]} if index % 13 == 0 else {})}}


def workspace(root: Path) -> Path:
    per_file = BACKGROUND_FROM_RULES // FILES + 1  # together enough to compile in the background
    for engine in range(FILES):
        write(root, f"context-rule-engines/e{engine}.json",
              {"id": f"e{engine}", "rules": [rule(engine, i) for i in range(per_file)]})
    return root


async def test_a_cold_sidecar_answers_as_a_compiled_runtime_and_shuts_down_promptly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = workspace(tmp_path / "ws")
    monkeypatch.setenv(ENV, "off")
    compiled = Runtime(root)  # one-shot: compiles before it answers
    expected = [compiled.evaluate(structure(request, AssemblyRequest), explain=mode, trace_format=form)
                for request in REQUESTS for mode in ("none", "matched", "all") for form in ("full", "compact")]
    assert all(engine.generated for engine in compiled.workspace().rule_set.engines)
    compiled.close()
    env = {**os.environ, ENV: str(tmp_path / "cache")}  # empty: a cold start
    async with ContextAssemblyClient(root, env=env) as client:
        answers = [await client.request("contextAssembly/evaluateRules",
                                        {**request, "explain": mode, "trace_format": form})
                   for request in REQUESTS for mode in ("none", "matched", "all") for form in ("full", "compact")]
    assert answers == expected
    assert client.returncode == 0  # shut down and exited on its own, compiling or not
