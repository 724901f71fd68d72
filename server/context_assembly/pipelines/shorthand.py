"""Persistent-memory definitions: the seed-002 user shorthand -> the canonical shape (SPEC §5.2).

Shorthand: `name` (for `label`), `enabled: false` (for `status: disabled`), a top-level `pipeline`
(for `retrieval.pipeline`) and `step:` (for `type:`) in each step. Canonical keys win where a file
mixes both. The normalised copy is what runs; the file is never rewritten behind the user's back.
"""

from __future__ import annotations

from typing import Any

SHORTHAND_KEYS = ("name", "enabled", "pipeline")  # top-level keys only the shorthand has


def is_shorthand(document: dict[str, Any]) -> bool:
    steps = document.get("pipeline")
    return (
        "pipeline" in document or "enabled" in document or ("name" in document and "label" not in document)
        or (isinstance(steps, list) and any(isinstance(s, dict) and "step" in s for s in steps))
    )


def _step(step: Any) -> Any:
    if not isinstance(step, dict) or "step" not in step:
        return step
    out = {("type" if k == "step" else k): v for k, v in step.items() if not (k == "step" and "type" in step)}
    for key in ("then_steps", "else_steps"):
        if isinstance(out.get(key), list):
            out[key] = [_step(s) for s in out[key]]
    return out


def normalise_memory(document: dict[str, Any], fallback_id: str) -> dict[str, Any]:
    out = {k: v for k, v in document.items() if k not in SHORTHAND_KEYS}
    out.setdefault("id", fallback_id)
    if "name" in document:
        out.setdefault("label", document["name"])
    if document.get("enabled") is False:
        out.setdefault("status", "disabled")
    out.setdefault("status", "active")
    retrieval = dict(out["retrieval"]) if isinstance(out.get("retrieval"), dict) else {}
    if "pipeline" in document and "pipeline" not in retrieval:
        retrieval["pipeline"] = document["pipeline"]
    steps = retrieval.get("pipeline")
    if isinstance(steps, list):
        retrieval["pipeline"] = [_step(s) for s in steps]
    out["retrieval"] = retrieval
    return out
