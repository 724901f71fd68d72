"""The per-condition trace, compiled: what `explain` answers, straight in its wire form.

The plain path (`CompiledConditions.explain`, then the converter) builds one attrs object per
condition and walks the tree in Python: on a 17,400-rule workspace that was ~0.9 s per request.
Here each engine gets, on first use, one generated function that computes every distinct
condition's outcome into a preallocated list of slots (the same inline tests as the matcher);
the JSON-ready dicts are then copies of templates built once from the plain path's own output,
with the outcome (and the actual value) filled in. Identical conditions within an engine share a
slot. Tests check on arbitrary input that this and the plain path give equal JSON.

Modes (the request option `explain`): "all" (every rule, every condition), "matched" (only the
rules that matched, with their conditions), "none" (only the matched rules, no conditions).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import CodeType
from typing import Any

import orjson

from ..encoded import EncodedJSON, EncodedList, encoded
from ..model.converter import unstructure
from ..registry.values import MISSING
from .compile import Broken, Group, Leaf, Node
from .engine import CompiledEngine, CompiledRule, _Emitter, _names, compile_generated, define_function
from .lookup import Lookup, complete

EXPLAIN_MODES = ("all", "matched", "none")
Wire = dict[str, Any]


class _Slot:
    """One distinct condition: its outcome slot, and how its dict is made. `expression` (the
    inline test the generated functions compute its outcome with) is None until the program's
    `expressions` writes it, then never changes."""

    __slots__ = ("index", "kind", "present", "absent", "children", "key", "expression")

    def __init__(self, index: int, kind: str, absent: Wire, present: Wire | None, key: str | None,
                 children: tuple[int, ...], expression: str | None) -> None:
        self.index, self.kind, self.key, self.expression = index, kind, key, expression
        self.absent, self.present, self.children = absent, present, children


class TraceProgram:
    """One engine's trace: slots for every distinct condition, templates for every rule. The
    generated functions are built on first use of each mode."""

    FUNCTIONS = {"all": "all_rules", "matched": "outcomes"}  # explain mode -> its generated function

    def __init__(self, engine: CompiledEngine | None) -> None:
        """The program of `engine`'s compiled conditions; None: an empty one that trace_cache.py
        fills from a compile-cache entry."""
        self._slots: list[_Slot] = []
        self.nodes: list[Node] = []  # each slot's compiled condition (none in a program read from the cache)
        self._leaf_slot: dict[tuple[Any, ...], int] = {}
        self._emitter = _Emitter()
        # Leaves' test expressions are written when a generated function (or the program's cache
        # entry) first needs them, on whichever thread that is: a first compact answer only packs
        # outcomes answered without generated code (`plain_outcomes`) while its functions are
        # made in the background (bitmap.py). The lock makes that writing happen once.
        self._unwritten = False
        self._writing = threading.Lock()
        # per rule: (top-level slots, template when unmatched, template when matched)
        self.rules = [] if engine is None else [
            (tuple(self._node(node) for node in rule.conditions.nodes), *rule_templates(rule))
            for rule in engine.rules]
        self.keys = list(self._emitter.keys)
        # the generated functions' compiled modules by name, and where they and the program are
        # kept between processes (trace_cache.KeptTrace: asked for a module before compiling it,
        # told when one is compiled or the layout key computed)
        self.codes: dict[str, CodeType] = {}
        self.kept: Any = None
        self.layout_key: str | None = None  # compact.py's layout key, when known without computing it
        self._outcomes: Callable[[Lookup], list[bool]] | None = None
        self._all: Callable[[Lookup, set[int]], list[Wire]] | None = None
        self.layout: Any = None  # compact.py's static layout (trace_format "compact"), made on first use
        self.matched = MatchedTemplates(lambda i: self.rules[i][2])  # explain "none" (and compact)
        self.bits: Any = None  # bitmap.py's per-variable outcome bits (compact), made on first use

    @property
    def namespace(self) -> dict[str, Any]:
        """The generated functions' globals: keys, constants and predicates by name."""
        return self._emitter.globals

    @property
    def slots(self) -> list[_Slot]:
        """Every distinct condition, children before their groups: the order of `outcomes`."""
        return self._slots

    def _node(self, node: Node) -> int:
        if isinstance(node, Leaf):
            absent, present, signature = leaf_templates(node)
            if signature not in self._leaf_slot:
                self._emitter.var(node.key)  # the lookup keys in the order the expressions read them
                self._leaf_slot[signature] = self._add(node, "leaf", absent, present, node.key, expression=None)
                self._unwritten = True
            return self._leaf_slot[signature]
        if isinstance(node, Group):
            children = tuple(self._node(child) for child in node.children)
            if node.kind == "not":
                expression = f"not o{children[0]}"
            else:
                joined = (" or " if node.kind == "any" else " and ").join(f"o{c}" for c in children)
                expression = f"({joined})" if children else ("False" if node.kind == "any" else "True")
            template = {"result": False, "group": node.kind, "conditions": None}
            return self._add(node, "group", template, children=children, expression=expression)
        assert isinstance(node, Broken)
        return self._add(node, "broken", unstructure(node.explain({})), expression="False")

    def _add(self, node: Node, kind: str, absent: Wire, present: Wire | None = None, key: str | None = None,
             children: tuple[int, ...] = (), expression: str | None = "False") -> int:
        self._slots.append(_Slot(len(self._slots), kind, absent, present, key, children, expression))
        self.nodes.append(node)
        return len(self._slots) - 1

    def expressions(self) -> list[_Slot]:
        """The slots, each with its expression written (the leaves' once, in slot order, which
        gives their predicates and constants the same global names whenever it happens)."""
        if self._unwritten:
            with self._writing:
                if self._unwritten:
                    for slot, node in zip(self._slots, self.nodes, strict=True):
                        if slot.expression is None:
                            slot.expression = self._emitter.expr(node)
                    self._unwritten = False
        return self._slots

    def plain_outcomes(self, lookup: Lookup) -> list[bool]:
        """`outcomes` without generated code: each slot's compiled condition answered in turn
        (children come before their groups). Only for a program built here (`nodes`); `lookup`
        holds no None. What a compact answer packs while its functions compile (bitmap.py)."""
        outcomes: list[bool] = []
        for node, slot in zip(self.nodes, self._slots, strict=True):
            if isinstance(node, Leaf):
                outcome = bool(node.operator.answer(node.predicate, lookup.get(node.key, MISSING)))
            elif isinstance(node, Group):
                outcome = node.outcome([outcomes[c] for c in slot.children])
            else:
                outcome = False
            outcomes.append(outcome)
        return outcomes

    def _function(self, name: str, parameters: str, lines: Callable[[], list[str]]) -> Any:
        """Outcomes first (`o3 = …`, children before groups), then `lines()`; compiled once per
        engine version (`codes`, restored from the compile cache)."""
        emitter = self._emitter
        slots = self.expressions()  # (a stored function's code reads their globals too)
        code = self.codes.get(name) or (None if self.kept is None else self.kept.code(name))
        if code is not None:
            self.codes[name] = code
            return define_function(code, emitter.globals, name)
        body = [f"o{slot.index} = {slot.expression}" for slot in slots]
        source = "\n".join([f"def {name}({parameters}):",
                            *(f"    {line}" for line in [*emitter._loads(_names(body), set()), *body, *lines()])])
        # (compiled here, not by the emitter, whose `code` another thread's function may replace meanwhile)
        code = self.codes[name] = compile_generated(source)
        made = define_function(code, emitter.globals, name)
        if self.kept is not None:
            self.kept.store(self, name)
        return made

    def prepare(self, mode: str) -> None:
        """Compile (or read from the compile cache) the generated function `explain` `mode` ("all"
        or "matched") answers with, ahead of its first use (deferred_trace.py)."""
        if mode == "all":
            if self._all is None:
                self.templates()
                self._all = self._function(self.FUNCTIONS["all"], "V, H", self._all_lines)
        elif self._outcomes is None:
            self._outcomes = self._function(self.FUNCTIONS["matched"], "V", lambda: [
                f"return [{', '.join(f'o{slot.index}' for slot in self._slots)}{',' if self._slots else ''}]"])

    def prepared(self, mode: str) -> bool:
        """Whether the function `explain` `mode` ("all", "matched") answers with is made."""
        return (self._all if mode == "all" else self._outcomes) is not None

    def outcomes(self, values: Lookup) -> list[bool]:
        if self._outcomes is None:
            self.prepare("matched")
        assert self._outcomes is not None
        return self._outcomes(values)

    def all_rules(self, values: Lookup, hits: set[int]) -> list[Wire]:
        """Every rule's dict with its conditions': one generated function, dict displays over
        templates, each distinct condition's dict made once and shared by the rules that hold it."""
        if self._all is None:
            self.prepare("all")
        assert self._all is not None
        return self._all(values, hits)

    def templates(self) -> None:
        """The templates `all_rules` reads, as its globals."""
        namespace = self._emitter.globals
        for slot in self._slots:
            if slot.kind == "leaf":
                namespace[f"P{slot.index}"], namespace[f"A{slot.index}"] = slot.present, slot.absent
            elif slot.kind == "broken":
                namespace[f"B{slot.index}"] = slot.absent
        for r, (_, unmatched, matched) in enumerate(self.rules):
            namespace[f"U{r}"], namespace[f"T{r}"] = unmatched, matched

    def _all_lines(self) -> list[str]:
        lines = []
        for slot in self._slots:
            i = slot.index
            if slot.kind == "leaf":
                var = self._emitter.var(slot.key)  # type: ignore[arg-type]
                lines.append(f'c{i} = {{**A{i}, "result": o{i}}} if {var} is M else '
                             f'{{**P{i}, "result": o{i}, "actual": {var}}}')
            elif slot.kind == "group":
                children = ", ".join(f"c{c}" for c in slot.children)
                lines.append(f'c{i} = {{"result": o{i}, "group": {slot.absent["group"]!r}, '
                             f'"conditions": [{children}]}}')
            else:
                lines.append(f"c{i} = {{**B{i}}}")
        rules = []
        for r, (slots, _, _) in enumerate(self.rules):
            conditions = ", ".join(f"c{s}" for s in slots)
            rules.append(f'    {{**(T{r} if {r} in H else U{r}), "conditions": [{conditions}]}},')
        return [*lines, "return [", *rules, "]"]

    def engine(self, engine: CompiledEngine, hits: list[int], lookup: Lookup, mode: str) -> Wire:
        """The engine's entry of `engine_results` in its wire form, `mode` "all" or "matched"
        (`lookup` holds no None; "none" is `matched_engines`', from the matched templates)."""
        if mode == "matched":
            outcomes = self.outcomes(complete(lookup, self.keys))
            made: dict[int, Wire] = {}
            rules = [{**self.rules[i][2], "conditions": [self._condition(s, outcomes, lookup, made)
                                                         for s in self.rules[i][0]]} for i in hits]
        else:
            rules = self.all_rules(complete(lookup, self.keys), set(hits))
        return {"engine_id": engine.id, "rules": rules, "enabled": engine.enabled}

    def _condition(self, index: int, outcomes: list[bool], lookup: Lookup, made: dict[int, Wire]) -> Wire:
        found = made.get(index)
        if found is not None:
            return found
        slot = self._slots[index]
        if slot.kind == "leaf":
            actual = lookup.get(slot.key, MISSING)  # type: ignore[arg-type]
            found = {**slot.absent} if actual is MISSING else {**slot.present, "actual": actual}  # type: ignore[dict-item]
        else:
            found = {**slot.absent}
            if slot.kind == "group":
                found["conditions"] = [self._condition(c, outcomes, lookup, made) for c in slot.children]
        found["result"] = outcomes[index]
        made[index] = found
        return found


def rule_templates(rule: CompiledRule) -> tuple[Wire, Wire]:
    """The plain path's dicts for the rule (`rule_result`, then the converter, which leaves out
    None), unmatched and matched, with empty conditions; built by hand, as they are many. Made once
    and kept on the rule (read-only: shared by the trace program, its answers and plain_trace.py)."""
    made = rule.templates
    if made is None:
        made = rule.templates = _rule_templates(rule)
    found: tuple[Wire, Wire] = made
    return found


def _rule_templates(rule: CompiledRule) -> tuple[Wire, Wire]:
    head = {"rule_id": rule.rule_id, "matched": False}
    tail: Wire = {"conditions": [], "memories": [], "excluded": [], "per_source": rule.per_source}
    for key, value in (("name", rule.name), ("priority", rule.priority)):
        if value is not None:
            head[key] = _plain(value)
    error = {} if rule.error is None else {"error": rule.error}
    matched = {**head, "matched": True, **tail, "memories": list(rule.memories),
               "excluded": list(rule.excluded), **error}
    return {**head, **tail, **error}, matched


def leaf_templates(leaf: Leaf) -> tuple[Wire, Wire, tuple[Any, ...]]:
    """The leaf's dicts, absent and present (read-only: every use copies them), and what tells it
    from other leaves in a trace; made once per leaf and kept on it (a load shares a leaf between
    the rules and engines that hold the same condition: `large`'s 46,000 are 10,800)."""
    made = leaf.templates
    if made is None:
        source = leaf.source
        signature = (source.field, source.operator, _frozen(source.value), _frozen(source.ignore_case))
        made = leaf.templates = (_leaf_template(leaf, False), _leaf_template(leaf, True), signature)
    found: tuple[Wire, Wire, tuple[Any, ...]] = made
    return found


def _leaf_template(leaf: Leaf, present: bool) -> Wire:
    """The plain path's dict for this leaf (`Leaf.explain`, then the converter), with a placeholder
    outcome and actual value."""
    source = leaf.source
    made: Wire = {"result": False, "field": source.field, "operator": source.operator}
    if source.value is not MISSING and source.value is not None:
        made["value"] = _plain(source.value)
    if present:
        made["actual"] = _PLACEHOLDER
    made["present"] = present
    if source.ignore_case is not None:
        made["ignore_case"] = _plain(source.ignore_case)
    return made


def _plain(value: Any) -> Any:
    return value if value.__class__ in (str, int, float, bool) else unstructure(value)


_PLACEHOLDER = "actual"  # any non-None value: it keeps the key's place in the template


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a JSON value that tells 1, 1.0 and True apart."""
    if isinstance(value, dict):
        return ("{", tuple((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("[", tuple(_frozen(v) for v in value))
    if isinstance(value, float):
        return ("float", repr(value))  # -0.0 and 0.0 print differently
    return (type(value).__name__, value if value is None or isinstance(value, str | int | bool) else id(value))


def matched_rules(engine: CompiledEngine, hits: list[int]) -> Wire:
    """The engine's entry with only its matched rules, without conditions (`explain: none`): the
    matched templates are made for the rules that match, when they first do, and shared by every
    answer (read-only: the answer is encoded, never changed)."""
    return {"engine_id": engine.id, "rules": templates_of(engine).entries(hits), "enabled": engine.enabled}


def matched_engines(found: list[tuple[CompiledEngine, list[int]]],
                    bytes_only: bool = False) -> list[Wire] | EncodedJSON:
    """Every engine's `matched_rules` entry, as one `EncodedList` whose piece per engine is its
    entry's JSON, joined from its rules' pieces here: one pass over the engines, no `EncodedList`
    and no encoder call per engine (on 42 engines, 63 → 51 µs with the encoding). Each entry's
    `rules` is then a plain list (the pieces are the outer list's). `bytes_only` (the answer is only
    written): the pieces alone, as one `EncodedJSON`, without the entries and their lists (3-7%
    of a round trip through the sidecar). A plain list of `matched_rules` entries when a template
    or an engine id orjson cannot encode is among them."""
    if bytes_only:
        known = _known_json(found)
        if known is not None:
            return EncodedJSON(known)
    entries: list[Wire] = []
    pieces: list[bytes] = []  # something still to make (or the entries wanted): the loop that makes it
    for engine, hits in found:
        templates = templates_of(engine)
        ends = templates.frame(engine)
        parts = templates.pieces(hits)
        if parts is None or ends is None:
            return [matched_rules(engine, hits) for engine, hits in found]
        if not bytes_only:
            entries.append({"engine_id": engine.id, "rules": templates.entries(hits, with_pieces=False),
                            "enabled": engine.enabled})
        pieces.append(ends[0] + b",".join(parts) + ends[1])
    if bytes_only:
        return EncodedJSON(b"[" + b",".join(pieces) + b"]")
    return EncodedList(entries, pieces)


def _known_json(found: list[tuple[CompiledEngine, list[int]]]) -> bytes | None:
    """The engines' entries as one JSON array when every part of them was made before (the steady
    state), read in one loop with no call per engine (three per engine were a third of the time)
    and joined once (joining each engine's entry, then the array, copied the answer's bytes five
    times: 27 → 21 µs on `medium`); None when anything is still to make (the loop above makes it)."""
    parts: list[bytes] = []
    try:
        for engine, hits in found:
            templates = engine.trace
            if templates.__class__ is not MatchedTemplates:
                templates = templates.matched  # a TraceProgram's (None has none: AttributeError)
            known = templates._frame
            if known[0] != engine.id or known[1] is not engine.enabled:
                return None
            parts += (b",", known[2], b",".join(map(templates._pieces.__getitem__, hits)), known[3])
    except (AttributeError, TypeError, KeyError):  # no templates, no frame yet, a rule's piece not made (or None)
        return None
    if not parts:
        return b"[]"
    parts[0] = b"["  # the first engine's separator
    parts.append(b"]")
    return b"".join(parts)


def templates_of(engine: CompiledEngine) -> MatchedTemplates:
    """The engine's matched templates: its trace program's, or made alone (trace.py's state per engine)."""
    trace = engine.trace
    if trace is None:
        rules = engine.rules
        engine.trace = trace = MatchedTemplates(lambda i: rule_templates(rules[i])[1])
    return trace if trace.__class__ is MatchedTemplates else trace.matched


class MatchedTemplates:
    """One engine's matched-rule templates (a rule's entry when it matched, without conditions),
    each made when its rule first matches, with its JSON: the `rules` of an `explain: none` entry
    are then an `EncodedList`, written as bytes (encoded.py)."""

    __slots__ = ("_frame", "_make", "_made", "_pieces", "_plain")

    def __init__(self, make: Callable[[int], Wire]) -> None:
        self._make = make
        self._made: dict[int, Wire] = {}
        self._pieces: dict[int, bytes | None] = {}
        self._plain = False  # a template orjson cannot encode: plain lists from then on
        self._frame: tuple[str, bool, bytes, bytes] | None = None  # `frame`'s last answer

    def entries(self, hits: list[int], with_pieces: bool = True) -> list[Wire]:
        """The matched rules' templates, in `hits` order (an `EncodedList` unless told not to, or
        a template orjson cannot encode is among them)."""
        try:
            rules = list(map(self._made.__getitem__, hits))
        except KeyError:
            self._make_missing(hits)
            rules = list(map(self._made.__getitem__, hits))
        if not with_pieces or self._plain:
            return rules
        return EncodedList(rules, list(map(self._pieces.__getitem__, hits)))  # type: ignore[arg-type]

    def pieces(self, hits: list[int]) -> list[bytes] | None:
        """The matched rules' JSON, in `hits` order (None: a template orjson cannot encode)."""
        try:
            if not self._plain:
                return list(map(self._pieces.__getitem__, hits))  # type: ignore[arg-type]
            return None
        except KeyError:
            self._make_missing(hits)
            return self.pieces(hits)

    def _make_missing(self, hits: list[int]) -> None:
        """The templates (and their JSON) of the rules in `hits` that never matched before."""
        for i in hits:
            if i not in self._made:
                self._made[i] = template = self._make(i)
                self._pieces[i] = piece = encoded(template)
                self._plain = self._plain or piece is None

    def frame(self, engine: CompiledEngine) -> tuple[bytes, bytes] | None:
        """The JSON of the engine's entry before and after its rules' pieces (None: an id orjson
        cannot encode)."""
        known = self._frame
        if known is None or known[0] != engine.id or known[1] != engine.enabled:
            name = encoded(engine.id)
            if name is None:
                return None
            head, tail = b'{"engine_id":' + name + b',"rules":[', b'],"enabled":' + orjson.dumps(engine.enabled) + b"}"
            known = self._frame = (engine.id, engine.enabled, head, tail)
        return known[2], known[3]


def program(engine: CompiledEngine) -> TraceProgram:
    """The engine's trace program, made on first use and kept with the engine: restored from the
    compile cache when the engine has an entry there (trace_cache.py), else built (and stored)."""
    built = engine.trace
    if not isinstance(built, TraceProgram):
        kept = engine.kept_trace
        built = kept.restore(engine) if kept is not None else None
        if built is None:
            built = TraceProgram(engine)
            built.kept = kept
        engine.trace = built
    return built
