"""Writing small `.codebolt/` workspaces for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write(root: Path, relpath: str, content: Any) -> Path:
    """Write a file under root/.codebolt/ (dicts and lists as pretty JSON, strings as they are)."""
    path = root / ".codebolt" / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content, indent=2) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def memory(memory_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": memory_id, "label": memory_id.title(), "status": "active",
            "retrieval": {"pipeline": [{"type": "kv_get", "keys": ["k"]}]},
            "contribution": {"section": "knowledge", "priority": "medium"}, **extra}
