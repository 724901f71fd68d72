"""Asking the connected client's model (`llm/complete`, SPEC §7) from a pipeline step.

The sidecar holds no model and no keys: the client runs it. A step must not hang on it, so the
call runs on a thread of its own and the step waits at most MODEL_TIMEOUT_S, and never more than
half the time left before its deadline: a model that does not answer still leaves the step and
the ones after it time to finish with the step's fallback. Every way of not getting an answer
(no model offered, too slow, an error, an empty answer) is a ModelUnavailable saying why, for the
step's warning.
"""

from __future__ import annotations

import concurrent.futures as futures
import threading
import time
from typing import Any

from .context import Llm, StepContext

MODEL_TIMEOUT_S = 3.0
_POLL_S = 0.05  # how often a wait looks for cancellation


class ModelUnavailable(Exception):
    """No usable answer from the client's model; the message says why."""


def ask_model(ctx: StepContext, request: dict[str, Any]) -> str:
    """The model's answer text (stripped, non-empty), or ModelUnavailable."""
    if ctx.llm is None:
        raise ModelUnavailable("the client offers no model (llm/complete)")
    wait = MODEL_TIMEOUT_S
    if ctx.deadline is not None:
        wait = min(wait, (ctx.deadline - time.monotonic()) / 2)
    if wait <= 0:
        raise ModelUnavailable("no time was left to ask the model")
    answer: futures.Future[Any] = futures.Future()
    # a daemon thread per call, not a pool: a call left waiting on a slow client (the connection
    # bounds it) must not hold up the next pipeline's call, nor the process's exit
    threading.Thread(target=_call, args=(ctx.llm, request, answer), name="pipeline-llm", daemon=True).start()
    give_up = time.monotonic() + wait
    while not answer.done():
        left = give_up - time.monotonic()
        if left <= 0:
            raise ModelUnavailable(f"the model did not answer within {wait * 1000:.0f} ms")
        ctx.check()  # a cancelled run stops waiting at once
        futures.wait([answer], timeout=min(left, _POLL_S))
    try:
        result = answer.result()
    except Exception as exc:  # an error of the client or the connection: the step falls back
        raise ModelUnavailable(f"the model failed: {getattr(exc, 'message', None) or exc}") from None
    text = result.get("text") if isinstance(result, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise ModelUnavailable("the model gave no text")
    return text.strip()


def _call(llm: Llm, request: dict[str, Any], answer: futures.Future[Any]) -> None:
    try:
        answer.set_result(llm(request))
    except BaseException as exc:  # handed to the waiting step, which reports it
        answer.set_exception(exc)
