"""Several engines' matchers fused into one generated function, each variable loaded once.

Every engine's matcher starts by loading the variables it reads (a subscript and an is-a-str test
each): on the bench's 2,100 rules in 42 engines that was a quarter of matching, the same 29
variables loaded 42 times. A fused function loads them once and then runs each engine's tests
as that engine's matcher has them, giving the hits per engine: in process 145 against 115 µs a
request there, 1.15 against 0.99 ms on 17,400 rules in 174 engines. The rules a guard dispatches
(engine.py) are merged across the group's engines: one table lookup per guard variable serves
them all, where each engine looked the variable up in a table of its own (~480 lookups a `medium`
request; matching 105 → 78 µs there, 0.89 → 0.75 ms on `large`; `_Emitter.build_fused`).

Engines are fused in consecutive groups of at most `CHUNK_RULES` rules, so that compiling one
group (~30 ms; with many rules on the background compiler, after the engines' own matchers) holds
the interpreter only briefly. A reload fuses again only the groups whose engines changed. Writing
a group's source reads its rules' compiled conditions, which an engine restored from the compile
cache only has once its file is parsed again; so each group is kept in the cache too, under a key
made of its engines' keys (which name the compiler's own sources): a warm start reads the groups
as it reads the engines. Tests check on arbitrary engines and requests that fused and separate
matchers give the same hits.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import random
from collections.abc import Callable, Iterator
from types import CodeType

from .cache import CompileCache
from .engine import CompiledEngine, _Emitter, define_function
from .lookup import Lookup
from .persist import namespace_of, stored_globals, used_names

logger = logging.getLogger(__name__)

FORMAT = "fused/1"
CHUNK_RULES = 600  # rules per fused function at most (an engine with more is a group of its own)

FusedMatcher = Callable[[Lookup], list[list[int]]]  # complete values -> each engine's hits, in order
Fused = list[tuple[FusedMatcher, list[CompiledEngine]]]


def fuse(engines: list[CompiledEngine], store: CompileCache | None = None, before: Fused | None = None) -> Fused:
    """The engines' matchers fused in groups: a group of `before` (the previous version's) made of
    the very same engines, or read from `store` when kept there, else written, compiled and kept.
    Every engine must have its generated matcher."""
    # by the engines' ids: `before` keeps its engines alive, so equal ids are the same engines
    same = {tuple(map(id, group)): function for function, group in before or []}
    todo = list(groups(engines))
    functions: list[FusedMatcher | None] = [same.get(tuple(map(id, group))) for group in todo]
    # the groups left, in an order of its own: a swarm's sidecars fusing at once on a cold cache
    # then make different groups first, and read the others' from the store
    for at in random.sample(range(len(todo)), len(todo)):
        if functions[at] is None:
            functions[at] = _made(todo[at], store)
    made: Fused = []
    for function, group in zip(functions, todo, strict=True):
        assert function is not None
        made.append((function, group))
    return made


def _made(group: list[CompiledEngine], store: CompileCache | None) -> FusedMatcher:
    """The group's fused matcher, read from `store` when kept there, else written, compiled and kept."""
    key = group_key(group) if store is not None else None
    function = _restore(store.get(key)) if store is not None and key is not None else None
    if function is None:
        emitter = _Emitter()
        function = emitter.build_fused([engine.rules for engine in group])
        if store is not None and key is not None and (entry := _entry(emitter)) is not None:
            store.put(key, entry)
    return function


def groups(engines: list[CompiledEngine]) -> Iterator[list[CompiledEngine]]:
    """Consecutive engines, at most `CHUNK_RULES` rules a group (at least one engine each)."""
    group: list[CompiledEngine] = []
    size = 0
    for engine in engines:
        if group and size + len(engine.rules) > CHUNK_RULES:
            yield group
            group, size = [], 0
        group.append(engine)
        size += len(engine.rules)
    if group:
        yield group


def group_key(group: list[CompiledEngine]) -> str | None:
    """A group's key: its engines' compile-cache keys in order (None when one has none: an
    engine made from the context-rules files, or one whose file had problems)."""
    kept = [engine.kept_trace for engine in group]
    if any(where is None for where in kept):
        return None
    keys = "\0".join(where.engine_key for where in kept if where is not None)
    return hashlib.sha256(FORMAT.encode() + b"\0" + keys.encode()).hexdigest()


def _entry(emitter: _Emitter) -> bytes | None:
    code = emitter.code
    assert code is not None
    used = used_names(code)
    constants, recipes = stored_globals(emitter.globals, emitter.recipes, lambda name: name not in used or name == "M")
    try:
        return marshal.dumps((FORMAT, code, constants, recipes))
    except ValueError:  # "unmarshallable object": a constant from a rule file that is not plain JSON
        return None


def _restore(payload: bytes | None) -> FusedMatcher | None:
    if payload is None:
        return None
    try:
        form, code, constants, recipes = marshal.loads(payload)  # noqa: S302 (trusted as __pycache__ is)
        if form != FORMAT or not isinstance(code, CodeType):
            raise ValueError("not a fused-matcher entry")
        function: FusedMatcher = define_function(code, namespace_of(constants, recipes), "match")
    except Exception as exc:  # noqa: BLE001 (an entry that is not one: written again)
        logger.info("compile cache: fused entry unusable (%s)", exc)
        return None
    return function
