"""Trace programs (trace.py) in the compile cache, beside their engines' entries (rules/cache.py).

A restored engine (persist.py) answers `explain: "none"` from its entry alone, but a trace answer
needs the engine's trace program: building it from the rule file (parse, structure, compile every
condition, then generate and compile the per-condition code) was most of a first `"matched"` or
`"all"` answer after start. So a program, once built, is stored: per distinct condition its slot
(kind, templates, variable, children, expression), per rule its slots and templates, the lookup
keys, the emitter's constants and how each predicate is made again (persist.py's deferred
stand-ins), and the compiled code of each generated function made so far. A function made later
(the first `"all"` of an engine whose entry has only `"matched"`'s) writes the entry again.

The entry's key is derived from its engine's, which covers the file's bytes and name, the package
version, Python's magic number and every source of this package's `rules` (this file included):
an edited file, or another version of the code, never finds it. It is read, checked and written as
engine entries are (atomic; a truncated, corrupt or foreign entry is a miss: the program is built
from the rules and the entry written again). Entries are written on first use of a trace, never
while compiling: a workspace whose clients only ask for `"none"` pays nothing for them. A
long-lived loader hands the writing (marshalling and the file writes: ~27 MB on `large`, 0.2-0.4 s)
to its background compiler (background.py `write`): the answer is sent first, the entries follow
when no request runs, and closing the loader finishes them. A function's entry is its code
object, taken when the program is told; the program's entry is taken by the writer from the
program as it is then (`program_parts`: its expressions written under its lock, its globals
copied in C), which later requests only extend with what an entry leaves out (templates,
functions) or may hold (the layout key, constants of expressions written meanwhile).
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import re
import sys
from collections.abc import Callable
from functools import partial
from types import CodeType
from typing import Any

from .cache import CompileCache
from .engine import CompiledEngine
from .lookup import shared
from .persist import _Deferred, stored_globals
from .trace import TraceProgram, _Slot

logger = logging.getLogger(__name__)

FORMAT = "trace/1"
_TEMPLATE = re.compile(r"[PABUT]\d+")  # the templates `TraceProgram.templates` puts in the globals


def trace_key(engine_key: str, part: str = "") -> str:
    """The key of the trace program (`part` ""), or of one of its functions' code, of the engine
    stored under `engine_key`."""
    return hashlib.sha256(b"trace\0" + part.encode() + b"\0" + bytes.fromhex(engine_key)).hexdigest()


class KeptTrace:
    """Where one engine version's trace program is kept (`CompiledEngine.kept_trace`): an entry for
    the program, one per generated function's code (a `"matched"` answer reads only its own)."""

    __slots__ = ("cache", "engine_key", "_stored", "writer")

    def __init__(self, cache: CompileCache, engine_key: str,
                 writer: Callable[[Callable[[], None]], None] | None = None) -> None:
        """`writer`: runs a write later, off the request path (background.py `write`); None: at once."""
        self.cache, self.engine_key, self.writer = cache, engine_key, writer
        self._stored: str | None | bool = False  # the layout key the program's entry holds, once read or written

    def stored(self) -> bool:
        """Whether the program has an entry (one `stat`; it may still turn out unusable)."""
        return self.cache.path(trace_key(self.engine_key)).is_file()

    def has_code(self, name: str) -> bool:
        """Whether the code of the function `name` has an entry (one `stat`)."""
        return self.cache.path(trace_key(self.engine_key, name)).is_file()

    def restore(self, engine: CompiledEngine) -> TraceProgram | None:
        """The stored program (its functions' code read when first called); None when there is
        none or none usable: the caller builds it."""
        key = trace_key(self.engine_key)
        payload = self.cache.get(key)
        if payload is None:
            return None
        try:
            made = restore_program(payload, engine)
        except Exception as exc:  # noqa: BLE001 (an entry that is not one: built again, and replaced)
            logger.info("compile cache: trace entry %s unusable (%s)", key, exc)
            return None
        made.kept, self._stored = self, made.layout_key
        return made

    def code(self, name: str) -> CodeType | None:
        """The stored code of the function `name`, or None (absent, unusable: compiled again)."""
        payload = self.cache.get(trace_key(self.engine_key, name))
        try:
            form, code = marshal.loads(payload) if payload is not None else (None, None)  # noqa: S302
        except Exception:  # noqa: BLE001
            form = code = None
        return code if form == FORMAT and isinstance(code, CodeType) else None

    def store(self, made: TraceProgram, name: str | None) -> None:
        """Store the program when its entry lacks what it now knows, and the code of `name`."""
        writes: list[tuple[str, Any]] = []  # (key, what the entry marshals, or the program to take it from)
        if self._stored is False or (made.layout_key is not None and self._stored != made.layout_key):
            writes.append((trace_key(self.engine_key), made))
            self._stored = made.layout_key
        if name is not None:
            writes.append((trace_key(self.engine_key, name), (FORMAT, made.codes[name])))
        if self.writer is None:
            self._write(writes)
        else:
            self.writer(partial(self._write, writes))

    def _write(self, writes: list[tuple[str, Any]]) -> None:
        for key, parts in writes:
            try:
                payload = marshal.dumps(program_parts(parts) if isinstance(parts, TraceProgram) else parts)
            except ValueError:  # "unmarshallable object": the program's, so no entries (built again)
                return
            self.cache.put(key, payload)


def program_parts(made: TraceProgram) -> tuple[Any, ...]:
    """What the entry that restores `made` (without its functions' code) marshals, taken now: its
    expressions written (once, under the program's lock), its globals copied in C (no other
    thread runs meanwhile), then filtered. Called by the writer, off the request path."""
    slots = list(made.expressions())
    emitter = made._emitter
    constants, recipes = stored_globals(  # (exec adds the builtins)
        emitter.globals.copy(), emitter.recipes.copy(),
        lambda name: name in ("M", "__builtins__") or _TEMPLATE.fullmatch(name) is not None)
    parts = [(slot.kind, slot.absent, slot.present, slot.key, slot.children, slot.expression) for slot in slots]
    return FORMAT, parts, list(made.rules), list(made.keys), constants, recipes, made.layout_key


def restore_program(payload: bytes, engine: CompiledEngine) -> TraceProgram:
    """The program an entry describes, for `engine` (the version it was made from). Raises
    (ValueError, TypeError, …) on an entry that is not one."""
    form, slots, rules, keys, constants, recipes, layout_key = marshal.loads(payload)  # noqa: S302 (trusted)
    if form != FORMAT or len(rules) != len(engine.rules) or not isinstance(layout_key, str | None):
        raise ValueError("not a trace-program entry of this engine")
    made = TraceProgram(None)
    emitter = made._emitter
    namespace = emitter.globals
    for name, value in constants.items():
        namespace[name] = {shared(k): v for k, v in value.items()} if isinstance(value, dict) else shared(value)
    for name, (inline, recipe) in recipes.items():
        recipe = tuple(recipe)
        namespace[name] = _Deferred(namespace, name, recipe, bool(inline))
        emitter.recipes[name[1:] if inline else name] = recipe
    emitter.keys = {sys.intern(key): f"v{i}" for i, key in enumerate(keys)}
    made.keys = list(emitter.keys)
    made._slots[:] = [_Slot(i, kind, absent, present, None if key is None else sys.intern(key), tuple(children),
                            expression)
                      for i, (kind, absent, present, key, children, expression) in enumerate(slots)]
    made.rules = [(tuple(top), unmatched, matched) for top, unmatched, matched in rules]
    made.layout_key = layout_key
    return made
