"""Helpers shared by the end-to-end tests: a seeded example workspace, the server command, and a
test client that keeps custom methods as plain JSON (pygls would rename `"scope.agent.agent_name"`)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, default_converter
from pytest_lsp import LanguageClient
from pytest_lsp.client import register_lsp_features
from pytest_lsp.protocol import LanguageClientProtocol

from context_assembly.client.connection import Connection, ConnectionLost
from context_assembly.lsp import pygls_compat as compat
from context_assembly.runtime import Runtime
from context_assembly.stores.importer import import_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "quickstart"
SERVER = [sys.executable, "-m", "context_assembly", "serve"]
REQUEST: dict[str, Any] = json.loads((EXAMPLE / "request.json").read_text())


def seeded_copy(target: Path) -> Path:
    """examples/quickstart with its seed.json imported (KV, vectors, turns, graph)."""
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("db", "kuzu", "context", ".locks"))
    runtime = Runtime(target)
    try:
        import_file(runtime.memory, target / "seed.json", runtime.layout.codebolt)
    finally:
        runtime.close()
    return target


def clone(template: Path, target: Path) -> Path:
    shutil.copytree(template, target, ignore=shutil.ignore_patterns(".locks"))
    return target


class PlainClientProtocol(compat.NotificationHook, LanguageClientProtocol):
    """Custom requests' results and custom notifications stay plain JSON; custom notifications are kept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notifications: list[tuple[str, Any]] = []

    def structure_message(self, data: Any) -> Any:
        if not isinstance(data, dict) or "jsonrpc" not in data:
            return data
        method = data.get("method")
        if isinstance(method, str) and self.get_message_type(method) is None:
            if "id" in data:
                return JsonRPCRequestMessage(id=data["id"], method=method, jsonrpc="2.0", params=data.get("params"))
            return JsonRPCNotification(method=method, jsonrpc="2.0", params=data.get("params"))
        expected = compat.expected_results(self)
        if method is None and "id" in data and "error" not in data and data["id"] in expected \
                and expected[data["id"]] is None:
            expected.pop(data["id"])
            return JsonRPCResponseMessage(id=data["id"], jsonrpc="2.0", result=data.get("result"))
        return super().structure_message(data)

    def on_notification(self, method: str, params: Any) -> None:
        if self.get_message_type(method) is None:
            self.notifications.append((method, params))
        super().on_notification(method, params)


def make_client() -> LanguageClient:
    client = LanguageClient(protocol_cls=PlainClientProtocol, converter_factory=default_converter)
    register_lsp_features(client)
    client.registrations = []  # type: ignore[attr-defined]

    @client.feature("client/registerCapability")
    def register_capability(ls: LanguageClient, params: Any) -> None:
        ls.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    for method in ("contextAssembly/started", "contextAssembly/rulesEvaluated", "contextAssembly/pipelineComplete",
                   "contextAssembly/complete", "contextAssembly/error", "memoryIngestion/executionStarted",
                   "memoryIngestion/processorCompleted", "memoryIngestion/executionCompleted"):
        client.feature(method)(lambda ls, params: None)  # kept by the protocol; silences "unknown method"
    return client


def events(client: LanguageClient, assembly_id: str | None = None, prefix: str = "contextAssembly/") -> list[
        tuple[str, Any]]:
    found = client.protocol.notifications  # type: ignore[attr-defined]
    return [(m, p) for m, p in found if m.startswith(prefix)
            and (assembly_id is None or p.get("assembly_id") == assembly_id)]


async def call(client: LanguageClient, method: str, params: Any = None, msg_id: Any = None) -> Any:
    return await client.protocol.send_request_async(method, params, msg_id)


async def error_of(client: LanguageClient, method: str, params: Any = None) -> Any:
    """The JSON-RPC error a call answers with (a pygls JsonRpcException: .code, .message, .data)."""
    from pygls.exceptions import JsonRpcException

    try:
        result = await call(client, method, params)
    except JsonRpcException as exc:
        return exc
    raise AssertionError(f"{method} answered {result!r} instead of an error")


def paths(error: Any) -> list[str]:
    return [e["path"] for e in (error.data or {}).get("errors", [])]


def frame(message: Any) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class RawServer:
    """The server over raw pipes, for input no well-behaved client would send."""

    def __init__(self, workspace: Path, *args: str) -> None:
        import subprocess

        self.workspace = workspace
        self.process = subprocess.Popen([*SERVER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=workspace)
        self.buffer = b""
        self.received: list[dict[str, Any]] = []

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def alive(self) -> bool:
        return self.process.poll() is None

    def _pump(self, timeout: float) -> None:
        import os
        import select

        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if ready:
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError("the server closed its output")
            self.buffer += chunk
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = int(self.buffer[:end].split(b":")[1])
            if len(self.buffer) < end + 4 + length:
                break
            self.received.append(json.loads(self.buffer[end + 4:end + 4 + length]))
            self.buffer = self.buffer[end + 4 + length:]

    def answer(self, msg_id: Any, timeout: float = 20.0) -> dict[str, Any]:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.received:
                if message.get("id") == msg_id and "method" not in message:
                    self.received.remove(message)
                    return message
            self._pump(0.05)
        raise AssertionError(f"no answer to {msg_id!r}")

    def initialize(self, options: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send(frame({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "processId": None, "rootUri": self.workspace.as_uri(), "capabilities": {},
            **({"initializationOptions": options} if options is not None else {})}}))
        result = self.answer("init")
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        return result

    def close(self) -> int:
        if self.alive():
            self.send(frame({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"}))
            self.answer("bye")
            self.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        return self.process.wait(10)


class Served:
    """`serve --tcp` or `--ws` in a subprocess, listening on `port` (its stderr read on, so a chatty
    server never blocks on a full pipe)."""

    def __init__(self, process: asyncio.subprocess.Process, scheme: str, port: int) -> None:
        self.process, self.scheme, self.port = process, scheme, port
        self.stderr: list[bytes] = []
        self._reading = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr.append(line)

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.terminate()
        code = await asyncio.wait_for(self.process.wait(), 20)
        await asyncio.wait_for(self._reading, 20)
        return code


async def start(workspace: Path, transport: str, *args: str, token: str | None = None,
                host: str = "127.0.0.1", cwd: Path | None = None) -> Served:
    """The server on a free port of `host` (the token, if any, from the environment); `cwd`: run
    there without `--workspace`."""
    env = {k: v for k, v in os.environ.items() if k != "CONTEXT_ASSEMBLY_TOKEN"}
    if token is not None:
        env["CONTEXT_ASSEMBLY_TOKEN"] = token
    pinned = ["--workspace", str(workspace)] if cwd is None else []
    process = await asyncio.create_subprocess_exec(*SERVER, f"--{transport}", f"{host}:0", *pinned,
                                                   *args, stdin=subprocess.DEVNULL, cwd=cwd,
                                                   stderr=asyncio.subprocess.PIPE, env=env)
    assert process.stderr is not None
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert line, "the server exited before listening"
        match = re.search(r"listening on (tcp|tls|ws|wss)://[^:]+:(\d+)", line)
        if match:
            return Served(process, match.group(1), int(match.group(2)))


async def admitted(connect: Callable[[], Awaitable[Connection]]) -> Connection:
    """The connection a full server takes once a place frees: `connect` retried until it is kept."""
    while True:
        try:
            return await connect()
        except ConnectionLost:
            await asyncio.sleep(0.1)
