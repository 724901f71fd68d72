"""SyncContextAssemblyClient: the same calls without an event loop, and a clean exit either way."""

from __future__ import annotations

import os
import threading
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
