"""A compiled engine as a compile-cache entry, and back (rules/cache.py stores the bytes).

What compiling costs is kept: the matcher's code object (marshal, as `__pycache__` keeps
modules), its constants, and per rule what the fast path reads (ids, memories, flags, errors,
name, priority). What a restored engine does not need to answer a request is made when first
read: the operators' predicates (one deferred stand-in per predicate the matcher calls, which puts
the real one in its place on first call), and the structured rules with their compiled
conditions (structured from the file and compiled, all rules of the engine at once, the first
time any rule's `rule` or `conditions` is read: the trace, per-source rules, actions). A restored
engine answers exactly as a freshly compiled one: tests compare them on arbitrary rule files.
"""

from __future__ import annotations

import builtins
import marshal
import threading
from collections.abc import Callable
from types import CodeType
from typing import Any

from ..model.rules import RuleEngine
from ..registry.operators import lookup_operator
from ..registry.values import MISSING
from .compile import compile_conditions
from .engine import (
    CompiledEngine,
    CompiledRule,
    Matcher,
    _Emitter,
    compile_with_emitter,
    define_function,
    placeholders,
)
from .lookup import shared

FORMAT = "engine/1"


class _Deferred:
    """A predicate made on first call, which then takes this stand-in's place in the matcher's globals."""

    __slots__ = ("namespace", "name", "recipe", "inline")

    def __init__(self, namespace: dict[str, Any], name: str, recipe: tuple[str, bool, Any, Any],
                 inline: bool) -> None:
        self.namespace, self.name, self.recipe, self.inline = namespace, name, recipe, inline

    def __call__(self, actual: Any) -> Any:
        operator, has_value, value, ignore_case = self.recipe
        found = lookup_operator(operator)
        assert found is not None, f"an entry names the unknown operator {operator!r}"
        value = value if has_value else MISSING
        if self.inline:  # a callable constant of the inline test (regex: the compiled search)
            made = found.inline(value, found.folds(ignore_case))
            assert made is not None and callable(made[1])
            predicate = made[1]
        else:
            predicate = found.predicate(value, ignore_case)
        self.namespace[self.name] = predicate
        return predicate(actual)

    # an inline test's constant the generated code subscripts (regex: patterns.Search)
    __getitem__ = __call__


def compile_entry(engine: RuleEngine) -> tuple[CompiledEngine, bytes | None]:
    """Compile as `compile_engine` does, and the cache entry that restores the same engine (None
    when a value cannot be stored)."""
    compiled, emitter = compile_with_emitter(engine)
    return compiled, entry_of(compiled, emitter)


def stored_globals(namespace: dict[str, Any], made: dict[str, Any],
                   skip: Callable[[str], bool]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The generated code's globals (an emitter's `globals`, with its `recipes` in `made`) as an
    entry keeps them (but those `skip` names): constants as they are, and how to make each
    operator's predicate (or an inline test's callable constant) again, since functions cannot be
    marshalled."""
    constants: dict[str, Any] = {}
    recipes: dict[str, Any] = {}
    for name, value in namespace.items():
        if skip(name):
            continue
        if name in made:  # an operator's predicate
            recipes[name] = (False, made[name])
        elif callable(value) and name[1:] in made:  # an inline test's callable constant
            recipes[name] = (True, made[name[1:]])
        else:
            constants[name] = value
    return constants, recipes


def entry_of(compiled: CompiledEngine, emitter: _Emitter) -> bytes | None:
    """The cache entry of an engine whose matcher `emitter` wrote (None when a value cannot be stored)."""
    code = emitter.code
    assert code is not None
    used = used_names(code)
    constants, recipes = stored_globals(emitter.globals, emitter.recipes, lambda name: name not in used or name == "M")
    rules = [(r.rule_id, r.position, r.ref, r.memories, r.excluded, r.plain, r.broken, r.per_source, r.error,
              r.name, r.priority) for r in compiled.rules]
    try:
        return marshal.dumps((FORMAT, compiled.id, compiled.enabled, code, constants, recipes,
                              list(emitter.keys), rules))
    except ValueError:  # "unmarshallable object": JSON values never are, but a structured one could be
        return None


def used_names(code: CodeType) -> set[str]:
    """The global names a module's code and the functions it defines read (as names, or as
    constants: `engine.constant`)."""
    names = set(code.co_names) | placeholders(code)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= used_names(constant)
    return names


def restore_engine(payload: bytes, source: Callable[[], RuleEngine]) -> CompiledEngine:
    """The engine an entry describes; `source` gives the structured engine when first needed.
    Raises (ValueError, TypeError, …) on an entry that is not one: the caller compiles instead."""
    engine_id, enabled, code, constants, recipes, keys, rules = _fields(payload)
    matcher = define_function(code, namespace_of(constants, recipes), "match")
    source = _once(source)
    restored: list[CompiledRule] = []
    load = _loader(restored, source)
    for rule_id, position, ref, memories, excluded, plain, broken, per_source, error, name, priority in rules:
        restored.append(CompiledRule(
            None, rule_id, position, None, ref=ref, memories=tuple(map(shared, memories)), plain=plain,
            broken=broken, per_source=per_source, error=error, name=name, priority=priority,
            excluded=tuple(excluded), load=load))
    return CompiledEngine(id=engine_id, enabled=enabled, rules=restored, matcher=matcher, engine=None,
                          keys=[shared(key) for key in keys], source=source)


def restore_matcher(payload: bytes, compiled: CompiledEngine) -> Matcher | None:
    """The generated matcher an entry holds for `compiled`'s file version (the entry another
    process wrote for the same bytes, while this one's waited to compile), when the entry lists
    the same rules in the same order (the matcher answers their indexes); None otherwise. Raises
    on an entry that is not one, as `restore_engine` does."""
    engine_id, _, code, constants, recipes, _, rules = _fields(payload)
    if engine_id != compiled.id:
        raise ValueError("not a compiled-engine entry")
    if [(rule[0], rule[1]) for rule in rules] != [(rule.rule_id, rule.position) for rule in compiled.rules]:
        return None
    return define_function(code, namespace_of(constants, recipes), "match")


def _fields(payload: bytes) -> tuple[Any, ...]:
    """An entry's fields after its format (`entry_of`); ValueError when it is not one."""
    made = marshal.loads(payload)  # noqa: S302 (the cache folder is trusted as __pycache__ is)
    form, engine_id, _, code, *_ = made
    if form != FORMAT or not isinstance(code, CodeType) or not isinstance(engine_id, str):
        raise ValueError("not a compiled-engine entry")
    return tuple(made[1:])


def namespace_of(constants: dict[str, Any], recipes: dict[str, Any]) -> dict[str, Any]:
    """The globals of restored generated code: its constants (strings interned again) and a
    deferred stand-in per predicate (`stored_globals` wrote both)."""
    namespace: dict[str, Any] = {"M": MISSING, "__builtins__": builtins}
    for name, value in constants.items():
        namespace[name] = {shared(k): v for k, v in value.items()} if isinstance(value, dict) else shared(value)
    for name, (inline, recipe) in recipes.items():
        namespace[name] = _Deferred(namespace, name, tuple(recipe), bool(inline))
    return namespace


def _once(make: Callable[[], RuleEngine]) -> Callable[[], RuleEngine]:
    """`make`, called once: the engine and its rules read the same structured object."""
    made: list[RuleEngine] = []

    def once() -> RuleEngine:
        if not made:
            made.append(make())
        return made[0]

    return once


def _loader(rules: list[CompiledRule], source: Callable[[], RuleEngine]) -> Callable[[], None]:
    """Structures the engine and compiles every rule's conditions, once (whichever thread asks first)."""
    lock = threading.Lock()

    def load() -> None:
        with lock:
            if rules and rules[0]._rule is not None:
                return
            structured = source().rules
            for rule in rules:
                made = structured[rule.position]
                rule._conditions = compile_conditions(made.when)
                rule._rule = made

    return load
