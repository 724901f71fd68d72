"""The one cattrs converter for every wire shape.

Wire names are exactly the SPEC's (snake_case; `$schema`; `not`). Unstructuring leaves out
attributes that are None (and a condition's absent `value`), so documents round-trip without
growing keys nobody wrote. Conditions structure tolerantly: anything that is not a condition
becomes an `InvalidCondition` instead of an exception, because rule files are hand-written.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.cols import list_structure_factory

from ..registry.values import MISSING, json_type, whole_number
from .context import ContextItem
from .definitions import Conditions, IngestionPipeline, MemoryDefinition, OpenRecord, Route
from .problems import Severity
from .rules import (
    UNREADABLE,
    AllOf,
    AnyOf,
    Condition,
    FieldCondition,
    InvalidCondition,
    Not,
    Rule,
    RuleActions,
    RuleEngine,
)

T = TypeVar("T")

converter = cattrs.Converter()


def _strict(*types: type) -> Any:
    """Primitives are taken as they are: cattrs would otherwise turn "false" into True."""
    names = " or ".join(t.__name__ for t in types)

    def structure_primitive(value: Any, _type: Any) -> Any:
        if isinstance(value, bool) and bool not in types:
            raise TypeError(f"expected {names}, got a boolean")
        if not isinstance(value, types):
            raise TypeError(f"expected {names}, got {type(value).__name__}")
        return value

    return structure_primitive


def _structure_int(value: Any, _type: Any) -> int:
    """An integer, also as JSON Schema counts them: 2.0 is 2 (the schemas accept it, so refusing it
    here moved a valid `max_items: 2.0` into `extra` and dropped the cap); 2.5 is refused."""
    number = whole_number(value)
    if number is None:
        shown = repr(value) if isinstance(value, float) else json_type(value)
        raise TypeError(f"expected an integer, got {shown}")
    return number


converter.register_structure_hook(str, _strict(str))
converter.register_structure_hook(bool, _strict(bool))
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(float, _strict(int, float))
converter.register_structure_hook(int | float, _strict(int, float))


def _is_list(cls: Any) -> bool:
    return getattr(cls, "__origin__", None) is list


def _strict_list(cls: Any) -> Any:
    """Only a JSON array is a list: cattrs would otherwise read "abc" as ["a", "b", "c"]."""
    structure_items = list_structure_factory(cls, converter)

    def structure_list(value: Any, type_: Any) -> Any:
        if not isinstance(value, list):
            raise TypeError(f"expected an array, got {type(value).__name__}")
        return structure_items(value, type_)

    return structure_list


converter.register_structure_hook_factory(_is_list, _strict_list)
converter.register_structure_hook(str | list[str] | None, lambda value, _type: (
    value if value is None or isinstance(value, str) else converter.structure(value, list[str])))


def _structure_conditions(value: Any, _type: Any) -> Any:
    """A route's condition as written: one object or a list (each item is read when compiled)."""
    if value is not None and not isinstance(value, dict | list):
        raise TypeError(f"expected a condition or an array of conditions, got {json_type(value)}")
    return value


converter.register_structure_hook(Conditions | None, _structure_conditions)

# attribute name -> wire name, where Python cannot spell the wire name
_RENAMES: dict[type, dict[str, str]] = {
    RuleEngine: {"schema": "$schema"}, Not: {"not_": "not"}, MemoryDefinition: {"schema": "$schema"},
    IngestionPipeline: {"schema": "$schema"}, Route: {"from_": "from"},
}
_GROUPS: dict[str, type] = {"any": AnyOf, "all": AllOf}


def _omit_none_unstructure(cls: type) -> Any:
    names = [(a.name, _RENAMES.get(cls, {}).get(a.name, a.name)) for a in attrs.fields(cls)]

    def unstructure_obj(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, wire in names:
            value = getattr(obj, name)
            if value is None or value is MISSING:
                continue
            out[wire] = converter.unstructure(value)
        return out

    return unstructure_obj


# every attrs class leaves out its None attributes; RuleActions and conditions have their own hooks
converter.register_unstructure_hook_factory(attrs.has, _omit_none_unstructure)


def _unstructure_actions(actions: RuleActions) -> dict[str, Any]:
    """Only the actions a rule has: `then` stays as short as the author wrote it."""
    return {
        a.name: converter.unstructure(getattr(actions, a.name))
        for a in attrs.fields(RuleActions)
        if getattr(actions, a.name)
    }


converter.register_unstructure_hook(RuleActions, _unstructure_actions)
converter.register_unstructure_hook(InvalidCondition, lambda c: c.raw)
# ContextItem keeps its nulls: memory_id and score are always present on the wire (SPEC §5.2).
converter.register_unstructure_hook(ContextItem, cattrs.gen.make_dict_unstructure_fn(ContextItem, converter))
converter.register_unstructure_hook(Condition, lambda c: converter.unstructure(c, type(c)))


# -- open records (model/definitions.py): every key the author wrote comes back, in its place

_READ_ERRORS = (cattrs.BaseValidationError, TypeError, ValueError)


def _open_structure(cls: type) -> Any:
    """A value of the documented type goes to its attribute; anything else stays in `extra`."""
    attrs.resolve_types(cls)
    renames = _RENAMES.get(cls, {})
    by_wire = {renames.get(a.name, a.name): a for a in attrs.fields(cls) if a.name not in ("extra", "key_order")}

    def structure_open(raw: Any, _type: Any) -> Any:
        if not isinstance(raw, dict):
            raise TypeError(f"expected an object, got {type(raw).__name__}")
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in raw.items():
            attribute = by_wire.get(key)
            if attribute is None:
                extra[key] = value
                continue
            try:
                values[attribute.name] = converter.structure(value, attribute.type)
            except _READ_ERRORS:
                extra[key] = value
        return cls(**values, extra=extra, key_order=tuple(raw))

    return structure_open


def _open_unstructure(cls: type) -> Any:
    """Keys in the order they were read; attributes set since (and not None) after them."""
    renames = _RENAMES.get(cls, {})
    wires = [(renames.get(a.name, a.name), a.name) for a in attrs.fields(cls) if a.name not in ("extra", "key_order")]
    attribute_of = dict(wires)

    def unstructure_open(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in obj.key_order:
            if key in obj.extra:
                out[key] = obj.extra[key]
            elif key in attribute_of:
                out[key] = converter.unstructure(getattr(obj, attribute_of[key]))
        for wire, name in wires:
            if wire not in out and getattr(obj, name) is not None:
                out[wire] = converter.unstructure(getattr(obj, name))
        for key, value in obj.extra.items():
            out.setdefault(key, value)
        return out

    return unstructure_open


def _is_open_record(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, OpenRecord)


converter.register_structure_hook_factory(_is_open_record, _open_structure)
converter.register_unstructure_hook_factory(_is_open_record, _open_unstructure)


MAX_DEPTH = 32  # nesting deeper than any person writes; also keeps recursion bounded


def structure_condition(raw: Any, _type: Any = None, depth: int = 0) -> Condition:
    """Any JSON value -> a Condition; never raises."""
    if not isinstance(raw, dict):
        return InvalidCondition(raw, f"a condition must be an object, not {type(raw).__name__}")
    if depth > MAX_DEPTH:
        return InvalidCondition(raw, f"conditions are nested too deeply (more than {MAX_DEPTH} levels)")
    for key, group in _GROUPS.items():
        if key in raw:
            items = raw[key]
            if not isinstance(items, list):
                return InvalidCondition(raw, f"'{key}' must be an array of conditions")
            return group([structure_condition(item, None, depth + 1) for item in items])
    if "not" in raw:
        return Not(structure_condition(raw["not"], None, depth + 1))
    if UNREADABLE in raw:  # a dialect's condition it could not read; the dialect said why
        return InvalidCondition(raw[UNREADABLE], str(raw.get("reason") or "not a condition"))
    if "field" not in raw or "operator" not in raw:
        missing = [k for k in ("field", "operator") if k not in raw]
        return InvalidCondition(raw, "a condition needs " + " and ".join(f"'{k}'" for k in missing))
    ignore_case = raw.get("ignore_case")
    if ignore_case is not None and not isinstance(ignore_case, bool):
        return InvalidCondition(raw, "'ignore_case' must be true or false")
    return FieldCondition(raw["field"], raw["operator"], raw.get("value", MISSING), ignore_case)


converter.register_structure_hook(Condition, structure_condition)
for _cls in (FieldCondition, AnyOf, AllOf, Not, InvalidCondition):
    converter.register_structure_hook(_cls, structure_condition)


def _structure_rule(raw: Any) -> Rule:
    """A rule that cannot be read still appears (so the trace can say why) but never matches."""
    try:
        return converter.structure(raw, Rule)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        reasons = cattrs.transform_error(exc) if isinstance(exc, cattrs.BaseValidationError) else [str(exc)]
        rule_id = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else None
        return Rule(id=rule_id, when=[InvalidCondition(raw, "cannot read this rule: " + "; ".join(reasons))])


def _structure_engine(raw: Any, _type: Any) -> RuleEngine:
    if not isinstance(raw, dict):
        raise TypeError("a rule engine must be a JSON object")
    rules = raw.get("rules", [])
    if not isinstance(rules, list):
        raise TypeError("'rules' must be an array")
    data = {k: v for k, v in raw.items() if k not in ("$schema", "rules")}
    engine = _engine_fields(data)
    engine.schema = raw.get("$schema") if isinstance(raw.get("$schema"), str) else None
    engine.rules = [_structure_rule(rule) for rule in rules]
    return engine


_engine_fields = cattrs.gen.make_dict_structure_fn(RuleEngine, converter)
converter.register_unstructure_hook(Severity, lambda s: s.value)
converter.register_structure_hook(RuleEngine, _structure_engine)


def structure(data: Any, cls: type[T]) -> T:
    return converter.structure(data, cls)


def unstructure(obj: Any) -> Any:
    return converter.unstructure(obj)
