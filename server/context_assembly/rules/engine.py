"""Compiled rule engines and the fast matcher.

Each engine compiles to one generated Python function that loads every field it reads once and
tests its rules in evaluation order with short-circuit `and`/`or`, calling the operators'
predicates. The generated source names only indexes into tuples built here, never text from a
rule file, so a file cannot inject code. The explaining path (`CompiledConditions.explain`)
walks the same compiled tree and must agree with it; tests check that on arbitrary input.
"""

from __future__ import annotations

import gc
import itertools
import re
from collections.abc import Callable
from typing import Any

from attrs import define, field

from ..model.evaluation import RuleResult
from ..model.rules import Rule, RuleEngine
from ..registry.values import MISSING
from .compile import Broken, CompiledConditions, Group, Leaf, Node, compile_conditions
from .lookup import Lookup

Matcher = Callable[[Lookup], list[int]]


@define(eq=False)
class CompiledRule:
    rule: Rule
    rule_id: str
    position: int  # index in the file, for tie order
    conditions: CompiledConditions
    # Derived once, because the hot path touches them for every matched rule:
    ref: str = ""  # "engine/rule", as decisions name it
    memories: tuple[str, ...] = ()
    plain: bool = True  # only adds memories: no excludes, caps, priorities or boosts
    broken: bool = False
    per_source: bool = False
    error: str | None = None
    _matched_result: RuleResult | None = None

    @property
    def matched_result(self) -> RuleResult:
        """This rule's result when it matched, without the per-condition trace; shared, read-only."""
        if self._matched_result is None:
            self._matched_result = rule_result(self, True, [])
        return self._matched_result

    def __attrs_post_init__(self) -> None:
        then = self.rule.then
        self.memories = tuple(then.add_memories)
        self.plain = not (then.exclude_memories or then.caps or then.set_priority or then.boost)
        self.broken = bool(self.conditions.errors)
        self.per_source = self.conditions.per_source
        self.error = "; ".join(self.conditions.errors) or None


def rule_result(rule: CompiledRule, matched: bool, conditions: list) -> RuleResult:
    return RuleResult(
        rule.rule_id, matched, rule.rule.name, rule.rule.priority, conditions,
        list(rule.memories) if matched else [],
        list(rule.rule.then.exclude_memories) if matched and not rule.plain else [],
        rule.per_source, rule.error,
    )


@define(eq=False)
class CompiledEngine:
    id: str
    enabled: bool
    rules: list[CompiledRule]  # evaluation order: priority descending, ties in file order
    matcher: Matcher
    engine: RuleEngine
    keys: list[str] = field(factory=list)  # every lookup key a normal (not per-source) rule reads

    def match(self, lookup: Lookup) -> list[CompiledRule]:
        return [self.rules[i] for i in self.matcher(lookup)]


def _rule_id(rule: Rule, position: int) -> str:
    return rule.id if isinstance(rule.id, str) and rule.id else f"#{position}"


def _priority(rule: Rule) -> float:
    p = rule.priority
    return float(p) if isinstance(p, int | float) and not isinstance(p, bool) else 0.0


class _Emitter:
    """Writes one engine's matcher source; predicates and keys become globals by index."""

    def __init__(self) -> None:
        self.globals: dict[str, Any] = {"M": MISSING}
        self.keys: dict[str, str] = {}
        self._names = itertools.count()

    def var(self, key: str) -> str:
        if key not in self.keys:
            self.keys[key] = f"v{len(self.keys)}"
        return self.keys[key]

    def expr(self, node: Node) -> str:
        if isinstance(node, Leaf):
            var, name = self.var(node.key), f"p{next(self._names)}"
            if node.inline is not None:
                template, self.globals[f"c{name}"] = node.inline
                self.globals[name] = node.predicate
                test = template.format(v=var, c=f"c{name}", p=name)
            else:
                self.globals[name] = node.predicate
                test = f"{name}({var})"
            if node.operator.absent_matches:
                return f"({var} is M or {test})"
            return f"({var} is not M and {test})"
        if isinstance(node, Group):
            parts = [self.expr(child) for child in node.children]
            if node.kind == "not":
                return f"(not {parts[0]})"
            if not parts:
                return "False" if node.kind == "any" else "True"
            return "(" + (" or " if node.kind == "any" else " and ").join(parts) + ")"
        if isinstance(node, Broken):
            return "False"
        raise TypeError(node)

    def build(self, rules: list[CompiledRule]) -> Matcher:
        inline: list[str] = []
        buckets: dict[str, dict[str, list[str]]] = {}  # guard key -> value -> rule tests
        for index, rule in enumerate(rules):
            if rule.broken or rule.per_source:
                continue
            condition = " and ".join(self.expr(node) for node in rule.conditions.nodes) or "True"
            test = f"if {condition}: h({index})"
            guard = _guard(rule)
            if guard is None:
                inline.append(test)
            else:
                for value in guard[1]:
                    buckets.setdefault(guard[0], {}).setdefault(value, []).append(test)
        self.globals["K"] = tuple(self.keys)
        dispatch = [line for key, by_value in buckets.items() for line in self._bucket(key, by_value)]
        loads = [f"    {name} = g(K[{i}], M)" for i, name in enumerate(self.keys.values())]
        source = "\n".join(["def match(L):", "    g = L.get", "    hits = []", "    h = hits.append", *loads,
                            *(f"    {t}" for t in inline), *dispatch,
                            "    hits.sort()" if buckets else "", "    return hits"])
        return self._define(source, "match")

    def _bucket(self, key: str, by_value: dict[str, list[str]]) -> list[str]:
        """Rules guarded by `key == value` run only from the bucket of the value the request has:
        one dict lookup instead of testing every rule (the rest of each rule is still tested)."""
        functions = {}
        for value, tests in by_value.items():
            name = f"b{next(self._names)}"
            used = sorted(set(re.findall(r"\bv\d+\b", "\n".join(tests))), key=lambda v: int(v[1:]))
            index = {v: i for i, v in enumerate(self.keys.values())}
            loads = [f"    {v} = g(K[{index[v]}], M)" for v in used]
            functions[value] = self._define("\n".join([f"def {name}(L, h):", "    g = L.get", *loads,
                                                       *(f"    {t}" for t in tests)]), name)
        table = f"D{next(self._names)}"
        self.globals[table] = functions
        var = self.keys[key]
        return [f"    f = {table}.get({var}) if {var}.__class__ is str else None",
                "    if f is not None: f(L, h)"]

    def _define(self, source: str, name: str) -> Any:
        namespace: dict[str, Any] = {}
        exec(compile(source, "<rule-engine>", "exec"), self.globals, namespace)  # noqa: S102
        return namespace[name]


def _guard(rule: CompiledRule) -> tuple[str, tuple[str, ...]] | None:
    """A top-level `eq` / `in` over strings (exact case) that every match of the rule needs."""
    for node in rule.conditions.nodes:
        if not isinstance(node, Leaf) or node.inline is None or node.operator.absent_matches:
            continue
        constant = node.inline[1]
        if node.operator.name == "eq" and isinstance(constant, str):
            return node.key, (constant,)
        if node.operator.name == "in" and isinstance(constant, frozenset) and constant:
            return node.key, tuple(sorted(constant))
    return None


def compile_engine(engine: RuleEngine) -> CompiledEngine:
    compiled = [
        CompiledRule(rule, _rule_id(rule, i), i, compile_conditions(rule.when),
                     ref=f"{engine.id or ''}/{_rule_id(rule, i)}")
        for i, rule in enumerate(engine.rules)
    ]
    compiled.sort(key=lambda r: (-_priority(r.rule), r.position))
    emitter = _Emitter()
    matcher = emitter.build(compiled)
    return CompiledEngine(
        id=engine.id or "", enabled=engine.enabled is not False, rules=compiled, matcher=matcher,
        engine=engine, keys=list(emitter.keys),
    )


def pin_compiled() -> None:
    """Take the compiled engines out of the cyclic collector's way.

    Compiled engines (closures, generated functions, their globals) live as long as a workspace
    version, but the collector re-walks every one of them each few thousand allocations: on a
    17,400-rule workspace that was ~40% of evaluation time. Collect what is garbage now (older
    versions), then freeze the survivors. Call after (re)compiling a workspace, not per request.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
