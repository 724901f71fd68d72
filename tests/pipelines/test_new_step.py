"""A new step type is one edit: an entry in `registry/steps.py` naming its function. The schema,
the linter, completion, hover, `persistentMemory/stepSpecs` and the runner all pick it up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.editor.completion import complete
from context_assembly.editor.documents import build_document
from context_assembly.editor.hover import hover
from context_assembly.methods.persistent_memory import step_specs
from context_assembly.pipelines.context import StepContext
from context_assembly.pipelines.runner import run_pipeline
from context_assembly.pipelines.validate import validate_definition
from context_assembly.registry import steps
from context_assembly.registry.steps import STRING, ParamSpec, StepSpec
from context_assembly.schemas.build import build_schema
from context_assembly.schemas.validate import clear_caches
from context_assembly.workspace.loader import load_workspace

from .fakes import definition, example_stores, make_request


def shout(params: dict[str, Any], ctx: StepContext) -> None:
    """The new step: every item's content in capitals, followed by `suffix`."""
    for item in ctx.items:
        item.content = item.content.upper() + params["suffix"]


SHOUT = StepSpec("shout", "transform", "Say every item louder.",
                 (ParamSpec("suffix", STRING, "What to end each item with.", default="!"),),
                 {"type": "shout", "suffix": "!!"}, run=f"{__name__}:shout")
NOTES = {"type": "markdown_read", "notes": ["style-guide"]}


@pytest.fixture
def with_shout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry as it would be after the edit (schemas are built once per process: rebuilt here)."""
    monkeypatch.setattr(steps, "STEP_TYPES", (*steps.STEP_TYPES, SHOUT))
    clear_caches()
    yield
    monkeypatch.undo()
    clear_caches()


@pytest.mark.usefixtures("with_shout")
def test_the_runner_runs_it() -> None:
    result = run_pipeline(definition([NOTES, {"type": "shout"}]), make_request(), example_stores())
    assert result.status == "ok", result.error
    assert result.items and all(i.content.endswith("!") and i.content == i.content.upper() for i in result.items)


@pytest.mark.usefixtures("with_shout")
def test_the_schema_and_the_linter_know_it() -> None:
    schema = build_schema("persistent-memory")
    assert "shout" in str(schema)
    assert validate_definition(definition([NOTES, {"type": "shout", "suffix": "?"}]))["valid"]
    bad = validate_definition(definition([NOTES, {"type": "shout", "suffix": 3}]))
    assert not bad["valid"] and any("suffix" in e["path"] for e in bad["errors"])


@pytest.mark.usefixtures("with_shout")
def test_step_specs_list_it() -> None:
    found = [s for s in step_specs(None, {}, None)["items"] if s["name"] == "shout"]  # type: ignore[arg-type]
    assert found and found[0]["params"][0]["name"] == "suffix"


@pytest.mark.usefixtures("with_shout")
def test_completion_and_hover_offer_it(example_copy: Path) -> None:
    root = example_copy.resolve()
    workspace = load_workspace(root)
    text = '{"id": "m", "retrieval": {"pipeline": [{"type": "shout"}]}}'
    document = build_document((root / ".codebolt" / "PersistentMemory" / "m.json").as_uri(), text, 1, root)
    assert document is not None
    at = text.index('"shout"') + 2
    assert "shout" in {i["label"] for i in complete(document, at, workspace)}
    found = hover(document, at, workspace)
    assert found is not None and "Say every item louder." in found["contents"]["value"]
