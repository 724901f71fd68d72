"""The assembly request (seed 000), shared by assemble, evaluateRules and validate."""

from __future__ import annotations

from typing import Any

from attrs import define, field


@define
class ScopeVariables:
    """The 8 scopes; each is an open object (extra fields such as `project_name` are allowed)."""

    swarm: dict[str, Any] | None = None
    project: dict[str, Any] | None = None
    agent: dict[str, Any] | None = None
    thread: dict[str, Any] | None = None
    task: dict[str, Any] | None = None
    user: dict[str, Any] | None = None
    org: dict[str, Any] | None = None
    orchestrator: dict[str, Any] | None = None


@define
class InputText:
    text: str | None = None


@define
class Constraints:
    max_tokens: int | None = None


@define
class AssemblyRequest:
    scope_variables: ScopeVariables = field(factory=ScopeVariables)
    additional_variables: dict[str, Any] = field(factory=dict)
    input: InputText | None = None
    explicit_memory: list[str] = field(factory=list)
    constraints: Constraints | None = None
    rule_engine_ids: list[str] | None = None
    thread_id: str | None = None
    system_prompt: str | None = None  # seed 003: the agent's system prompt, into `constraints`
    tools: list[dict[str, Any]] | None = None  # seed 003: tool schemas, filtered by relevance to the task
