"""Memory definitions and ingestion pipelines as typed models: what was written comes back unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.model.converter import structure, unstructure
from context_assembly.model.definitions import (
    AdditionalVariable,
    Contribution,
    IngestionPipeline,
    MemoryDefinition,
    Processor,
    Route,
)
from context_assembly.pipelines.shorthand import normalise_memory

ROOT = Path(__file__).resolve().parents[2]
DEFINITION_FILES = sorted(
    p for folder in ("PersistentMemory", "MemoryIngestion")
    for base in ("examples", "tests", "editor-clients") for p in (ROOT / base).rglob(f"{folder}/*")
    if p.suffix in (".json", ".yaml", ".yml")
)


def _read(path: Path) -> Any:
    text = path.read_text()
    return orjson.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def _same(document: Any, cls: type) -> None:
    """Byte for byte: the same keys, in the same order, with the same values."""
    again = unstructure(structure(document, cls))
    assert json.dumps(again) == json.dumps(document)


def test_there_are_example_files() -> None:
    assert any("PersistentMemory" in p.parts for p in DEFINITION_FILES)
    assert any("MemoryIngestion" in p.parts for p in DEFINITION_FILES)


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_definition_file_round_trips(path: Path) -> None:
    document = _read(path)
    if not isinstance(document, dict):
        pytest.skip("not an object: the loader does not structure it")
    if "PersistentMemory" in path.parts:
        _same(document, MemoryDefinition)
        _same(normalise_memory(document, path.stem), MemoryDefinition)
    else:
        _same(document, IngestionPipeline)


def test_known_keys_are_typed_and_the_rest_is_kept() -> None:
    memory = structure({
        "$schema": "s", "id": "m", "owner": "team-a", "additional_variables": [{"name": "phase", "required": True}],
        "retrieval": {"pipeline": [{"type": "rank"}], "cache": False},
        "contribution": {"section": "knowledge", "max_items": 3},
    }, MemoryDefinition)
    assert memory.schema == "s" and memory.extra == {"owner": "team-a"}
    assert memory.declared_variables == [AdditionalVariable(name="phase", required=True)]
    assert memory.steps == [{"type": "rank"}] and memory.retrieval is not None
    assert memory.retrieval.extra == {"cache": False}
    assert memory.contribution == Contribution(section="knowledge", max_items=3)


def test_a_value_of_the_wrong_type_stays_as_written() -> None:
    """Hand-written files may be wrong: nothing raises, the typed attribute stays unset and
    validation (which reads the unstructured document) reports it."""
    raw = {"id": 7, "inputs_scope": "user", "contribution": {"max_items": True, "section": ["x"]},
           "retrieval": {"pipeline": "nope"}, "additional_variables": [{"name": "a"}, "b"]}
    memory = structure(raw, MemoryDefinition)
    assert memory.id is None and memory.extra["id"] == 7
    assert memory.scopes == [] and memory.declared_variables == []
    assert memory.steps is None
    assert memory.contribution == Contribution(extra={"max_items": True, "section": ["x"]})
    _same(raw, MemoryDefinition)


def test_pipeline_parts() -> None:
    pipeline = structure({
        "id": "p", "trigger": ["onTaskStart", "manual"], "status": "disabled",
        "processors": [{"id": "c", "type": "chunker", "chunk_size": 400}],
        "routing": [{"from": "c", "foreach": True, "write_to": "vector://x", "condition": []}],
    }, IngestionPipeline)
    assert pipeline.triggers == ["onTaskStart", "manual"] and not pipeline.active
    assert pipeline.processors == [Processor(id="c", type="chunker", extra={"chunk_size": 400})]
    assert pipeline.routing == [Route(from_="c", foreach=True, condition=[], write_to="vector://x")]
    assert structure({"trigger": "manual"}, IngestionPipeline).triggers == ["manual"]


def test_attributes_set_after_reading_are_written() -> None:
    memory = structure({"id": "m", "x": 1}, MemoryDefinition)
    memory.status = "disabled"
    assert list(unstructure(memory).items()) == [("id", "m"), ("x", 1), ("status", "disabled")]


def test_a_record_must_be_an_object() -> None:
    with pytest.raises(TypeError):
        structure([], MemoryDefinition)


# -- any JSON object comes back as it was, whichever of its keys the models know ------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


def _record(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects mixing the model's keys (with good or bad values) and unknown ones, in any order."""
    return st.lists(st.tuples(st.sampled_from(keys) | st.text(max_size=6), values), max_size=8).map(dict)


_variable = _record(["name", "type", "required", "default", "description"], _json)
_contribution = _record(["section", "priority", "format", "max_items", "max_tokens"], _json)
_retrieval = _record(["pipeline"], st.lists(_json, max_size=3) | _json)
_memory = _record(
    ["$schema", "id", "label", "description", "version", "status", "inputs_scope", "additional_variables",
     "retrieval", "contribution"],
    _json | st.lists(st.text(max_size=5), max_size=3) | st.lists(_variable, max_size=2) | _retrieval | _contribution,
)
_route = _record(["id", "from", "foreach", "condition", "write_to"], _json)
_processor = _record(["id", "type", "input", "output"], _json)
_pipeline = _record(
    ["$schema", "id", "label", "description", "status", "trigger", "trigger_config", "processors", "routing"],
    _json | st.lists(_processor, max_size=2) | st.lists(_route, max_size=2) | _record(["where"], _json),
)


@settings(max_examples=300, deadline=None)
@given(_memory)
def test_any_memory_definition_round_trips(document: dict[str, Any]) -> None:
    _same(document, MemoryDefinition)


@settings(max_examples=300, deadline=None)
@given(_pipeline)
def test_any_ingestion_pipeline_round_trips(document: dict[str, Any]) -> None:
    _same(document, IngestionPipeline)
