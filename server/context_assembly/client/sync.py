"""`SyncContextAssemblyClient`: the same client for code without an event loop.

It runs its own event loop on a daemon thread; every method blocks until the sidecar answers.
Event listeners and the `llm` callback run on that thread. The loop polls for answers as
`run`'s does (event_loop.py; `busy_poll_ms=0`: it does not).

    with SyncContextAssemblyClient("path/to/workspace") as client:
        context = client.assemble(request)
        client.rule_engines.list()
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

from ..lsp.polling import DEFAULT_MS
from .client import ContextAssemblyClient
from .event_loop import event_loop_factory

logger = logging.getLogger(__name__)

T = TypeVar("T")


class _Blocking:
    """The coroutine methods of `target`, made blocking."""

    def __init__(self, target: Any, owner: SyncContextAssemblyClient) -> None:
        self._target = target
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.iscoroutinefunction(value):
            timeout = None if name in _OWN_TIMEOUT else self._owner.call_timeout
            return lambda *args, **kwargs: self._owner._run(value(*args, **kwargs), timeout)
        if callable(value) and not isinstance(value, type):
            # a plain method (set_settings, on, a notification) runs on the loop's thread too: the
            # sidecar's pipe is written by that thread only (two writers could interleave bytes)
            return lambda *args, **kwargs: self._owner._run(_called(value, args, kwargs))
        return value


_OWN_TIMEOUT = frozenset({"start", "close"})  # bounded by the client's own `timeout`


async def _called(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return function(*args, **kwargs)


class SyncContextAssemblyClient:
    def __init__(self, workspace: Any, *, busy_poll_ms: float = DEFAULT_MS, call_timeout: float | None = None,
                 **options: Any) -> None:
        """The options of `ContextAssemblyClient`; `busy_poll_ms`: how long the loop polls for an
        answer before it blocks (0 to 1000, 0: not at all; ValueError outside that); `call_timeout`:
        seconds a call waits for its answer (None: as long as it takes), after which the request is
        cancelled (`$/cancelRequest`) and TimeoutError raised. Ctrl-C during a call cancels it too."""
        if call_timeout is not None and not 0 < call_timeout < float("inf"):
            raise ValueError(f"call_timeout must be a positive number of seconds or None (got {call_timeout!r})")
        self.call_timeout = call_timeout
        self._loop = event_loop_factory(busy_poll_ms)()
        self._thread = threading.Thread(target=self._loop.run_forever, name="context-assembly-client", daemon=True)
        self._thread.start()
        self._closed = False

        async def make() -> ContextAssemblyClient:
            return ContextAssemblyClient(workspace, **options)

        self.client = self._run(make())
        self.rule_engines = _Blocking(self.client.rule_engines, self)
        self.persistent_memory = _Blocking(self.client.persistent_memory, self)
        self.ingestion = _Blocking(self.client.ingestion, self)
        self.memory = _Blocking(self.client.memory, self)
        self._calls = _Blocking(self.client, self)

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if self._closed:
            coroutine.close()
            raise RuntimeError("the client is closed")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            if future.done():  # the call's own TimeoutError, not the wait's
                raise
            future.cancel()  # the task is cancelled on the loop: the sidecar gets $/cancelRequest
            raise TimeoutError(f"no answer within {timeout:g} s (call_timeout): the request was cancelled") from None
        except KeyboardInterrupt:
            future.cancel()  # Ctrl-C stops the work in the sidecar too, not only the wait here
            raise

    def __getattr__(self, name: str) -> Any:
        # start, assemble, validate, memory_types, evaluate_rules, required_variables, request, on, …
        return getattr(self._calls, name)

    def close(self) -> int | None:
        """Shut the sidecar down and stop the event loop thread. Its exit status."""
        if self._closed:
            return None
        try:
            code = self._run(self.client.close())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._loop.is_running():
                self._loop.close()
        return code

    def __enter__(self) -> SyncContextAssemblyClient:
        try:
            self._run(self.client.start())
        except BaseException:
            try:
                self.close()
            except Exception:  # noqa: BLE001 - never in place of why the start failed
                logger.debug("closing after a failed start failed", exc_info=True)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
