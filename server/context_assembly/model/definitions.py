"""Persistent-memory definitions (SPEC §5.2) and ingestion pipelines (SPEC §7), typed.

These are open records: definition files are hand-written and the wire carries whatever the author
wrote, so every key the SPEC does not name, and every named key whose value does not have the
documented type, is kept in `extra` exactly as written (validation reports the wrong types).
`key_order` remembers the order of the keys, so unstructuring gives back the same document byte for
byte (see `model/converter.py`). Step and processor parameters stay as written: each type's
parameters are described by its registry entry (`registry/steps.py`, `registry/ingestion.py`).
"""

from __future__ import annotations

from typing import Any

from attrs import define, field

# A route's `condition`: one condition or a list (AND), as the schema's `conditions` and
# `ingestion.routing.compile_condition_list` take it (the converter keeps either as written).
Conditions = dict[str, Any] | list[Any]


@define
class OpenRecord:
    """What every open record has besides its typed attributes (keyword-only, so the typed ones
    keep their positions)."""

    extra: dict[str, Any] = field(factory=dict, kw_only=True)
    key_order: tuple[str, ...] = field(factory=tuple, eq=False, repr=False, kw_only=True)


@define
class AdditionalVariable(OpenRecord):
    """`additional_variables[]` of a memory definition: a variable the request may or must carry."""

    name: str | None = None
    type: str | None = None
    required: bool | None = None
    default: Any = None
    description: str | None = None


@define
class Retrieval(OpenRecord):
    """`retrieval`: the pipeline's steps, each `{type, alias?, ...params}` as written."""

    pipeline: list[Any] | None = None


@define
class Contribution(OpenRecord):
    """`contribution`: where the memory's items go and how much of them."""

    section: str | None = None
    priority: str | None = None
    format: str | None = None
    max_items: int | None = None
    max_tokens: int | None = None


@define
class MemoryDefinition(OpenRecord):
    """A persistent-memory definition in the canonical shape (the seed-002 shorthand is normalised
    before structuring: `pipelines/shorthand.py`)."""

    id: str | None = None
    label: str | None = None
    description: str | None = None
    version: str | None = None
    status: str | None = None
    inputs_scope: list[str] | None = None
    additional_variables: list[AdditionalVariable] | None = None
    retrieval: Retrieval | None = None
    contribution: Contribution | None = None
    schema: str | None = None  # "$schema" on the wire

    @property
    def steps(self) -> list[Any] | None:
        """The retrieval pipeline's steps, or None when the definition has no step list."""
        return self.retrieval.pipeline if self.retrieval is not None else None

    @property
    def declared_variables(self) -> list[AdditionalVariable]:
        return self.additional_variables or []

    @property
    def scopes(self) -> list[str]:
        return self.inputs_scope or []


@define
class Processor(OpenRecord):
    """One processor of an ingestion pipeline; its type's parameters stay in `extra`."""

    id: str | None = None
    type: str | None = None
    input: str | None = None
    output: str | None = None


@define
class Route(OpenRecord):
    """One routing entry: what to write (`from`, each item when `foreach`) and where (`write_to`)."""

    id: str | None = None
    from_: str | None = None  # "from" on the wire
    foreach: bool | None = None
    condition: Conditions | None = None  # one condition object, or a list of them that must all hold
    write_to: str | None = None


@define
class TriggerConfig(OpenRecord):
    where: list[Any] | None = None


@define
class IngestionPipeline(OpenRecord):
    """An ingestion pipeline (SPEC §7); `trigger` is one trigger name or a list of them."""

    id: str | None = None
    label: str | None = None
    description: str | None = None
    status: str | None = None
    trigger: str | list[str] | None = None
    trigger_config: TriggerConfig | None = None
    processors: list[Processor] | None = None
    routing: list[Route] | None = None
    schema: str | None = None  # "$schema" on the wire

    @property
    def triggers(self) -> list[str]:
        if isinstance(self.trigger, str):
            return [self.trigger]
        return list(self.trigger or [])

    @property
    def active(self) -> bool:
        return self.status != "disabled"
