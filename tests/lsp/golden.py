"""Whole JSON-RPC responses as golden snapshots: the one place that makes them deterministic.

A response is stored as the server sent it (`{"jsonrpc", "id", "result" | "error"}`), after
`normalise`, which replaces, and nothing else:

- the workspace's path and `file://` URI (a fresh temporary copy per run) by `<workspace>`;
- the package's own folder (the diagnostic-codes doc that `codeDescription` links to) by `<package>`;
- values that differ run to run by a mask: durations (`duration_ms`, every `trace.stages` timing),
  timestamps (`ts`, `last_ts`, `created_at`, `updated_at`), and pull-diagnostic `resultId`s;
- floating-point numbers (vector scores) are rounded to 6 decimal places, so a last-digit
  difference between CPUs is not a change.

Assembly ids are fixed by the request (`assembly_id`). Any other change to a response, a key that
appears, disappears or changes shape included, shows up as a snapshot diff for a person to review
(`pytest --snapshot-update` rewrites the files after review).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import context_assembly

MASK = "<masked>"
TIMES = frozenset({"duration_ms", "ts", "last_ts", "created_at", "updated_at", "resultId"})
PACKAGE = Path(context_assembly.__file__).resolve().parent


def normalise(value: Any, root: Path, parent_key: str = "") -> Any:
    if isinstance(value, dict):
        return {key: MASK if key in TIMES or parent_key == "stages" else normalise(item, root, key)
                for key, item in value.items()}
    if isinstance(value, list):
        return [normalise(item, root, parent_key) for item in value]
    if isinstance(value, str):
        return _paths(value, root)
    if isinstance(value, float):
        return round(value, 6)
    return value


def _paths(text: str, root: Path) -> str:
    for base, name in ((root.resolve(), "<workspace>"), (PACKAGE, "<package>")):
        text = text.replace(base.as_uri(), name).replace(str(base), name)
    return text
