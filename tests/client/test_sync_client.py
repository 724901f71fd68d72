"""SyncContextAssemblyClient: the same calls without an event loop, and a clean exit either way."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.client import NotFoundError, SyncContextAssemblyClient
from tests.lsp.support import REQUEST


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def client_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "context-assembly-client" and t.is_alive()]


def test_sync_client(workspace: Path) -> None:
    events: list[str] = []
    with SyncContextAssemblyClient(workspace) as client:
        client.on("contextAssembly/started", lambda method, params: events.append(params["assembly_id"]))
        mine: list[str] = []
        result = client.assemble(REQUEST, on_event=lambda method, params: mine.append(method))
        assert events == [result["meta"]["assembly_id"]] and mine[-1] == "contextAssembly/complete"
        assert client.memory.write("kv://sync/k", {"a.b": 1})["written"] is True
        assert client.memory.read("kv://sync/k")["value"] == {"a.b": 1}
        assert "planning" in {e["id"] for e in client.rule_engines.list()}
        assert client.persistent_memory.get("recent-history")["id"] == "recent-history"
        assert client.ingestion.list()
        with pytest.raises(NotFoundError):
            client.rule_engines.get("ghost")
        pid = client.client.pid
    assert pid is not None and gone(pid) and client.client.returncode == 0
    assert client_threads() == []  # the loop thread is gone too
    with pytest.raises(RuntimeError):
        client.memory_types()


def test_sync_client_exits_cleanly_when_the_block_raises(workspace: Path) -> None:
    pid: Any = None
    with pytest.raises(KeyError), SyncContextAssemblyClient(workspace) as client:
        pid = client.client.pid
        raise KeyError("boom")
    assert pid is not None and gone(pid)


def test_plain_methods_write_to_the_sidecar_from_the_loop_thread_only(workspace: Path) -> None:
    """`set_settings` (a notification) was written from the caller's thread while the loop thread
    wrote requests: two writers on one pipe. Every write now comes from the loop's thread."""
    with SyncContextAssemblyClient(workspace) as client:
        writers: set[str] = set()
        connection = client.client.connection
        send = connection.protocol.send_data

        def recording(data: Any) -> None:
            writers.add(threading.current_thread().name)
            send(data)

        connection.protocol.send_data = recording  # type: ignore[method-assign]
        client.set_settings({"max_tokens": 1234})
        assert client.memory_types()  # a request after it
        unsubscribe = client.on("contextAssembly/started", lambda method, params: None)
        unsubscribe()
    assert writers == {"context-assembly-client"}


@contextlib.contextmanager
def graph_held(workspace: Path) -> Iterator[None]:
    """The graph's lock, taken as another process takes it (see tests/lsp/test_concurrency.py)."""
    locks = workspace / ".codebolt" / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / "kuzu.lock", os.O_RDWR | os.O_CREAT, 0o644)
    want = os.open(locks / "kuzu.want", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(want, fcntl.LOCK_EX)
        deadline = time.monotonic() + 20
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the graph lock stayed busy"
                time.sleep(0.02)
        fcntl.flock(want, fcntl.LOCK_UN)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        os.close(want)


def test_a_call_past_its_timeout_is_cancelled_in_the_sidecar_too(workspace: Path) -> None:
    """Calls waited for ever, and a caller that gave up left the sidecar working on."""
    request = {**REQUEST, "assembly_id": "held", "explicit_memory": ["session-dependents"]}
    ended: list[dict[str, Any]] = []
    for wrong in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            SyncContextAssemblyClient(workspace, call_timeout=wrong)
    with SyncContextAssemblyClient(workspace, call_timeout=1.0) as client:
        client.on("contextAssembly/error", lambda method, params: ended.append(params))
        with graph_held(workspace):
            started = time.monotonic()
            with pytest.raises(TimeoutError, match="call_timeout"):
                client.assemble(request)
            assert time.monotonic() - started < 5
        deadline = time.monotonic() + 20
        while not ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e["assembly_id"], e["code"]) for e in ended] == [("held", -32800)]  # cancelled there, not finished
        assert client.memory.read("kv://users/u-ada")["exists"] is True  # and it keeps serving


def test_ctrl_c_during_a_call_cancels_it_in_the_sidecar(workspace: Path) -> None:
    request = {**REQUEST, "assembly_id": "interrupted", "explicit_memory": ["session-dependents"]}
    ended: list[dict[str, Any]] = []
    with SyncContextAssemblyClient(workspace) as client:
        client.on("contextAssembly/error", lambda method, params: ended.append(params))
        with graph_held(workspace):
            ctrl_c = threading.Timer(0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
            ctrl_c.start()
            with pytest.raises(KeyboardInterrupt):
                client.assemble(request)
        deadline = time.monotonic() + 20
        while not ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e["assembly_id"], e["code"]) for e in ended] == [("interrupted", -32800)]
        assert client.memory.read("kv://users/u-ada")["exists"] is True
