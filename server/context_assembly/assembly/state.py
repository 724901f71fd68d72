"""The `state` and `warnings` sections, which the assembly writes itself.

`state` always carries the current task: the input text, the task and agent scope, and the active
file when `addVar.active_file` names one. `warnings` carries memory misses, validation problems,
pipeline errors and timeouts, and budget truncation: things the agent should know it is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.context import ContextItem
from ..model.request import AssemblyRequest
from ..stores.uri import render
from .tokens import Counter

STATE_SOURCE = "assembly://state"
WARNING_SOURCE = "assembly://warnings"


def _line(label: str, *values: Any) -> str | None:
    shown = [str(v) for v in values if v not in (None, "")]
    return f"{label}: {' · '.join(shown)}" if shown else None


def task_item(request: AssemblyRequest, count: Counter) -> ContextItem:
    scopes = request.scope_variables
    task = scopes.task or {}
    agent = scopes.agent or {}
    project = scopes.project or {}
    lines = [
        _line("Task", request.input.text if request.input else None),
        _line("Task type", task.get("task_type"), task.get("task_id")),
        _line("Agent", agent.get("agent_name"), agent.get("agent_type")),
        _line("Project", project.get("project_name"), project.get("project_path")),
        _line("Thread", request.thread_id or (scopes.thread or {}).get("thread_id")),
        _line("Phase", request.additional_variables.get("phase")),
    ]
    content = "\n".join(line for line in lines if line) or "Task: (no task text given)"
    return ContextItem("state:task", content, None, STATE_SOURCE + "/task", "state", "critical", None,
                       count(content), {"kind": "task"})


def active_file_item(path: str, read: Callable[[str], str | None], count: Counter) -> ContextItem | str:
    """The active file as a state item, or the reason it cannot be read (a warning)."""
    try:
        text = read(path)
    except Exception as exc:  # refused (traversal) or unreadable: the agent is told, not failed
        return f"active file '{path}' cannot be read: {exc}"
    if text is None:
        return f"active file '{path}' does not exist"
    content = f"Active file: {path}\n```\n{text}\n```"
    return ContextItem("state:active-file", content, None, render("file", (path,)), "state", "critical", None,
                       count(content), {"kind": "active_file", "path": path})


def warning_item(index: int, message: str, count: Counter, **metadata: Any) -> ContextItem:
    content = f"Warning: {message}"
    return ContextItem(f"warning:{index}", content, None, WARNING_SOURCE, "warnings", "high", None,
                       count(content), {"kind": "warning", **metadata})
