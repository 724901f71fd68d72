"""Rule evaluations with `"explain": "none"` answered by the event loop itself once the runtime is
settled (`Runtime.settled`: nothing to read, compile, open or ask over a network), in process: such
an answer is written before `receive` returns; anything else, or the same request while a file
changed, goes to a worker and answers exactly as before."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from context_assembly.lsp.server import ContextAssemblyServer, build_server
from context_assembly.runtime import Runtime

from .support import EXAMPLE, REQUEST, clone
from .test_protocol import Capture, answer, answered, reply, request

NONE = {**REQUEST, "explain": "none"}
ENGINE_FILE = Path(".codebolt") / "context-rule-engines" / "planning.json"


def fresh_example(target: Path) -> Path:
    """examples/quickstart without a database (nothing stored yet)."""
    return Path(shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks")))


async def opened(root: Path) -> tuple[ContextAssemblyServer, Capture]:
    server = build_server()
    server.attach(asyncio.get_running_loop())
    out = Capture()
    server.protocol.set_writer(out, include_headers=False)
    await answer(server, out, request("init", "initialize", {"capabilities": {}, "rootUri": root.as_uri()}), "init")
    server.protocol.receive(orjson.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    return server, out


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[ContextAssemblyServer, Capture, Path]]:
    root = fresh_example(tmp_path / "ws")
    server, out = await opened(root)
    for n in range(3):  # the first loads through workers; the watch is made by the second load
        assert "result" in await answer(server, out, request(f"warm-{n}", "contextAssembly/evaluateRules", NONE),
                                        f"warm-{n}")
    yield server, out, root
    server.close()


async def reply_to(out: Capture, msg_id: str) -> dict[str, Any]:
    """The answer to `msg_id`, waited for (a worker's)."""
    found: dict[str, Any] = await reply(out, msg_id, tries=1000)
    return found


def at_once(server: ContextAssemblyServer, out: Capture, message: dict[str, Any]) -> dict[str, Any] | None:
    """The answer written while `receive` ran (None: it went to a worker)."""
    server.protocol.receive(orjson.dumps(message))
    found: dict[str, Any] | None = answered(out, message["id"])
    return found


async def test_a_settled_none_evaluation_is_answered_before_receive_returns(
        served: tuple[ContextAssemblyServer, Capture, Path]) -> None:
    server, out, _ = served
    worker = out.messages[-1]  # warm-2's answer: a worker's, or already the loop's
    inline = at_once(server, out, request("now", "contextAssembly/evaluateRules", NONE))
    assert inline is not None
    assert inline["result"] == worker["result"]
    assert inline["result"]["matched_memories"]
    engine = at_once(server, out, request("one", "contextRuleEngine/evaluate", {**NONE, "id": "planning"}))
    assert engine is not None and [e["engine_id"] for e in engine["result"]["engine_results"]] == ["planning"]


async def test_a_compact_trace_is_answered_on_the_loop_once_a_worker_made_one(
        served: tuple[ContextAssemblyServer, Capture, Path]) -> None:
    server, out, root = served
    for explain in ("none", "all", "matched"):  # a packed "none" makes no bits: a trace is a worker's first
        params = {**REQUEST, "explain": explain, "trace_format": "compact"}
        first = at_once(server, out, request(f"{explain}-1", "contextAssembly/evaluateRules", params))
        if explain != "matched":
            assert first is None  # the trace programs and layouts (and bits) are made on a worker
            first = await reply_to(out, f"{explain}-1")
        assert first is not None and first["result"]["trace_format"] == "compact"
        again = at_once(server, out, request(f"{explain}-2", "contextAssembly/evaluateRules", params))
        assert again is not None and again["result"] == first["result"]
    # a subset of the engines, or one engine by id, may name one never traced: a worker's
    subset = {**REQUEST, "trace_format": "compact", "rule_engine_ids": ["planning"]}
    assert at_once(server, out, request("subset", "contextAssembly/evaluateRules", subset)) is None
    assert "result" in await reply_to(out, "subset")
    one = {**REQUEST, "trace_format": "compact", "id": "planning"}
    assert at_once(server, out, request("one", "contextRuleEngine/evaluate", one)) is None
    assert "result" in await reply_to(out, "one")
    path = root / ENGINE_FILE  # a new workspace version: its first compact answer is a worker's again
    path.write_text(path.read_text() + "\n")
    params = {**REQUEST, "trace_format": "compact"}
    assert at_once(server, out, request("edited", "contextAssembly/evaluateRules", params)) is None
    assert "result" in await reply_to(out, "edited")
    assert at_once(server, out, request("edited-2", "contextAssembly/evaluateRules", params)) is not None


async def test_other_modes_and_progress_go_to_a_worker_and_answer_the_same(
        served: tuple[ContextAssemblyServer, Capture, Path]) -> None:
    server, out, _ = served
    for msg_id, params in (("matched", {**REQUEST, "explain": "matched"}), ("all", REQUEST),
                           ("token", {**NONE, "workDoneToken": "w-1"})):
        assert at_once(server, out, request(msg_id, "contextAssembly/evaluateRules", params)) is None
        assert "result" in await reply_to(out, msg_id)
    progress = [m["params"]["value"]["kind"] for m in out.messages
                if m.get("method") == "$/progress" and m["params"]["token"] == "w-1"]
    assert progress == ["begin", "end"]


async def test_an_edited_rule_file_is_read_by_a_worker_before_the_loop_answers_again(
        served: tuple[ContextAssemblyServer, Capture, Path]) -> None:
    server, out, root = served
    path = root / ENGINE_FILE
    engine = json.loads(path.read_text())
    before = at_once(server, out, request("before", "contextAssembly/evaluateRules", NONE))
    assert before is not None and "planning-edited" not in before["result"]["matched_memories"]
    for rule in engine["rules"]:
        rule["then"] = {**rule.get("then", {}), "add_memories": ["planning-edited"]}
    path.write_text(json.dumps(engine))
    assert at_once(server, out, request("after", "contextAssembly/evaluateRules", NONE)) is None  # not settled
    after = await reply_to(out, "after")
    again = at_once(server, out, request("again", "contextAssembly/evaluateRules", NONE))
    assert again is not None  # settled again once a worker read the file
    for message in (after, again):
        assert "planning-edited" in message["result"]["matched_memories"], message


async def test_errors_on_the_loop_are_the_workers_errors(served: tuple[ContextAssemblyServer, Capture, Path]) -> None:
    server, out, _ = served
    bad = at_once(server, out, request("bad", "contextAssembly/evaluateRules",
                                       {**NONE, "scope_variables": "not an object"}))
    assert bad is not None and bad["error"]["code"] == -32602
    assert bad["error"]["data"]["errors"]
    missing = at_once(server, out, request("missing", "contextRuleEngine/evaluate", {**NONE, "id": "nope"}))
    assert missing is not None and missing["error"]["code"] == -32001
    assert at_once(server, out, request("fine", "contextAssembly/evaluateRules", NONE)) is not None  # still serving


async def test_a_workspace_with_a_database_answers_on_the_loop_once_its_stores_are_open(
        seeded_template: Path, tmp_path: Path) -> None:
    root = clone(seeded_template, tmp_path / "seeded")
    server, out = await opened(root)
    try:
        replies = []
        for n in range(4):  # the stores open on a worker (the turn count), never on the loop
            msg_id = f"seeded-{n}"
            reply = at_once(server, out, request(msg_id, "contextAssembly/evaluateRules", NONE))
            replies.append(reply if reply is not None else await reply_to(out, msg_id))
        assert at_once(server, out, request("seeded-now", "contextAssembly/evaluateRules", NONE)) is not None
        assert len({orjson.dumps(r["result"]) for r in replies}) == 1
        assert replies[0]["result"]["derived_variables"]  # the thread's turn count, from the episodic store
    finally:
        server.close()


def test_a_runtime_is_not_settled_while_anything_is_pending(tmp_path: Path) -> None:
    root = fresh_example(tmp_path / "ws")
    runtime = Runtime(root)
    try:
        assert not runtime.settled()  # never loaded
        runtime.workspace()
        runtime.workspace()  # the second load watches the folders
        assert runtime.settled()
        (root / ENGINE_FILE).write_text((root / ENGINE_FILE).read_text() + "\n")
        assert not runtime.settled()  # changed: the next load reads it
        runtime.workspace()
        assert runtime.settled()
        with runtime._lock:  # as while another thread loads it
            assert not runtime.settled()
    finally:
        runtime.close()
    postgres = fresh_example(tmp_path / "pg")
    settings = postgres / ".codebolt" / "context-assembly.json"
    document = json.loads(settings.read_text())
    document["stores"] = {"backend": "postgres", "dsn": "postgresql://127.0.0.1:1/none"}
    settings.write_text(json.dumps(document))
    runtime = Runtime(postgres)
    try:
        runtime.workspace()
        runtime.workspace()
        assert not runtime.settled()  # a turn count would be a round trip to the database
    finally:
        runtime.close()
