"""Routing (SPEC §7): write processor outputs to store URIs, and the conditions that gate them.

A route `{from, foreach?, condition?, write_to}` takes an output (or `payload`, or a dotted path
into either), optionally iterates it, keeps the elements its condition holds for, fills the
destination template per element and writes through `MemoryRouter.write`. Each element that
cannot be written (a refused template value, a store error) is an error of that route; the other
elements and the other routes still run.

Conditions are the rule language (§4.2, §4.6) over a flat lookup: `payload.<path>`, `trigger`,
`scope.<scope>.<field>`, `addVar.<name>`, and for a route also `item` / `item.<path>`, `index` and
the element's own fields without a prefix (`score`, `metadata.kind`), as the seed's `score > 0.7`.

Values are shaped for the store they go to: `vector://` gets `{text, metadata}` (provenance in the
metadata), `log://` an event `{event_type, payload}` (the element as the payload, the pipeline id
as the event type, unless the element is already an event), `markdown://` and `episodic://` text
or a turn, `blob://` base64. A `{nodes, edges}` value (an `llm_extract_kb` output) routed to
`graph://<instance>` is written node by node and edge by edge to `graph://<instance>/node/<id>` and
`…/edge/<id>`; those ids come from a model, so they are percent-encoded into the URI whole.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from attrs import define, field

from ..errors import ContextAssemblyError
from ..model.converter import structure_condition
from ..model.definitions import Route
from ..pipelines.steps.filtering import holds
from ..registry.values import MISSING
from ..rules.compile import CompiledConditions, compile_conditions
from ..stores.uri import parse_uri
from .lookup import event_lookup, item_lookup
from .processors import as_text, content_name, vector_document
from .templates import TemplateError, TemplateVariables, fill_uri, walk

_log = logging.getLogger(__name__)
def compile_condition_list(raw: Any) -> CompiledConditions:
    """One condition or a list (AND). Problems are in `.errors` (a malformed condition never holds)."""
    conditions = raw if isinstance(raw, list) else [raw]
    return compile_conditions([structure_condition(c) for c in conditions])


def conditions_hold(compiled: CompiledConditions, lookup: Mapping[str, Any]) -> bool:
    return holds(compiled, lookup)


def resolve_reference(name: str, payload: Any, outputs: Mapping[str, Any]) -> Any:
    """`payload`, `payload.<path>`, `<output>` or `<output>.<path>`; MISSING when absent."""
    head, *rest = name.split(".")
    if head == "payload":
        return walk(payload, rest)
    if head in outputs:
        return walk(outputs[head], rest)
    return MISSING


# -- writing


@define
class RouteRun:
    """One route's result, as reported in the execution result."""

    index: int
    source: str
    write_to: str
    route_id: str | None = None
    status: str = "ok"
    written: list[str] = field(factory=list)
    errors: list[dict[str, Any]] = field(factory=list)
    filtered: int = 0  # elements the condition left out

    def error(self, message: str, **extra: Any) -> None:
        self.errors.append({**{k: v for k, v in extra.items() if v is not None}, "message": message})

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index}
        if self.route_id is not None:
            out["id"] = self.route_id
        out.update({"from": self.source, "write_to": self.write_to, "status": self.status,
                    "written": self.written, "errors": self.errors, "filtered": self.filtered})
        return out


@define
class Router:
    memory: Any
    variables: TemplateVariables
    lookup: Mapping[str, Any]  # the event lookup
    cancelled: Callable[[], bool] = lambda: False
    # (route index, element position) -> the idempotency key of that append, for a keyed execution
    keys: Callable[[int, int], str] | None = None

    def run(self, index: int, route: Route, value: Any, condition: CompiledConditions | None) -> RouteRun:
        run = RouteRun(index, route.from_ or "payload", route.write_to or "", route.id)
        if condition is not None and condition.errors:
            run.error("invalid condition: " + "; ".join(condition.errors))
        elif value is MISSING:
            run.error(f"'{run.source}' has no value in this execution")
        else:
            items = value if route.foreach and isinstance(value, list) else [value]
            for position, item in enumerate(items):
                if self.cancelled():
                    run.status = "cancelled"
                    return run
                if condition is not None and not conditions_hold(condition, item_lookup(self.lookup, item, position)):
                    run.filtered += 1
                    continue
                self._write(run, item, position)
        run.status = ("ok" if not run.errors else "partial" if run.written else "failed")
        return run

    def _write(self, run: RouteRun, item: Any, position: int) -> None:
        try:
            uri = fill_uri(run.write_to, self.variables.with_item(item, position))
        except TemplateError as exc:
            run.error(exc.message, index=position, variable=exc.variable or None)
            return
        except Exception as exc:  # noqa: BLE001 - a value no template check foresaw: this write fails, not the run
            _log.warning("ingestion route destination %s could not be filled", run.write_to, exc_info=True)
            run.error(f"the destination could not be filled: {type(exc).__name__}: {exc}", index=position)
            return
        try:
            parsed = parse_uri(uri)
            if parsed.scheme == "graph" and len(parsed.parts) == 1 and _is_graph(item):
                self._write_graph(run, parsed.parts[0], item)
                return
            value = shape(parsed.scheme, item, self.variables)
            if parsed.scheme == "vector" and len(parsed.parts) == 1:
                # Named by content (as the store names unnamed documents): writing it again replaces it,
                # and the result says which document was written.
                uri = f"{uri}/{content_name(value['text'])}"
            key = self.keys(run.index, position) if self.keys is not None else None
            # a retry's model may answer otherwise: what an earlier attempt appended there stands
            self.memory.write(uri, value, key=key, same_value=False)
            run.written.append(uri)
        except ContextAssemblyError as exc:
            run.error(exc.message, index=position, uri=uri)
        except Exception as exc:  # a value the store cannot encode, or a store bug: this write fails, not the run
            _log.warning("ingestion route write to %s failed", uri, exc_info=True)
            run.error(f"{type(exc).__name__}: {exc}", index=position, uri=uri)

    def _write_graph(self, run: RouteRun, instance: str, graph: Mapping[str, Any]) -> None:
        base = f"graph://{quote(instance, safe='')}"
        entries = [("node", n) for n in graph["nodes"]] + [("edge", e) for e in graph["edges"]]
        for kind, entry in entries:
            uri = f"{base}/{kind}/{quote(str(entry.get('id', '')), safe='')}"
            try:
                self.memory.write(uri, entry)
                run.written.append(uri)
            except ContextAssemblyError as exc:
                run.error(exc.message, uri=uri)
            except Exception as exc:  # noqa: BLE001 - this node or edge fails, not the others
                _log.warning("ingestion graph write to %s failed", uri, exc_info=True)
                run.error(f"{type(exc).__name__}: {exc}", uri=uri)


def _is_graph(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("nodes"), list) and isinstance(value.get("edges"), list)


def shape(scheme: str, item: Any, variables: TemplateVariables) -> Any:
    """The value written for `item` to a store of `scheme`."""
    provenance = {"pipeline_id": variables.pipeline_id, "execution_id": variables.execution_id,
                  "trigger": variables.trigger}
    if scheme == "vector":
        return vector_document(item, provenance)
    if scheme == "log":
        if isinstance(item, Mapping) and isinstance(item.get("event_type"), str):
            return dict(item)  # an event already: the store keeps its other fields in the payload
        payload = dict(item) if isinstance(item, Mapping) else {"value": item}
        return {"event_type": variables.pipeline_id, "payload": payload}
    if scheme == "markdown":
        return as_text(item, "note") if isinstance(item, str | Mapping) else json.dumps(item, indent=2, default=str)
    if scheme == "episodic":
        if isinstance(item, Mapping) and "role" in item:
            return dict(item)
        # no `ts`: the thread stamps it inside its write transaction, in the order of `seq` (several sidecars)
        return {"role": "system", "content": item if isinstance(item, str) else as_text(item)}
    if scheme == "blob":
        if isinstance(item, Mapping) and isinstance(item.get("base64"), str):
            return item["base64"]
        data = item if isinstance(item, bytes) else as_text(item).encode("utf-8", "surrogatepass")
        return base64.b64encode(data).decode("ascii")
    if isinstance(item, Mapping) and item.get("embed") is True:
        return {k: v for k, v in item.items() if k != "embed"}  # the vector marker means nothing elsewhere
    return item


__all__ = ["RouteRun", "Router", "compile_condition_list", "conditions_hold", "event_lookup", "item_lookup",
           "resolve_reference", "shape"]
