"""Seed-003 sources an agent passes in with the request: its system prompt and its tool schemas.

The system prompt goes to `constraints` at `critical` priority (it is the agent's own rules). Tools
are ranked by similarity to the task with the offline embedder the vector store uses (cosine of
`name + description` against the task text); the `tools.top_k` best at or above `tools.min_score`
go to `knowledge` at `high` priority, after the task and the constraints, where the ladder may
shorten them like any item. The trace lists every tool with its score and why it was kept or not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from ..model.context import ContextItem
from ..model.request import AssemblyRequest
from ..stores.embedding import default_embedder_name, get_embedder
from ..workspace.settings import ToolSettings
from .tokens import Counter

SOURCE = "assembly://request"


def system_prompt_item(request: AssemblyRequest, count: Counter) -> ContextItem | None:
    text = request.system_prompt
    if not text or not text.strip():
        return None
    return ContextItem("request:system_prompt", text, None, f"{SOURCE}/system_prompt", "constraints", "critical",
                       None, count(text), {"kind": "system_prompt"})


def _describe(tool: dict[str, Any]) -> str:
    name = str(tool.get("name", ""))
    return f"{name.replace('_', ' ').replace('-', ' ')}: {tool.get('description') or ''}"


def _content(tool: dict[str, Any]) -> str:
    schema = tool.get("parameters", tool.get("input_schema"))
    lines = [f"Tool {tool['name']}: {tool.get('description') or '(no description)'}"]
    if schema is not None:
        lines.append("Parameters: " + orjson.dumps(schema, option=orjson.OPT_SORT_KEYS).decode())
    return "\n".join(lines)


def tool_items(request: AssemblyRequest, count: Counter,
               settings: ToolSettings) -> tuple[list[ContextItem], list[dict[str, Any]]]:
    """The kept tools as items (best first) and a trace entry for every tool."""
    tools = [t for t in request.tools or [] if isinstance(t, dict) and t.get("name")]
    if not tools:
        return [], []
    task = request.input.text if request.input and request.input.text else ""
    scores = _similarities(task, [_describe(t) for t in tools])
    ranked = sorted(range(len(tools)), key=lambda i: (-scores[i], i))
    items: list[ContextItem] = []
    trace: list[dict[str, Any]] = []
    for rank, index in enumerate(ranked):
        tool, score = tools[index], round(float(scores[index]), 4)
        if score < settings.min_score:
            kept, reason = False, f"score {score:.2f} is below tools.min_score {settings.min_score}"
        elif rank >= settings.top_k:
            kept, reason = False, f"not among the tools.top_k = {settings.top_k} most relevant"
        else:
            kept, reason = True, f"rank {rank + 1} by similarity to the task"
        trace.append({"name": tool["name"], "score": score, "kept": kept, "reason": reason})
        if kept:
            content, name = _content(tool), tool["name"]
            items.append(ContextItem(tool_item_id(name), content, None, f"{SOURCE}/tools/{name}", "knowledge",
                                     "high", score, count(content), {"kind": "tool", "tool": name}))
    return items, trace


def tool_item_id(name: str) -> str:
    return f"request:tool:{name}"


def _similarities(task: str, texts: list[str]) -> list[float]:
    if not task.strip():
        return [0.0] * len(texts)
    embedder = get_embedder(default_embedder_name())
    vectors = embedder.embed([task, *texts])
    return [float(v) for v in np.asarray(vectors[1:] @ vectors[0])]
