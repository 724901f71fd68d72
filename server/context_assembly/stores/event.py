"""What a value written to `log://` is: an event (SPEC §5.1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..registry.values import json_equal
from .confine import refuse

EVENT_SHAPE = ("an event is a JSON object with a string event_type and any other fields, e.g. "
               '{"event_type": "task.completed", "task_id": "t-1"} (optional: payload, an object; ts, epoch seconds)')


def event_fields(value: Any) -> tuple[str, dict[str, Any], Any]:
    """(event_type, payload, ts) of a value written to `log://`. Fields beside event_type, payload
    and ts are kept in the payload (beside the payload's own keys, which win on a clash), so
    `log_search` and ingestion triggers read them as they read any payload field."""
    if not isinstance(value, dict) or not isinstance(value.get("event_type"), str):
        raise refuse(EVENT_SHAPE, "/value" if not isinstance(value, dict) else "/value/event_type")
    payload = value.get("payload", {})
    extra = {k: v for k, v in value.items() if k not in ("event_type", "payload", "ts")}
    if extra and isinstance(payload, dict):
        payload = {**extra, **payload}
    elif extra:
        raise refuse("an event's payload must be an object when the event has other fields", "/value/payload")
    return value["event_type"], payload, value.get("ts")


def payload_matches(event: dict[str, Any], equal: Mapping[str, Any]) -> bool:
    """Whether the event's payload has every field of `equal` with that value, by JSON equality (a
    boolean equals only a boolean: `true` is not 1, as in the rules' `eq`)."""
    payload = event["payload"]
    return all(name in payload and json_equal(payload[name], value) for name, value in equal.items())
