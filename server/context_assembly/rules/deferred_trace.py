"""A first trace answered while the trace programs are built in the background.

A trace answer (`explain` "all" / "matched", full format) needs each engine's trace program
(trace.py) and that mode's generated function. Reading kept ones from the compile cache is quick,
but building them is not: ~1.4 s of CPU on 17,400 rules, which a cold start's first traced answer
used to pay (~1.3 s for the functions alone where compact traces had kept only the programs). The
plain path gives the same JSON in ~0.15 s on those rules (plain_trace.py;
tests/rules/test_deferred_trace.py checks they agree). So a long-lived loader's `TraceBuilder`
takes engines whose programs or functions would have to be built for at least `from_rules` rules:
it queues one job per engine on the background compiler and the request is answered from the
plain path; later requests use each program once it is there. Fewer rules (an edited file, a small
workspace) are built on the request path, as before. The compact format builds its programs on
the request path (it packs against their layouts) but not, with as many rules, the functions that
compute its bits (mode "bits", ~0.5 s of compiling on 17,400 rules): those are queued the same
way, and meanwhile its outcomes come from the programs without generated code (bitmap.py).
"""

from __future__ import annotations

import weakref
from functools import partial

from ..collector import paused
from .background import BackgroundCompiler
from .bitmap import QUEUED, build_bits
from .engine import CompiledEngine
from .trace import TraceProgram, program


class TraceBuilder:
    """Builds trace programs in the background for first traces with many rules to build from."""

    def __init__(self, compiler: BackgroundCompiler, from_rules: int) -> None:
        self.compiler = compiler
        self.from_rules = from_rules
        # engine -> the modes whose function a queued job prepares
        self._queued: weakref.WeakKeyDictionary[CompiledEngine, set[str]] = weakref.WeakKeyDictionary()

    def later(self, engines: list[CompiledEngine], mode: str) -> bool:
        """True: these engines' programs are (being) built in the background, with the function
        `explain` `mode` answers with: answer from the plain path; False: build them now (few rules
        to build from, or kept programs to read). Mode "bits": the compact trace's bit functions of
        programs just built here; each one queued is `QUEUED` until its job made it."""
        if mode == "bits":
            return self._later_bits(engines)
        to_build = [e for e in engines if _costly(e, mode)]
        if sum(len(e.rules) for e in to_build) < self.from_rules:
            return False
        fresh = [e for e in to_build if mode not in self._queued.get(e, ())]
        for engine in fresh:
            self._queued.setdefault(engine, set()).add(mode)
        # kept by `close`: each program's entry is written on its first use and a later start
        # reads it, instead of building every program on its request path
        self.compiler.submit((partial(_build, e, mode) for e in fresh), keep=True)
        return True

    def _later_bits(self, engines: list[CompiledEngine]) -> bool:
        """The bit functions of programs built here (not read from the cache): one job per program,
        bound to it (a program another request built meanwhile gets its own), `QUEUED` until done."""
        made = [e.trace for e in engines if isinstance(e.trace, TraceProgram) and e.trace.bits is None
                and e.trace.nodes]
        if sum(len(m.rules) for m in made) < self.from_rules:
            return False
        for queued in made:
            queued.bits = QUEUED
        self.compiler.submit((partial(_build_bits, m) for m in made), keep=True)
        return True


def _costly(engine: CompiledEngine, mode: str) -> bool:
    """Whether answering `mode` from the engine's program compiles anything: the program to build
    (none kept), or its mode's function to compile (its code not kept: a program made or kept by
    a compact trace, which reads neither function)."""
    made, name = engine.trace, TraceProgram.FUNCTIONS[mode]
    if isinstance(made, TraceProgram):
        return not made.prepared(mode) and name not in made.codes \
            and (made.kept is None or not made.kept.has_code(name))
    kept = engine.kept_trace
    return kept is None or not kept.stored() or not kept.has_code(name)


def _build(engine: CompiledEngine, mode: str) -> None:
    """One engine's program and the function `mode` answers with, its entries kept as a request's
    would be (a job of the background compiler, which freezes what its jobs made)."""
    with paused():
        program(engine).prepare(mode)


def _build_bits(made: TraceProgram) -> None:
    """A program's bit functions (their code kept as a request's would be)."""
    with paused():
        build_bits(made)
