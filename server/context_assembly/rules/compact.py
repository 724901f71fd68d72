"""The compact trace (request option `trace_format: "compact"`): the answer, lossless, against layouts.

The SPEC's trace is one JSON object per condition per rule (0.96 MB per request on the bench's
`medium` workload, 7.9 MB on `large`), and even the `explain: "none"` answer lists every matched
rule whole (57 KB / 428 KB), yet almost all of it is the same on every request: rules, fields,
operators and values come from the rule files. Only which rules matched, each condition's outcome
and each variable's value change. So the compact answer is the settled answer (every top-level key
of the full one) whose `engine_results` entries are `{engine_id, enabled, trace}` (no `rules`:
they are the layout's), with `trace`:

- `layout`: the key (a hash of its content) of the engine's static layout, which
  `contextRuleEngine/traceLayout` answers: every distinct condition in the trace program's slot
  order (`{variable, field, operator, value?, ignore_case?}`; a group `{group, conditions:
  [indexes]}`, children first; a malformed one `{field?, operator?, value?, error}`) and every rule
  in evaluation order (`{rule_id, name?, priority?, memories, excluded, per_source, error?,
  conditions: [indexes]}`, memories and excluded as when it matches);
- `matched`: the indexes of the rules that matched, in that order;
- `outcomes` (explain "all" / "matched"): every condition's outcome, base64 of the bitmap in which
  bit i (least significant bit first within each byte, bytes in order) is condition i's result;

and top-level `trace_format: "compact"`, `explain` (the mode the expansion gives: "all",
"matched" or "none") and, but for "none", `actual_values`: each variable a layout reads that the
request has, with its value once (a condition's `actual`; a variable left out was absent:
`present: false`). The client's expander (`context_assembly.client.compact_trace`) rebuilds
exactly the default answer of that mode. The bits come straight from the compiled trace's outcome
slots (trace.py): no per-condition dict is made.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable

import orjson
from attrs import frozen

from .bitmap import QUEUED, engine_bits
from .engine import CompiledEngine
from .lookup import Lookup, complete
from .trace import TraceProgram, Wire, program

KEY_CHARS = 32  # hex digits of the layout's SHA-256 kept in its key (128 bits)


@frozen
class Layout:
    """One engine version's static layout, its key, and the variables its conditions read."""

    key: str
    document: Wire
    variables: frozenset[str]


def layout(engine: CompiledEngine) -> Layout:
    """The engine's layout, made once per compiled engine (kept with its trace program)."""
    made = program(engine)
    if made.layout is None:
        made.layout = _layout(engine.id, made)
        if made.kept is not None and made.layout_key is None:  # kept with the program (trace_cache.py)
            made.layout_key = made.layout.key
            made.kept.store(made, None)
    found: Layout = made.layout
    return found


def _layout(engine_id: str, made: TraceProgram) -> Layout:
    conditions: list[Wire] = []
    for slot in made.slots:  # (copies, then the keys a layout leaves out deleted: C speed, same key order)
        entry: Wire
        if slot.kind == "leaf":
            entry = {"variable": slot.key, **slot.absent}
            del entry["result"], entry["present"]
        elif slot.kind == "group":
            entry = {"group": slot.absent["group"], "conditions": list(slot.children)}
        else:
            entry = {**slot.absent}
            del entry["result"]
        conditions.append(entry)
    rules = []
    for slots, unmatched, matched in made.rules:
        rule = {**unmatched}
        del rule["matched"], rule["conditions"]
        rule["memories"], rule["excluded"], rule["conditions"] = matched["memories"], matched["excluded"], list(slots)
        rules.append(rule)
    content = {"engine_id": engine_id, "conditions": conditions, "rules": rules}
    key = made.layout_key or hashlib.sha256(_content_bytes(content)).hexdigest()[:KEY_CHARS]
    return Layout(key, {"engine_id": engine_id, "layout": key, **content}, frozenset(made.keys))


def _content_bytes(content: Wire) -> bytes:
    """What the layout key hashes: the content's JSON (orjson; stdlib json for what orjson refuses, an
    integer beyond 64 bits from a rule file). Once per engine version, then kept in the compile cache."""
    try:
        return orjson.dumps(content)
    except TypeError:
        return json.dumps(content, separators=(",", ":")).encode()


def pack(outcomes: list[bool]) -> str:
    """The outcomes as base64 of their bitmap (bit i = outcome i, least significant bit first): the
    bits as the digits of one integer, written little-endian (C speed throughout)."""
    digits = bytes(outcomes)[::-1].translate(_DIGITS) or b"0"
    return base64.b64encode(int(digits, 2).to_bytes((len(outcomes) + 7) // 8, "little")).decode("ascii")


_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


def compact_answer(wire: Wire, found: list[tuple[CompiledEngine, list[int]]], lookup: Lookup,
                   explain: str) -> Wire:
    """The compact answer: `wire` (the settled answer without engine results) with each engine's
    matched rules as layout indexes and (explain all / matched) its packed trace. `lookup` holds no
    None (see `from_full`)."""
    engines = []
    variables: set[str] = set()
    for engine, hits in found:
        made, shape = program(engine), layout(engine)
        trace: Wire = {"layout": shape.key, "matched": hits}
        if explain != "none":
            variables |= shape.variables
            trace["outcomes"] = _outcomes(made, lookup)
        engines.append(_entry(engine, trace))
    return _finish(wire, engines, lookup, variables, explain)


def _outcomes(made: TraceProgram, lookup: Lookup) -> str:
    """The engine's outcomes, packed: from its bitmap function, its outcomes function (groups), or
    while those compile in the background (bitmap.py `QUEUED`) without generated code."""
    if made.bits is QUEUED:
        return pack(made.plain_outcomes(lookup))
    bits = engine_bits(made)
    if bits is None:
        return pack(made.outcomes(complete(lookup, made.keys)))
    return base64.b64encode(bits.bitmap(lookup)).decode("ascii")


def from_full(full: Wire, engines: list[CompiledEngine], lookup: Lookup, explain: str) -> Wire:
    """The compact answer from the full one (`explain: "all"`, the plain path's, taken when a value
    is None): the matched rules and the outcomes read off its rules and conditions, slot by slot."""
    entries = []
    variables: set[str] = set()
    for engine, result in zip(engines, full["engine_results"], strict=True):
        made, shape = program(engine), layout(engine)
        hits = [i for i, rule in enumerate(result["rules"]) if rule["matched"]]
        trace: Wire = {"layout": shape.key, "matched": hits}
        if explain != "none":
            variables |= shape.variables
            outcomes = [False] * len(made.slots)
            for (slots, _, _), rule in zip(made.rules, result["rules"], strict=True):
                _read(made, slots, rule["conditions"], outcomes)
            trace["outcomes"] = pack(outcomes)
        entries.append(_entry(engine, trace))
    return _finish(dict(full), entries, lookup, variables, explain)


def _entry(engine: CompiledEngine, trace: Wire) -> Wire:
    """An engine's entry of a compact answer: its rules are the layout's (`trace`), not listed."""
    return {"engine_id": engine.id, "enabled": engine.enabled, "trace": trace}


def _read(made: TraceProgram, slots: Iterable[int], conditions: list[Wire], outcomes: list[bool]) -> None:
    for index, condition in zip(slots, conditions, strict=True):
        outcomes[index] = condition["result"]
        children = made.slots[index].children
        if children:
            _read(made, children, condition["conditions"], outcomes)


def _finish(wire: Wire, engines: list[Wire], lookup: Lookup, variables: set[str], explain: str) -> Wire:
    wire["engine_results"] = engines
    wire["trace_format"] = "compact"
    wire["explain"] = explain
    if explain != "none":  # a "none" answer has no conditions to give values to
        wire["actual_values"] = {key: value for key, value in lookup.items() if key in variables}
    return wire
