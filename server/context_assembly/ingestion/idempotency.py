"""Idempotency keys of ingestion events: an event retried with the same key runs its pipelines once.

An agent that lost its answer (a timeout, a sidecar that died, a network drop) sends the event again
with the same `idempotency_key`. Each pipeline's execution then has an id derived from the pipeline
and the key, not a random one, and:

- a run that ended `ok` is recorded in `log://ingestion` under that id; a retry finds the record and
  answers it (`duplicate: true`) without running anything;
- a retry of a run that did not end `ok` (failed, partial, cancelled, or lost with its process) runs
  again, and its appends (`log://`, `episodic://`) carry keys derived from the execution, route and
  element, so what the first attempt appended is not appended twice. Every other write replaces its
  value (vector documents are named by their text, `{{execution_id}}` is the same in both attempts);
- the same key with a different event (trigger, payload or variables) is a conflict (-32003), so a
  reused key never silently drops an event: the first attempt claims the key for its event
  (`ingestion.key` in `log://ingestion`, a keyed append) before anything runs, whatever its end;
- retries on one sidecar wait for the attempt in progress; attempts in two processes at once may
  both run, and their keyed appends still land once.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ConflictError
from ..stores.checks import check_append_key

# Fixed namespace, so every sidecar of every version derives the same execution id from a key.
_NAMESPACE = uuid.UUID("5d0c6a1e-2f0b-4c8e-9a51-7e1f3b9c2d40")
_STRIPES = 64
CLAIM_EVENT_TYPE = "ingestion.key"  # in log://ingestion: the event a key was first sent with


def check_idempotency_key(key: Any) -> str | None:
    check_append_key(key)
    return key


def execution_id(pipeline_id: str, key: str | None, owner: str | None = None) -> str:
    """A random id, or with an idempotency key the one every attempt of this event derives. `owner`:
    the caller's token name; a key is its own (another token's same key is another execution: it
    replayed that one's recorded run, and a Conflict or not told it what that event was)."""
    if key is None:
        return uuid.uuid4().hex
    name = f"{pipeline_id}\n{key}" if owner is None else json.dumps([pipeline_id, key, owner])
    return uuid.uuid5(_NAMESPACE, name).hex


def request_hash(trigger: str, payload: Any, scope_variables: Any, additional_variables: Any) -> str:
    """What identifies the event a key was first used for (key order does not count)."""
    text = json.dumps([trigger, payload, scope_variables or {}, additional_variables or {}], sort_keys=True,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def append_key(execution: str, route: int, position: int) -> str:
    """The idempotency key of one append of a keyed execution."""
    return f"ingestion:{execution}:{route}:{position}"


def check_claim(memory: Any, instance: str, execution: str, digest: str, key: str, pipeline_id: str) -> None:
    """A ConflictError when the key was first used, by any attempt, for another event."""
    _same_event(memory.events.keyed(instance, claim_key(execution)), execution, digest, key, pipeline_id)


def claim(memory: Any, instance: str, execution: str, digest: str, key: str, pipeline_id: str) -> None:
    """Say which event the key stands for, before anything runs: the first attempt's claim is kept
    (a keyed append answers it to every later one), and a later attempt with another event is refused."""
    kept = memory.events.append(instance, CLAIM_EVENT_TYPE, {"execution_id": execution, "pipeline_id": pipeline_id,
                                                             "idempotency_key": key, "request_hash": digest},
                                key=claim_key(execution))
    _same_event(kept, execution, digest, key, pipeline_id)


def _same_event(claimed: dict[str, Any] | None, execution: str, digest: str, key: str, pipeline_id: str) -> None:
    if claimed is not None and claimed["payload"].get("request_hash") != digest:
        raise ConflictError(f"idempotency key {key!r} was already used for a different event "
                            f"(pipeline {pipeline_id!r}): send a new key for a new event",
                            {"idempotency_key": key, "pipeline_id": pipeline_id, "execution_id": execution})


def recorded(memory: Any, instance: str, execution: str) -> dict[str, Any] | None:
    """The result of this execution's `ok` run, if one was recorded."""
    event = memory.events.keyed(instance, execution)
    return None if event is None else {**event["payload"], "duplicate": True}


def claim_key(execution: str) -> str:
    return f"{execution}:event"


class Attempts:
    """One attempt at a time per execution id within this process (striped locks: bounded memory).
    One for the process (`ATTEMPTS`): over TCP each connection has its own engine, and a client
    that reconnects to retry comes back on another."""

    def __init__(self) -> None:
        self._locks = [threading.Lock() for _ in range(_STRIPES)]

    @contextmanager
    def one_at_a_time(self, execution: str | None) -> Iterator[None]:
        if execution is None:
            yield
            return
        with self._locks[int(execution[:8], 16) % _STRIPES]:
            yield


ATTEMPTS = Attempts()

__all__ = ["ATTEMPTS", "CLAIM_EVENT_TYPE", "Attempts", "append_key", "check_claim", "check_idempotency_key", "claim",
           "execution_id", "recorded", "request_hash"]
