"""Responsiveness over the real server: a second request is answered while an assembly waits on a
store, `$/cancelRequest` stops the waiting one with RequestCancelled, and the server keeps serving.

Deterministic without any test hook in the server: the test process holds the workspace's Kuzu lock
(`.codebolt/.locks/kuzu.lock`, the inter-process lock every sidecar takes before opening the graph),
so the assembly's graph pipeline (session-dependents) cannot finish until the test lets go.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .support import REQUEST, call, events

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.skipif(sys.platform == "win32", reason="holds the lock with fcntl")]


@contextlib.asynccontextmanager
async def graph_locked(workspace: Path) -> AsyncIterator[None]:
    """Take the graph's lock as another process would: saying so meanwhile (`<name>.want`, as
    `workspace_lock` does), since a sidecar keeps the graph open until someone asks for it."""
    locks = workspace / ".codebolt" / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / "kuzu.lock", os.O_RDWR | os.O_CREAT, 0o644)
    want = os.open(locks / "kuzu.want", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(want, fcntl.LOCK_EX)
        for _ in range(1000):  # the server lets go of the graph within its hold time
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(0.02)
        else:
            raise AssertionError("the graph lock stayed busy")
        fcntl.flock(want, fcntl.LOCK_UN)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        os.close(want)


async def until(condition: object, timeout: float = 15.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out waiting")


def fresh(assembly_id: str) -> dict[str, object]:
    """The example request under its own id, with its own text: pipeline results are cached per lookup."""
    return {**REQUEST, "assembly_id": assembly_id, "input": {"text": f"{REQUEST['input']['text']} ({assembly_id})"}}


def started(client: LanguageClient, assembly_id: str) -> bool:
    return any(m == "contextAssembly/rulesEvaluated" for m, _ in events(client, assembly_id))


async def test_a_second_request_is_answered_while_an_assembly_waits(client: LanguageClient,
                                                                   workspace: Path) -> None:
    async with graph_locked(workspace):
        slow = asyncio.ensure_future(call(client, "contextAssembly/assemble", fresh("slow-1")))
        await until(lambda: started(client, "slow-1"))
        read = await call(client, "memory/read", {"uri": "kv://users/u-ada"})
        rules = await call(client, "contextAssembly/evaluateRules", REQUEST)
        assert read["exists"] is True and rules["matched_memories"]
        await asyncio.sleep(0.2)
        assert not slow.done()  # still waiting on the graph
    result = await slow
    assert result["meta"]["assembly_id"] == "slow-1"
    call_of = {c["reference"]: c for c in result["trace"]["memory_calls"]}
    assert call_of["session-dependents"]["status"] == "ok"


async def test_cancel_request_answers_request_cancelled_and_stops_the_work(client: LanguageClient,
                                                                          workspace: Path) -> None:
    async with graph_locked(workspace):
        slow = asyncio.ensure_future(call(client, "contextAssembly/assemble",
                                          fresh("slow-2"), msg_id="cancel-me"))
        await until(lambda: started(client, "slow-2"))
        client.protocol.notify("$/cancelRequest", types.CancelParams(id="cancel-me"))
        with pytest.raises(JsonRpcException) as cancelled:
            await asyncio.wait_for(slow, 10)
        assert cancelled.value.code == -32800
    # once the graph is free the worker reaches its next check and gives up: no `complete`
    await until(lambda: [m for m, _ in events(client, "slow-2")][-1] == "contextAssembly/error")
    names = [m.removeprefix("contextAssembly/") for m, _ in events(client, "slow-2")]
    assert "complete" not in names
    error = events(client, "slow-2")[-1][1]
    assert error["code"] == -32800
    assert (await call(client, "memory/read", {"uri": "kv://users/u-ada"}))["exists"] is True


async def test_many_requests_in_flight(client: LanguageClient) -> None:
    calls = [call(client, "memory/read", {"uri": f"kv://load/{i}"}) for i in range(50)]
    calls += [call(client, "contextAssembly/assemble", {**REQUEST, "assembly_id": f"par-{i}"}) for i in range(4)]
    results = await asyncio.gather(*calls)
    assert [r["uri"] for r in results[:50]] == [f"kv://load/{i}" for i in range(50)]
    assert [r["meta"]["assembly_id"] for r in results[50:]] == [f"par-{i}" for i in range(4)]
