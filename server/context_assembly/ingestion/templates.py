"""`{{variable}}` templates in routing destinations and blob keys (SPEC §7).

A destination such as `kv://sessions/{{payload.session_id}}` is filled from the event. Event
payloads come from agents and tools, so a filled value is untrusted: it can never change which
store, instance or path the template names. Each value must be a non-empty text or number without
`/`, `\\`, `?`, `#`, control characters (NUL included) or `..`, checked on the value as given and on
every percent-decoded layer of it (`%2F`, `..%2f`, `%252F`). A refused value fails that write with
an error naming the variable; nothing is written. Accepted values are percent-encoded into the URI,
so the store receives exactly the text of the value.

Roots: `payload.<path>`, `item` / `item.<path>` (the routed element), `index` (its position),
`scope.<scope>.<field>`, `addVar.<name>`, `trigger`, `execution_id`, `pipeline_id`, `date`
(UTC, `YYYY-MM-DD`), `timestamp` (epoch seconds) and any processor output (`<output>.<path>`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from attrs import evolve, field, frozen

from ..errors import InvalidParamsError
from ..registry.values import MISSING
from ..stores.confine import MAX_KEY_LENGTH, decoded_layers

PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
FIXED_ROOTS: tuple[str, ...] = (
    "payload", "item", "index", "scope", "addVar", "trigger", "execution_id", "pipeline_id", "date", "timestamp",
)
_FORBIDDEN = {"/": "'/'", "\\": "a backslash", "?": "'?'", "#": "'#'"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Characters kept as they are in a filled URI part; everything else is percent-encoded.
_SAFE = "-._~!$&'()*+,;=:@"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class TemplateError(ValueError):
    """A `{{variable}}` that cannot be filled, or whose value is refused."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(message)
        self.variable = variable
        self.message = message


def walk(value: Any, path: Iterable[str]) -> Any:
    """`value` followed along dotted-path parts (object keys, list indexes); MISSING when absent."""
    for part in path:
        if isinstance(value, Mapping):
            value = value.get(part, MISSING)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
        if value is MISSING:
            return MISSING
    return value


@frozen
class TemplateVariables:
    """What `{{...}}` may read during one execution (and, per routed element, `item` and `index`)."""

    payload: Any
    trigger: str
    execution_id: str
    pipeline_id: str
    now: float
    scope_variables: Mapping[str, Any] = field(factory=dict)
    additional_variables: Mapping[str, Any] = field(factory=dict)
    outputs: Mapping[str, Any] = field(factory=dict)
    item: Any = MISSING
    index: int | None = None

    def with_item(self, item: Any, index: int) -> TemplateVariables:
        return evolve(self, item=item, index=index)

    def resolve(self, name: str) -> Any:
        head, *rest = name.split(".")
        if head == "payload":
            value = walk(self.payload, rest)
        elif head == "item":
            value = walk(self.item, rest)
        elif head == "scope":
            value = walk(self.scope_variables, rest)
        elif head == "addVar":
            value = walk(self.additional_variables, rest)
        elif head in ("trigger", "execution_id", "pipeline_id", "date", "timestamp", "index") and not rest:
            value = {"trigger": self.trigger, "execution_id": self.execution_id, "pipeline_id": self.pipeline_id,
                     "date": datetime.fromtimestamp(self.now, UTC).strftime("%Y-%m-%d"),
                     "timestamp": int(self.now), "index": self.index}[head]
        elif head in self.outputs:
            value = walk(self.outputs[head], rest)
        else:
            raise TemplateError(name, f"unknown template variable {{{{{name}}}}}: use "
                                + ", ".join(FIXED_ROOTS) + " or a processor output")
        if value is MISSING or value is None:
            raise TemplateError(name, f"{{{{{name}}}}} has no value in this event")
        return value


def safe_value(name: str, value: Any) -> str:
    """The text of a filled value, refused when it could leave the place its template names."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        raise TemplateError(name, f"{{{{{name}}}}} is {type(value).__name__}, not a text or a number")

    def refused(reason: str) -> TemplateError:
        return TemplateError(name, f"the value {_short(text)} of {{{{{name}}}}} is refused: {reason} "
                             "(a filled value never changes which store or key the destination names)")

    if not text:
        raise refused("it is empty")
    if _SURROGATE.search(text):  # no UTF-8 for it: it could never name a key (it aborted the run)
        raise refused("it contains a lone surrogate (not a Unicode character)")
    if len(text) > MAX_KEY_LENGTH:
        raise refused(f"it is longer than {MAX_KEY_LENGTH} characters")
    try:
        layers = decoded_layers(text)
    except InvalidParamsError:
        raise refused("too many layers of percent-encoding") from None
    for layer in layers:
        encoded = "" if layer is text else " once percent-decoded"
        if _CONTROL.search(layer):
            raise refused(f"it contains a control or NUL character{encoded}")
        for char, what in _FORBIDDEN.items():
            if char in layer:
                raise refused(f"it contains {what}{encoded}")
        if ".." in layer:
            raise refused(f"it contains '..'{encoded}")
        if set(layer) == {"."}:
            raise refused("it is a '.' segment")
    return text


def names(template: str) -> list[str]:
    """The variable names in `template`, in order."""
    return [m.group(1) for m in PLACEHOLDER.finditer(template)]


def placeholder_in_scheme(template: str) -> bool:
    """True when a placeholder comes before the literal `<scheme>://` (the store must be fixed)."""
    return _SCHEME.match(template) is None and "{{" in template


def fill_uri(template: str, variables: TemplateVariables) -> str:
    """A destination URI with every placeholder filled (values checked and percent-encoded)."""
    if placeholder_in_scheme(template):
        raise TemplateError("", f"{template!r}: the scheme must be written out, not filled from a variable")
    return PLACEHOLDER.sub(lambda m: quote(safe_value(m.group(1), variables.resolve(m.group(1))), safe=_SAFE),
                           template)


def fill_key(template: str, variables: TemplateVariables) -> str:
    """A store key (a blob key) with every placeholder filled; the values are checked, not encoded."""
    return PLACEHOLDER.sub(lambda m: safe_value(m.group(1), variables.resolve(m.group(1))), template)


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


__all__ = ["FIXED_ROOTS", "PLACEHOLDER", "TemplateError", "TemplateVariables", "fill_key", "fill_uri", "names",
           "placeholder_in_scheme", "safe_value", "walk"]
