"""Expanding a compact answer (`trace_format: "compact"`) into exactly the default answer.

The server's compact answer (README, "The sidecar"; the format is described in the server's
`rules/compact.py`) carries per engine the key of a static layout, the indexes of the matched
rules and (explain all / matched) every distinct condition's outcome as bits; top-level
`actual_values` holds each variable's value once. `TraceLayouts` keeps the layouts (one per
engine, the latest seen; fetched through `contextRuleEngine/traceLayout`) and `expand` rebuilds
the answer `"trace_format": "full"` gives for the same request and `explain` mode, key for key.

In an expanded answer, one engine's identical conditions are one dict shared by the rules that
hold them (as the server builds them), and the conditions reading one variable share its value:
copy before changing one. Nothing is shared with the layout cache or with another answer.
"""

from __future__ import annotations

import base64
import binascii
import gc
from typing import Any

JSON = dict[str, Any]
COMPACT_KEYS = ("trace_format", "explain", "actual_values")  # top-level keys only the compact answer has
_SCALARS = (str, int, float, bool, type(None))


class LayoutError(ValueError):
    """A compact answer that its layout cannot expand: a layout missing from the cache, or an
    answer or layout that is not well formed."""


class _Prepared:
    """One layout, ready to expand answers: templates per condition and per rule."""

    __slots__ = ("key", "engine_id", "conditions", "rules", "matched", "mutable")

    def __init__(self, document: JSON) -> None:
        try:
            self.key, self.engine_id = str(document["layout"]), str(document["engine_id"])
            self.conditions = [_condition(entry, i) for i, entry in enumerate(document["conditions"])]
            self.rules = [_rule(entry, len(self.conditions)) for entry in document["rules"]]
        except (KeyError, TypeError, AttributeError) as exc:
            raise LayoutError(f"malformed trace layout: {exc!r}") from None
        # per rule (matched template, its memories, its excluded, its top-level condition indexes)
        self.matched = [(rule[3], rule[3]["memories"], rule[3]["excluded"], rule[1]) for rule in self.rules]
        self.mutable = any(rule[2] for rule in self.rules)  # a value to copy all the way down

    def matched_rules(self, hits: list[int], made: list[JSON] | None) -> list[JSON]:
        """The matched rules' dicts, fresh: their lists copied, strings shared (immutable); `made`:
        each condition's dict (None: a `"none"` answer, no conditions). IndexError or TypeError
        for an index that is not one of a rule."""
        if hits and min(hits) < 0:
            raise IndexError(min(hits))
        rules: list[JSON] = []
        append = rules.append
        if self.mutable:
            for i in hits:
                rule = _copy(self.rules[i][3])
                rule["conditions"] = [] if made is None else [made[s] for s in self.rules[i][1]]
                append(rule)
            return rules
        for i in hits:  # one dict copy and three lists a rule (~0.15 µs; 1,900 rules on `large`)
            template, memories, excluded, slots = self.matched[i]
            rule = template.copy()
            rule["conditions"] = [] if made is None else [made[s] for s in slots]
            rule["memories"], rule["excluded"] = memories.copy(), excluded.copy()
            append(rule)
        return rules


def _condition(entry: JSON, index: int) -> tuple[Any, ...]:
    """("leaf", absent, present, present-without-actual, variable, copier) | ("group", kind, children)
    | ("broken", template): the dicts in the key order of the full answer, outcome to fill in."""
    if "group" in entry:
        children = tuple(entry["conditions"])
        if not all(isinstance(c, int) and 0 <= c < index for c in children):
            raise LayoutError(f"condition {index}: a group's conditions must come before it")
        return ("group", entry["group"], children)
    if "variable" not in entry:
        return ("broken", {"result": False, **entry})
    head: JSON = {"result": False, "field": entry["field"], "operator": entry["operator"]}
    if "value" in entry:
        head["value"] = entry["value"]
    tail = {"ignore_case": entry["ignore_case"]} if "ignore_case" in entry else {}
    absent = {**head, "present": False, **tail}
    present = {**head, "actual": None, "present": True, **tail}
    null = {**head, "present": True, **tail}
    return ("leaf", absent, present, null, entry["variable"], _copier(entry))


def _copier(entry: JSON) -> Any:
    """How a leaf's dict is made fresh from its template: None (scalars only: a shallow copy
    does), `list.copy` (a value that is a list of scalars, the usual `in`), `_copy` (the rest)."""
    value, flag = entry.get("value"), entry.get("ignore_case")
    if not isinstance(flag, _SCALARS):
        return _copy
    if isinstance(value, _SCALARS):
        return None
    if isinstance(value, list) and all(isinstance(v, _SCALARS) for v in value):
        return list.copy
    return _copy


def _rule(entry: JSON, conditions: int) -> tuple[JSON, tuple[int, ...], bool, JSON]:
    """(the unmatched rule's dict with a place for its conditions, its top-level condition indexes,
    whether it holds a value that must be copied, the matched rule's dict: memories and excluded
    to copy, a place for its conditions)."""
    slots = tuple(entry["conditions"])
    if not all(isinstance(c, int) and 0 <= c < conditions for c in slots):
        raise LayoutError(f"rule {entry.get('rule_id')!r}: condition index out of range")
    unmatched: JSON = {"rule_id": entry["rule_id"], "matched": False}
    for key in ("name", "priority"):
        if key in entry:
            unmatched[key] = entry[key]
    unmatched.update(conditions=None, memories=None, excluded=None, per_source=entry["per_source"])
    if "error" in entry:
        unmatched["error"] = entry["error"]
    memories, excluded = entry["memories"], entry["excluded"]
    if not (isinstance(memories, list) and isinstance(excluded, list)):
        raise LayoutError(f"rule {entry.get('rule_id')!r}: memories and excluded must be lists")
    mutable = any(not isinstance(v, _SCALARS) for v in (*unmatched.values(), *memories, *excluded))
    matched = {**unmatched, "matched": True, "memories": memories, "excluded": excluded}
    return unmatched, slots, mutable, matched


def _copy(value: Any) -> Any:
    """A JSON value, fresh (lists and objects copied all the way down)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def unpack(outcomes: str, count: int) -> list[bool]:
    """The `count` outcomes of a bitmap (base64; bit i = outcome i, least significant bit first)."""
    try:
        raw = base64.b64decode(outcomes, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise LayoutError("outcomes: not base64") from None
    if len(raw) != (count + 7) // 8:
        raise LayoutError(f"outcomes: {len(raw)} bytes for {count} conditions (a different layout?)")
    number = int.from_bytes(raw, "little")
    digits = format(number, "b").zfill(count)[::-1] if number else "0" * count
    if len(digits) > count:
        raise LayoutError("outcomes: bits set beyond the last condition")
    return list(map("1".__eq__, digits))


class TraceLayouts:
    """The layouts a client has seen, the latest per engine; `expand` turns compact answers into
    full ones."""

    def __init__(self) -> None:
        self._by_engine: dict[str, _Prepared] = {}

    def add(self, document: JSON) -> None:
        """A layout as `contextRuleEngine/traceLayout` answers it."""
        prepared = _Prepared(document)
        self._by_engine[prepared.engine_id] = prepared

    def missing(self, answer: JSON) -> list[tuple[str, str]]:
        """(engine id, layout key) of each layout the answer needs that is not here."""
        wanted = dict.fromkeys((entry["engine_id"], entry["trace"]["layout"])
                               for entry in answer.get("engine_results", ()) if "trace" in entry)
        return [(engine_id, key) for engine_id, key in wanted if self._known(engine_id) != key]

    def _known(self, engine_id: str) -> str | None:
        found = self._by_engine.get(engine_id)
        return None if found is None else found.key

    def expand(self, answer: JSON) -> JSON:
        """The answer as `"trace_format": "full"` gives it; an answer that is not compact as it is."""
        if answer.get("trace_format") != "compact":
            return answer
        values = answer.get("actual_values") or {}
        explain = answer.get("explain", "all")
        out = {k: v for k, v in answer.items() if k not in COMPACT_KEYS}
        # ~10^5 new containers on a large workspace, none in a cycle: the cyclic collector would
        # re-walk every cached layout several times per answer (half the expansion's time)
        collecting = gc.isenabled()
        gc.disable()
        try:
            out["engine_results"] = [self._engine(entry, values, explain) for entry in answer["engine_results"]]
        finally:
            if collecting:
                gc.enable()
        return out

    def _engine(self, entry: JSON, values: JSON, explain: str) -> JSON:
        trace = entry.get("trace")
        if trace is None:
            return entry
        layout = self._by_engine.get(entry["engine_id"])
        if layout is None or layout.key != trace["layout"]:
            raise LayoutError(f"no trace layout {trace['layout']!r} for rule engine {entry['engine_id']!r}: "
                              "fetch it with contextRuleEngine/traceLayout")
        matched = trace["matched"]
        made = None if explain == "none" else \
            _conditions(layout, unpack(trace["outcomes"], len(layout.conditions)), values)
        try:
            if not isinstance(matched, list):
                raise TypeError(matched)
            rules = layout.matched_rules(matched, made)
        except (IndexError, TypeError):
            raise LayoutError(f"rule engine {entry['engine_id']!r}: matched rules do not fit the layout") from None
        if made is not None and explain == "all":
            rules = _every_rule(layout, dict(zip(matched, rules, strict=True)), made)
        out = {"engine_id": entry["engine_id"], "rules": rules}  # the full answer's key order
        out.update((k, v) for k, v in entry.items() if k not in ("engine_id", "trace"))
        return out


def _every_rule(layout: _Prepared, matched: dict[int, JSON], made: list[JSON]) -> list[JSON]:
    """Every rule of the layout in order (`explain: "all"`): the matched ones as given, the others
    fresh from their templates with their conditions, no memories and no exclusions."""
    rules = []
    for i, (template, slots, mutable, _) in enumerate(layout.rules):
        rule = matched.get(i)
        if rule is None:
            rule = _copy(template) if mutable else {**template}
            rule["conditions"], rule["memories"], rule["excluded"] = [made[s] for s in slots], [], []
        rules.append(rule)
    return rules


def _conditions(layout: _Prepared, outcomes: list[bool], values: JSON) -> list[JSON]:
    """Each distinct condition's dict, in layout order (children before their groups)."""
    made: list[JSON] = []
    append = made.append
    for spec, result in zip(layout.conditions, outcomes, strict=True):
        kind = spec[0]
        if kind == "leaf":
            _, absent, present, null, variable, copier = spec
            if variable not in values:
                condition = {**absent, "result": result}
            else:
                actual = values[variable]
                condition = {**present, "result": result, "actual": actual} if actual is not None \
                    else {**null, "result": result}
            if copier is list.copy:
                condition["value"] = condition["value"].copy()
            elif copier is not None:
                condition = copier(condition)
        elif kind == "group":
            condition = {"result": result, "group": spec[1], "conditions": [made[c] for c in spec[2]]}
        else:
            condition = {**_copy(spec[1]), "result": result}
        append(condition)
    return made
