"""The compact trace's outcome bitmap (compact.py), computed per variable and kept per value.

Every leaf condition reads one variable, and its outcome is a function of that variable's value
alone (the operators' predicates are pure). So an engine's bitmap is the OR, over the variables
its conditions read, of each variable's part: the bits of that variable's conditions for the value
the request has. One generated function per engine computes each part as an integer (the
conditions' tests are the trace program's own expressions, each giving its bit or 0) and keeps it
per value: a value seen again costs one dict lookup instead of one test per condition (a str, or
the variable absent, is its own key; a number is keyed with its type, as 1, 1.0 and True are equal
keys, a float by its exact digits; lists and objects are computed every time). Each variable
keeps the parts of its first `KEPT` distinct values (bounded memory).

An engine with groups (their outcome reads several variables) takes the plain path: the outcome
slots, packed (`compact.pack`). Tests compare both on arbitrary engines and requests.

Compiling these functions costs ~0.5 s on 17,400 rules, so a cold start's first compact trace
queues it on the background compiler (deferred_trace.py: the program's `bits` is `QUEUED`) and
packs the outcomes its program answers without generated code (`TraceProgram.plain_outcomes`)
until the function is there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .engine import FLAGS, compile_generated, define_function
from .lookup import Lookup
from .trace import TraceProgram

KEPT = 64  # distinct values whose parts each variable keeps

Bits = Callable[[Lookup, list[dict[Any, int]], Callable[[Any], Any]], int]


class EngineBits:
    """One engine's bitmap function and the parts it keeps (per variable: value -> int)."""

    __slots__ = ("function", "kept", "size")

    def __init__(self, function: Bits, variables: int, size: int) -> None:
        self.function, self.size = function, size
        self.kept: list[dict[Any, int]] = [{} for _ in range(variables)]

    def bitmap(self, lookup: Lookup) -> bytes:
        """The outcomes' bitmap for `lookup` (which holds no None): bit i = condition i's outcome,
        least significant bit first, as `compact.pack` writes it."""
        return self.function(lookup, self.kept, value_key).to_bytes((self.size + 7) // 8, "little")


QUEUED = "queued"  # a program's `bits` while a background job makes them


def engine_bits(made: TraceProgram) -> EngineBits | None:
    """The engine's bitmap function (made on first use and kept with its program; its code kept in
    the compile cache as the program's other functions), or None: the engine has groups. Not
    while `QUEUED` (the caller packs the plain outcomes then)."""
    found = made.bits
    if found is None:
        found = build_bits(made)
    assert found is not QUEUED, "the bits are being made in the background"
    return found or None


def build_bits(made: TraceProgram) -> EngineBits | bool:
    """Make the program's bitmap function, or for an engine with groups its outcomes function
    (`False`: the bits are the outcomes, packed), and keep it as `bits`."""
    if any(slot.kind == "group" for slot in made.slots):
        made.prepare("matched")
        made.bits = False
    else:
        made.bits = EngineBits(_function(made), len(made.keys), len(made.slots))
    found: EngineBits | bool = made.bits
    return found


def _function(made: TraceProgram) -> Bits:
    made.expressions()  # their predicates and constants are the function's globals, stored code or not
    code = made.codes.get("bits") or (None if made.kept is None else made.kept.code("bits"))
    if code is None:
        code = compile_generated(_source(made))
        made.codes["bits"] = code
        if made.kept is not None:
            made.kept.store(made, "bits")
    function: Bits = define_function(code, made.namespace, "bits")
    return function


def value_key(value: Any) -> Any:
    """The key a part is kept under for a value that is not a str (nor absent): one that tells 1,
    1.0 and True apart (and -0.0 from 0.0); None: not kept (a list, an object, …)."""
    kind = value.__class__
    if kind is int or kind is bool:
        return (kind, value)
    if kind is float:
        return (kind, value.hex())
    return None


def _source(made: TraceProgram) -> str:
    """`def bits(V, T, K)`: per variable, its part from `T[n]` (that variable's kept parts, keyed
    as `K` = `value_key` says) or computed (and kept while there is room); their OR."""
    by_variable: dict[str, list[str]] = {key: [] for key in made.keys}
    for slot in made.expressions():
        if slot.kind == "leaf" and slot.expression != "False":
            by_variable[slot.key].append(f"({slot.expression} and {1 << slot.index:#x})")  # type: ignore[index]
    lines = ["def bits(V, T, K):", "    m = 0"]
    for n, tests in enumerate(by_variable.values()):
        if not tests:
            continue
        var = f"v{n}"
        lines += [f"    {var} = V.get(kv{n}, M)",
                  f"    t = T[{n}]",
                  f"    k = {var} if {var}.__class__ is str or {var} is M else K({var})",
                  "    b = t.get(k)",
                  "    if b is None:",
                  *(f"        {kind}{n} = {test.format(v=var)}" for kind, test in FLAGS.items()),
                  f"        b = {' | '.join(tests)}",
                  f"        if k is not None and len(t) < {KEPT}:",
                  "            t[k] = b",
                  "    m |= b"]
    lines.append("    return m")
    return "\n".join(lines)
