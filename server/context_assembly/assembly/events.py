"""The observer interface: assembly progress as named events (the JSON-RPC layer forwards them)."""

from __future__ import annotations

from typing import Any, Protocol

EVENTS = ("started", "rulesEvaluated", "pipelineComplete", "complete", "error")


class AssemblyObserver(Protocol):
    def __call__(self, event: str, payload: dict[str, Any]) -> None:
        """`event` is one of EVENTS; `payload` always carries `assembly_id`."""


def ignore(event: str, payload: dict[str, Any]) -> None:
    """The observer used when nobody listens."""
    del event, payload
