"""Small workspaces with ingestion pipelines, a runtime over them, and a recording LLM."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from context_assembly.ingestion import IngestionEngine
from context_assembly.runtime import Runtime

from ..workspace.builder import write


def pipeline(pipeline_id: str, processors: list[dict[str, Any]] | None = None,
             routing: list[dict[str, Any]] | None = None, trigger: Any = "manual", **extra: Any) -> dict[str, Any]:
    return {"id": pipeline_id, "label": pipeline_id, "status": "active", "trigger": trigger,
            "processors": processors or [], "routing": routing or [], **extra}


def add(root: Path, *definitions: dict[str, Any]) -> None:
    for definition in definitions:
        write(root, f"MemoryIngestion/{definition['id']}.json", definition)


@contextmanager
def engine_over(root: Path, *definitions: dict[str, Any], **options: Any) -> Iterator[tuple[IngestionEngine, Runtime]]:
    add(root, *definitions)
    runtime = Runtime(root)
    try:
        yield IngestionEngine(runtime.memory, runtime.workspace, **options), runtime
    finally:
        runtime.close()


class FakeLLM:
    """Answers every request with a fixed answer and remembers the requests."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def keys(runtime: Runtime, prefix: str) -> list[str]:
    return [item["uri"] for item in runtime.memory.list(prefix)["items"]]
