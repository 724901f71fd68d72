"""Compiled rule engines and the fast matcher.

Each engine compiles to one generated Python function that loads every field it reads once and
tests its rules in evaluation order with short-circuit `and`/`or`, calling the operators'
predicates. Rules that need a field to equal one of some strings run only in the block of the
value the request has; within a rule the likely-false tests run first. The generated source names
only indexes into tuples and globals built here, never text from a rule file, so a file cannot
inject code. The explaining path (`CompiledConditions.explain`) walks the same compiled tree and
must agree with it; tests check that on arbitrary input.
"""

from __future__ import annotations

import gc
import itertools
import re
import sys
import warnings
from collections.abc import Callable
from types import CodeType
from typing import Any

from attrs import define, field

from ..model.evaluation import RuleResult
from ..model.rules import Rule, RuleEngine
from ..registry.values import MISSING
from .compile import Broken, CompiledConditions, Group, Leaf, LeafMemo, Node, compile_conditions
from .lookup import Lookup, complete, shared

# Takes a lookup holding every key of the engine's `keys` (absent ones as MISSING, see
# `complete`); gives the indexes of the matching rules, in order.
Matcher = Callable[[Lookup], list[int]]


@define(eq=False)
class CompiledRule:
    _rule: Rule | None  # None until first read when restored from the compile cache (persist.py)
    rule_id: str
    position: int  # index in the file, for tie order
    _conditions: CompiledConditions | None
    # Derived once, because the hot path touches them for every matched rule:
    ref: str = ""  # "engine/rule", as decisions name it
    memories: tuple[str, ...] = ()
    plain: bool = True  # only adds memories: no excludes, caps, priorities or boosts
    broken: bool = False
    per_source: bool = False
    error: str | None = None
    name: str | None = None
    priority: Any = 0
    excluded: tuple[str, ...] = ()  # exclude_memories, when not plain
    # restored: makes `_rule` and `_conditions` of every rule of the engine (structure, compile)
    _load: Callable[[], None] | None = None
    # trace.py's dicts for this rule (unmatched, matched), made on first use (`rule_templates`)
    templates: Any = field(default=None, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self._rule is None or self._conditions is None:
            return  # restored: the derived fields were given
        then = self._rule.then
        self.memories = tuple(map(shared, then.add_memories))
        self.plain = not (then.exclude_memories or then.caps or then.set_priority or then.boost)
        self.broken = bool(self._conditions.errors)
        self.per_source = self._conditions.per_source
        self.error = "; ".join(self._conditions.errors) or None
        self.name, self.priority = self._rule.name, self._rule.priority
        self.excluded = () if self.plain else tuple(then.exclude_memories)

    @property
    def rule(self) -> Rule:
        if self._rule is None:
            self._made()
        return self._rule  # type: ignore[return-value]

    @property
    def conditions(self) -> CompiledConditions:
        if self._conditions is None:
            self._made()
        return self._conditions  # type: ignore[return-value]

    def _made(self) -> None:
        assert self._load is not None, "a restored rule without its loader"
        self._load()


def rule_result(rule: CompiledRule, matched: bool, conditions: list) -> RuleResult:
    return RuleResult(
        rule.rule_id, matched, rule.name, rule.priority, conditions,
        list(rule.memories) if matched else [], list(rule.excluded) if matched else [],
        rule.per_source, rule.error,
    )


@define(eq=False)
class CompiledEngine:
    id: str
    enabled: bool
    rules: list[CompiledRule]  # evaluation order: priority descending, ties in file order
    matcher: Matcher
    _engine: RuleEngine | None  # None until first read when restored (persist.py)
    keys: list[str] = field(factory=list)  # every lookup key a normal (not per-source) rule reads
    plain: bool = True  # every rule the matcher can return only adds memories
    # Indexed like `rules`: the rule, its result when it matched (without the per-condition trace;
    # shared, read-only) and its memories, so the hot path maps hit indexes to them at C speed.
    rule_at: Callable[[int], CompiledRule] = field(init=False)
    matched_result_at: Callable[[int], RuleResult] = field(init=False)
    rule_memories: tuple[tuple[str, ...], ...] = field(init=False)
    # trace.py's per-engine state, made on first use: the matched templates (explain "none") or
    # the TraceProgram (explain "all" / "matched")
    trace: Any = field(default=None, init=False)
    kept_trace: Any = field(default=None, init=False)  # trace_cache.KeptTrace: its program's cache entry
    _source: Callable[[], RuleEngine] | None = None  # restored: the structured engine, on demand
    generated: bool = True  # False while `matcher` is the interpreted one (provisional_engine)

    def __attrs_post_init__(self) -> None:
        self.plain = all(rule.plain for rule in self.rules if not (rule.broken or rule.per_source))
        self.rule_at = tuple(self.rules).__getitem__
        self.matched_result_at = self._first_result_at
        self.rule_memories = tuple(rule.memories for rule in self.rules)

    def _first_result_at(self, index: int) -> RuleResult:
        """Builds the matched results on first use (the assembly's hot path; a first `evaluateRules`
        answers from the trace's templates instead)."""
        self.matched_result_at = tuple(rule_result(rule, True, []) for rule in self.rules).__getitem__
        return self.matched_result_at(index)

    @property
    def engine(self) -> RuleEngine:
        if self._engine is None:
            assert self._source is not None, "a restored engine without its source"
            self._engine = self._source()
        return self._engine

    def match(self, lookup: Lookup) -> list[CompiledRule]:
        return list(map(self.rule_at, self.matcher(complete(lookup, self.keys))))


def _rule_id(rule: Rule, position: int) -> str:
    return rule.id if isinstance(rule.id, str) and rule.id else f"#{position}"


def _priority(rule: Rule) -> int | float:
    """The rule's priority as it sorts: exact (a 400-digit integer made `float()` overflow and every
    method of the workspace fail), 0 where it is no number (or NaN, which sorts nowhere)."""
    p = rule.priority
    if isinstance(p, bool) or not isinstance(p, int | float) or p != p:
        return 0
    return p


class _Emitter:
    """Writes one engine's matcher source; predicates, constants and keys become globals by index."""

    def __init__(self) -> None:
        self.globals: dict[str, Any] = {"M": MISSING}
        # how each predicate global is made again: (operator, has a value, value, ignore_case)
        self.recipes: dict[str, tuple[str, bool, Any, Any]] = {}
        self.keys: dict[str, str] = {}  # lookup key -> local variable
        self.code: CodeType | None = None  # the last function's module, compiled
        self._names = itertools.count()

    def var(self, key: str) -> str:
        if key not in self.keys:
            self.keys[key] = name = f"v{len(self.keys)}"
            self.globals[f"k{name}"] = sys.intern(key)
        return self.keys[key]

    def expr(self, node: Node) -> str:
        if isinstance(node, Leaf):
            var, name = self.var(node.key), f"p{next(self._names)}"
            self.globals[name] = node.predicate
            value = node.source.value
            self.recipes[name] = (node.operator.name, value is not MISSING, None if value is MISSING else value,
                                  node.source.ignore_case)
            if node.inline is None:
                test = f"{name}({var})"
            else:
                template, value = node.inline
                made = self.globals[f"c{name}"] = shared(value)
                read = constant(f"c{name}") if made.__class__ in _PLAIN else f"c{name}"
                test = template.format(v=var, s=f"s{var[1:]}", n=f"n{var[1:]}", c=read, p=name)
                if template.startswith("not ({s} and " if node.operator.absent_matches else "({s} and "):
                    return test  # it answers an absent value itself
            missing = constant("M")
            if test in ("True", "False"):  # presence alone decides (exists, not_exists)
                if (test == "True") == node.operator.absent_matches:
                    return test
                return f"({var} is {'not ' if test == 'True' else ''}{missing})"
            if node.operator.absent_matches:
                return f"({var} is {missing} or {test})"
            return f"({var} is not {missing} and {test})"
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
        inline, buckets = self._parts(rules, "h")
        loaded = _needs(inline, buckets)
        body = [*self._loads(loaded, set()), *inline, *self._dispatches(buckets, loaded)]
        source = "\n".join(["def match(V):", "    hits = []", "    h = hits.append",
                            *(f"    {line}" for line in body), "    hits.sort()" if buckets else "", "    return hits"])
        return self._define(source, "match")

    def build_fused(self, engines: list[list[CompiledRule]]) -> Callable[[Lookup], list[list[int]]]:
        """Several engines' matchers as one function (fused.py): each variable loaded once for all
        of them, then every engine's unguarded tests, then one dispatch per guard variable for all
        the engines (a block holds every engine's tests for that value, each appending to its own
        engine's hits); the hits per engine, each sorted into its rules' order."""
        parts = [self._parts(rules, f"a{n}") for n, rules in enumerate(engines)]
        merged: dict[str, dict[str, list[str]]] = {}
        for _, buckets in parts:
            for var, by_value in buckets.items():
                into = merged.setdefault(var, {})
                for value, tests in by_value.items():
                    into.setdefault(value, []).extend(tests)
        inline = [test for tests, _ in parts for test in tests]
        loaded = _needs(inline, merged)
        body = [*self._loads(loaded, set())]
        body += [line for n in range(len(parts)) for line in (f"H{n} = []", f"a{n} = H{n}.append")]
        body += [*inline, *self._dispatches(merged, loaded)]
        body += [f"H{n}.sort()" for n, (_, buckets) in enumerate(parts) if buckets]
        body.append(f"return [{''.join(f'H{n}, ' for n in range(len(parts)))}]")
        source = "\n".join(["def match(V):", *(f"    {line}" for line in body)])
        return self._define(source, "match")

    def _parts(self, rules: list[CompiledRule], append: str) -> tuple[list[str], dict[str, dict[str, list[str]]]]:
        """The tests of the rules no guard dispatches, and per guard variable and value the tests of
        the rules in that value's block; a test calls `append` with its rule's index."""
        inline: list[str] = []
        buckets: dict[str, dict[str, list[str]]] = {}  # guard key -> value -> rule tests
        for index, rule in enumerate(rules):
            if rule.broken or rule.per_source:
                continue
            nodes = sorted(rule.conditions.nodes, key=_cost)
            guard = _guard(nodes)
            if guard is None:
                inline.append(self._test(nodes, append, index))
                continue
            leaf, values = guard
            # In the bucket of a value the guard holds: it is left out of the test.
            test = self._test([node for node in nodes if node is not leaf], append, index)
            for value in values:
                buckets.setdefault(self.var(leaf.key), {}).setdefault(value, []).append(test)
        return inline, buckets

    def _dispatches(self, buckets: dict[str, dict[str, list[str]]], loaded: set[str]) -> list[str]:
        return [line for var, by_value in buckets.items() for line in self._dispatch(var, by_value, loaded)]

    def _test(self, nodes: list[Node], append: str, index: int) -> str:
        return f"if {' and '.join(self.expr(node) for node in nodes) or 'True'}: {append}({index})"

    def _loads(self, names: set[str], have: set[str]) -> list[str]:
        """Lines that define the variables `names` lists (`v3`, and its flags `s3`, `n3`: see
        FLAGS) but `have` does not."""
        lines = []
        for var in self.keys.values():
            flags = [(f"{kind}{var[1:]}", test) for kind, test in FLAGS.items()]
            if (var in names or any(flag in names for flag, _ in flags)) and var not in have:
                lines.append(f"{var} = V[k{var}]")
            lines += [f"{flag} = {test.format(v=var)}" for flag, test in flags if flag in names and flag not in have]
        return lines

    def _dispatch(self, var: str, by_value: dict[str, list[str]], loaded: set[str]) -> list[str]:
        """Rules guarded by `key == value` run only in the block of the value the request has:
        a dict lookup gives the block's number, a binary tree of `if`s reaches it (no call, and
        the variables stay loaded), instead of every such rule being tested."""
        table = f"D{next(self._names)}"
        self.globals[table] = {shared(value): i for i, value in enumerate(by_value)}
        blocks = [self._loads(_names(tests), loaded) + tests for tests in by_value.values()]
        return [f"b = {constant(table)}.get({var}, -1) if s{var[1:]} else -1",
                "if b >= 0:", *_tree(blocks, 0, len(blocks), "    ")]

    def _define(self, source: str, name: str) -> Any:
        self.code = compile_generated(source)
        return define_function(self.code, self.globals, name)


# Generated code reads a plain constant (the value of a test, a dispatch table, MISSING) as a
# string literal that stands for its global, which `define_function` swaps for the value: a
# constant load is 2 bytes of bytecode without cache entries, a global's load 12. With the flags
# below, the `medium` matchers' code shrank by a quarter; it is read through once per request, from
# memory when the sidecar was idle (bench/README.md, "Smaller matchers").
PLACEHOLDER = "\x00"
# A variable's flags, loaded once where a test reads them (`{s}`, `{n}` in an operator's inline
# template): is the value a str; is it a number (an int or a float, not a bool).
FLAGS = {"s": "{v}.__class__ is str", "n": "({v}.__class__ is int or {v}.__class__ is float)"}
_PLAIN = (str, int, float, bool, frozenset, tuple, bytes, dict, type(None))


def constant(name: str) -> str:
    """How generated source reads the global `name` when its value never changes (not a
    predicate, which a restored matcher's stand-in replaces in the globals on first call)."""
    return repr(PLACEHOLDER + name)


def _placeholder(value: Any) -> bool:
    return value.__class__ is str and value[:1] == PLACEHOLDER


def placeholders(code: CodeType) -> set[str]:
    """The globals a code object reads as constants (`constant`)."""
    return {c[1:] for c in code.co_consts if _placeholder(c)}


def _bound(code: CodeType, namespace: dict[str, Any]) -> CodeType:
    """`code` with each placeholder constant swapped for its value in `namespace`, nested code
    (a comprehension, a lambda) included; the same object when it has none."""
    consts = tuple(namespace[c[1:]] if _placeholder(c) else _bound(c, namespace) if isinstance(c, CodeType) else c
                   for c in code.co_consts)
    if all(new is old for new, old in zip(consts, code.co_consts, strict=True)):
        return code
    return code.replace(co_consts=consts)


def define_function(code: CodeType, namespace: dict[str, Any], name: str) -> Any:
    """The function `name` that running `code` (a module defining it) over `namespace` makes,
    each constant it reads through `constant` set to its value in `namespace`."""
    made: dict[str, Any] = {}
    exec(code, namespace, made)  # noqa: S102
    function = made[name]
    function.__code__ = _bound(function.__code__, namespace)
    return function


def compile_generated(source: str) -> CodeType:
    """Generated source as a module's code (a test `v is <constant>` is meant: no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return compile(source, "<rule-engine>", "exec")


def _needs(inline: list[str], buckets: dict[str, dict[str, list[str]]]) -> set[str]:
    """The variables a matcher loads before its tests: those its unguarded tests read, and each
    guard's value and is-a-str flag (the blocks load what only they read)."""
    return _names(inline) | set(buckets) | {f"s{var[1:]}" for var in buckets}


def _names(lines: list[str]) -> set[str]:
    """The variables generated lines read: values (`v3`) and their flags (`s3`, `n3`)."""
    return set(re.findall(r"\b[vsn]\d+\b", "\n".join(lines)))


def _tree(blocks: list[list[str]], lo: int, hi: int, indent: str) -> list[str]:
    """`if` lines that run blocks[b] for a `b` in [lo, hi), by halving the range."""
    if hi - lo == 1:
        return [indent + line for line in blocks[lo]]
    mid = (lo + hi) // 2
    return [f"{indent}if b < {mid}:", *_tree(blocks, lo, mid, indent + "    "),
            f"{indent}else:", *_tree(blocks, mid, hi, indent + "    ")]


def _cost(node: Node) -> int:
    """Test order within a rule (`and` commutes: tests are pure): each operator's `cost` from the
    registry; a nested group sits between the plain tests and the usually-true ones."""
    return node.operator.cost if isinstance(node, Leaf) else 3


def _guard(nodes: list[Node]) -> tuple[Leaf, tuple[str, ...]] | None:
    """A top-level `eq` / `in` over strings (exact case) that every match of the rule needs, and
    the values it accepts."""
    for node in nodes:
        if not isinstance(node, Leaf) or node.inline is None or node.operator.absent_matches:
            continue
        constant = node.inline[1]
        if node.operator.name == "eq" and isinstance(constant, str):
            return node, (constant,)
        if node.operator.name == "in" and isinstance(constant, frozenset) and constant:
            return node, tuple(sorted(constant))
    return None


def compile_engine(engine: RuleEngine) -> CompiledEngine:
    return compile_with_emitter(engine)[0]


def compile_with_emitter(engine: RuleEngine) -> tuple[CompiledEngine, _Emitter]:
    """The compiled engine and the emitter that wrote its matcher (what the compile cache keeps)."""
    compiled = provisional_engine(engine)
    emitter = compile_matcher(compiled)
    compiled.keys = list(emitter.keys)  # the same keys, in the order the generated code loads them
    return compiled, emitter


def provisional_engine(engine: RuleEngine, leaves: LeafMemo | None = None) -> CompiledEngine:
    """The engine with its conditions compiled but its matcher interpreted (`interpreted`): what
    compiling costs beyond this (writing and compiling the generated source, ~85% of it on a
    large workspace) is left to `compile_matcher`, which a cold start runs off the request path.
    `leaves`: leaves made before (the loader's, for every engine of a load: compile.py `LeafMemo`)."""
    rules = [
        CompiledRule(rule, _rule_id(rule, i), i, compile_conditions(rule.when, leaves),
                     ref=f"{engine.id or ''}/{_rule_id(rule, i)}")
        for i, rule in enumerate(engine.rules)
    ]
    rules.sort(key=lambda r: (-_priority(r.rule), r.position))
    matched = [rule for rule in rules if not (rule.broken or rule.per_source)]  # what the matcher tests
    keys = dict.fromkeys(key for rule in matched for key in rule.conditions.keys)
    return CompiledEngine(id=engine.id or "", enabled=engine.enabled is not False, rules=rules,
                          matcher=interpreted(rules), engine=engine, keys=list(keys), generated=False)


def interpreted(rules: list[CompiledRule]) -> Matcher:
    """The generated matcher's answer without generated code: each tested rule's compiled
    conditions walked (`holds`). Several times slower per request, but there is nothing to
    compile; tests check that both give the same indexes."""
    tests = [(index, rule.conditions.nodes) for index, rule in enumerate(rules) if not (rule.broken or rule.per_source)]

    def match(values: Lookup) -> list[int]:
        hits = []
        for index, nodes in tests:
            for node in nodes:
                if not node.holds(values):
                    break
            else:
                hits.append(index)
        return hits

    return match


def compile_matcher(compiled: CompiledEngine) -> _Emitter:
    """Generate and compile the engine's matcher and put it in place of the interpreted one (one
    attribute store: a request running meanwhile reads either, and both answer the same); the
    emitter that wrote it, for the compile cache (persist.py)."""
    emitter = _Emitter()
    matcher = emitter.build(compiled.rules)
    compiled.matcher, compiled.generated = matcher, True
    return emitter


def pin_compiled(collect: bool = True) -> None:
    """Take the compiled engines out of the cyclic collector's way.

    Compiled engines (closures, generated functions, their globals) live as long as a workspace
    version, but the collector re-walks every one of them each few thousand allocations: on a
    17,400-rule workspace that was ~40% of evaluation time. Collect what is garbage now (older
    versions), then freeze the survivors. Call after (re)compiling a workspace, not per request.
    `collect=False` (a first load, or a reload that replaced little: the loader's `_collect`)
    only freezes: a full collection of a large workspace costs its request ~0.3-0.5 s, and the
    garbage left waits, frozen, for a later one.
    """
    gc.unfreeze()
    if collect:
        gc.collect()
    gc.freeze()
