"""The plain path's trace written straight in its wire form: no attrs object, no converter pass.

The plain path answers before an engine's trace program is built (a cold start's first traced
answer, deferred_trace.py) and whenever a lookup holds a None (evaluate.py). Walking the compiled
conditions into `ConditionResult`s and then through the converter cost ~0.45 s a request on
17,400 rules, half of it the converter; here each condition's dict is a copy of a template (the
same `leaf_templates` / `rule_templates` the trace program uses, made on first use and kept on
the leaf and the rule) with its outcome and actual value filled in. As on the compiled path, one
answer shares what is the same in several places: a leaf's dict between the rules (and engines)
that hold that leaf (`large`'s 46,000 conditions are 10,800 leaves).
`tests/rules/test_plain_trace.py` checks on arbitrary engines and requests that the JSON equals
`unstructure(RuleSet.evaluate(…))`, key order included, in every mode.
"""

from __future__ import annotations

from ..collector import paused
from ..model.converter import unstructure
from ..registry.values import MISSING
from .compile import Broken, Group, Leaf, Node
from .engine import CompiledEngine, CompiledRule
from .lookup import Lookup
from .trace import Wire, _plain, leaf_templates, rule_templates


def engine_results(found: list[tuple[CompiledEngine, list[int]]], lookup: Lookup, explain: str) -> list[Wire]:
    """`engine_results` as `unstructure` writes `RuleSet.evaluate`'s, explain "all", "matched" or "none"."""
    leaves: dict[int, Wire] = {}  # id(leaf) -> its dict in this answer (the leaves outlive it)
    with paused():  # tens of thousands of dicts, none in a cycle (as TraceProgram.engine's)
        return [_engine(engine, hits, lookup, explain, leaves) for engine, hits in found]


def _engine(engine: CompiledEngine, hits: list[int], lookup: Lookup, explain: str, leaves: dict[int, Wire]) -> Wire:
    rules = engine.rules
    if explain == "all":
        matched = set(hits)
        entries = [_rule(rule, i in matched, lookup, True, leaves) for i, rule in enumerate(rules)]
    else:
        entries = [_rule(rules[i], True, lookup, explain == "matched", leaves) for i in hits]
    return {"engine_id": engine.id, "rules": entries, "enabled": engine.enabled}


def _rule(rule: CompiledRule, matched: bool, lookup: Lookup, traced: bool, leaves: dict[int, Wire]) -> Wire:
    entry = {**rule_templates(rule)[matched]}
    # the templates' lists are shared: each answer gets its own
    entry["memories"], entry["excluded"] = list(entry["memories"]), list(entry["excluded"])
    entry["conditions"] = [_condition(node, lookup, leaves) for node in rule.conditions.nodes] if traced else []
    return entry


def _condition(node: Node, lookup: Lookup, leaves: dict[int, Wire]) -> Wire:
    if node.__class__ is Leaf:
        made = leaves.get(id(node))
        if made is None:
            made = leaves[id(node)] = _leaf(node, lookup)
        return made
    if node.__class__ is Group:
        children = [_condition(child, lookup, leaves) for child in node.children]
        result = node.outcome([child["result"] for child in children])
        return {"result": result, "group": node.kind, "conditions": children}
    assert isinstance(node, Broken)
    return unstructure(node.explain(lookup))


def _leaf(leaf: Leaf, lookup: Lookup) -> Wire:
    made = leaf_templates(leaf)
    actual = lookup.get(leaf.key, MISSING)
    result = leaf.operator.answer(leaf.predicate, actual)
    if actual is MISSING:
        return {**made[0], "result": result}
    entry = {**made[1], "result": result, "actual": _plain(actual)}
    if actual is None:  # present but null (a caller's lookup): the converter leaves None out
        del entry["actual"]
    return entry
