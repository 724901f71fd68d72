"""Comparing two assembled contexts (SPEC §8 `contextAssembly/diff`, seed 003's replay): items
added, removed, moved between sections and re-ranked, tokens per section before and after, and
the rules and memories that changed.

Items are matched by identity — the memory (or source) that produced them and their id — so an
item whose text changed is "changed", not removed and added. Works on the JSON shape of an
assembly (`unstructure(AssembledContext)`, a snapshot's `result`), so a stored snapshot and a
fresh run compare alike.
"""

from __future__ import annotations

from typing import Any

from ..registry.sections import SECTION_NAMES

Item = dict[str, Any]
# A memory's result served from the pipeline cache is the outcome a fresh run gives: not a drift
# (rule tests read the two alike too, testing/observe.py).
_SAME_OUTCOME = {"cached": "ok"}


def _key(item: Item) -> tuple[str, str]:
    return str(item.get("memory_id") or item.get("source") or ""), str(item.get("id") or "")


def _positions(result: dict[str, Any]) -> dict[tuple[str, str], tuple[str, int, Item]]:
    out: dict[tuple[str, str], tuple[str, int, Item]] = {}
    for section in SECTION_NAMES:
        for rank, item in enumerate((result.get("context") or {}).get(section) or []):
            out.setdefault(_key(item), (section, rank, item))
    return out


def _brief(item: Item) -> dict[str, Any]:
    content = str(item.get("content") or "")
    return {"id": item.get("id"), "memory": item.get("memory_id") or item.get("source"),
            "section": item.get("section"), "tokens": item.get("tokens"),
            "preview": content if len(content) <= 120 else content[:117] + "..."}


def _fired(result: dict[str, Any]) -> list[str]:
    rules = (result.get("trace") or {}).get("rules_applied") or []
    return [f"{r.get('engine_id')}/{r.get('rule_id')}" for r in rules]


def _memories(result: dict[str, Any]) -> dict[str, str]:
    calls = (result.get("trace") or {}).get("memory_calls") or []
    return {str(c.get("reference")): str(c.get("status")) for c in calls}


def _outcome(status: str) -> str:
    return _SAME_OUTCOME.get(status, status)


def _tokens(result: dict[str, Any]) -> dict[str, int]:
    sections = (result.get("trace") or {}).get("sections") or {}
    context = result.get("context") or {}
    out = {}
    for name in SECTION_NAMES:
        if name in sections:
            out[name] = int((sections[name] or {}).get("tokens") or 0)
        else:
            out[name] = sum(int(i.get("tokens") or 0) for i in context.get(name) or [])
    return out


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changed from `before` to `after` (two assembled contexts as JSON)."""
    old, new = _positions(before), _positions(after)
    added = [_brief(new[k][2]) for k in new if k not in old]
    removed = [_brief(old[k][2]) for k in old if k not in new]
    moved, reranked, changed = [], [], []
    for key in old.keys() & new.keys():
        (s0, r0, i0), (s1, r1, i1) = old[key], new[key]
        if s0 != s1:
            moved.append({**_brief(i1), "from": s0, "to": s1})
        elif r0 != r1:
            reranked.append({**_brief(i1), "from_rank": r0 + 1, "to_rank": r1 + 1})
        if i0.get("content") != i1.get("content") or i0.get("tokens") != i1.get("tokens"):  # counted anew too
            changed.append({**_brief(i1), "tokens_before": i0.get("tokens")})
    order = {k: n for n, k in enumerate(new)}
    for listing in (moved, reranked, changed):
        listing.sort(key=lambda e: order.get((str(e["memory"] or ""), str(e["id"] or "")), 0))
    t0, t1 = _tokens(before), _tokens(after)
    f0, f1 = _fired(before), _fired(after)
    m0, m1 = _memories(before), _memories(after)
    meta0, meta1 = before.get("meta") or {}, after.get("meta") or {}
    out: dict[str, Any] = {
        "before": _summary(meta0), "after": _summary(meta1),
        "added": added, "removed": removed, "moved": moved, "reranked": reranked, "changed": changed,
        "sections": {name: {"before": t0[name], "after": t1[name], "delta": t1[name] - t0[name]}
                     for name in SECTION_NAMES},
        "rules": {"fired": [r for r in f1 if r not in f0], "no_longer_fired": [r for r in f0 if r not in f1]},
        "memories": {"added": [m for m in m1 if m not in m0], "removed": [m for m in m0 if m not in m1],
                     "status_changed": [{"reference": m, "before": m0[m], "after": m1[m]}
                                        for m in m1 if m in m0 and _outcome(m0[m]) != _outcome(m1[m])]},
    }
    out["identical"] = not any((added, removed, moved, reranked, changed, out["rules"]["fired"],
                                any(entry["delta"] for entry in out["sections"].values()),
                                out["rules"]["no_longer_fired"], out["memories"]["added"],
                                out["memories"]["removed"], out["memories"]["status_changed"]))
    return out


def _summary(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: meta.get(k) for k in ("assembly_id", "token_estimate", "total_items", "truncated", "max_tokens")}
