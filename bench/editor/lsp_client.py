"""A tiny LSP client over a subprocess's stdio, for timing: frames are encoded before the clock
starts, every server message is parsed once (orjson) and time-stamped when it is read, and the
server's own requests (configuration, registrations, progress) are answered at once."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

Message = dict[str, Any]


def encode(message: Message) -> bytes:
    body = orjson.dumps(message)
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class LspProcess:
    """One server process: `start()`, then `request`, `notify`, `wait_for` and `close()`."""

    def __init__(self, command: list[str], cwd: Path, settings: dict[str, Any]) -> None:
        self.command = command
        self.cwd = cwd
        self.settings = settings
        self.process: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[tuple[float, Message]]] = {}
        self._waiters: list[tuple[Callable[[Message], bool], asyncio.Future[tuple[float, Message]]]] = []
        self._reader: asyncio.Task[None] | None = None
        self.spawned_at = 0.0

    async def start(self) -> None:
        self.spawned_at = time.perf_counter()
        self.process = await asyncio.create_subprocess_exec(
            *self.command, cwd=self.cwd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=1 << 24)
        self._reader = asyncio.create_task(self._read_loop())

    # -- sending -----------------------------------------------------------------------------------

    async def send_bytes(self, data: bytes) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    def request_frame(self, method: str, params: Any) -> tuple[int, bytes]:
        msg_id = next(self._ids)
        return msg_id, encode({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    @staticmethod
    def notification_frame(method: str, params: Any) -> bytes:
        return encode({"jsonrpc": "2.0", "method": method, "params": params})

    def expect(self, msg_id: int) -> asyncio.Future[tuple[float, Message]]:
        future: asyncio.Future[tuple[float, Message]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        return future

    async def request(self, method: str, params: Any, timeout: float = 120.0) -> Any:
        msg_id, data = self.request_frame(method, params)
        future = self.expect(msg_id)
        await self.send_bytes(data)
        _, message = await asyncio.wait_for(future, timeout)
        if "error" in message:
            raise RuntimeError(f"{method} failed: {message['error']}")
        return message.get("result")

    async def notify(self, method: str, params: Any) -> None:
        await self.send_bytes(self.notification_frame(method, params))

    def wait_for(self, predicate: Callable[[Message], bool]) -> asyncio.Future[tuple[float, Message]]:
        """A future of (arrival time, message) for the next server notification `predicate` accepts."""
        future: asyncio.Future[tuple[float, Message]] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return future

    # -- receiving ---------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        while True:
            try:
                header = await stdout.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                break
            length = 0
            for line in header.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await stdout.readexactly(length)
            arrived = time.perf_counter()
            message = orjson.loads(body)
            await self._dispatch(arrived, message)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(EOFError("the server closed its output"))

    async def _dispatch(self, arrived: float, message: Message) -> None:
        method = message.get("method")
        if method is None:  # a response
            future = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result((arrived, message))
            return
        if "id" in message:  # the server's request
            result: Any = None
            if method == "workspace/configuration":
                result = [self.settings for _ in message.get("params", {}).get("items", [])]
            await self.send_bytes(encode({"jsonrpc": "2.0", "id": message["id"], "result": result}))
            return
        for waiter in list(self._waiters):
            predicate, future = waiter
            if not future.done() and predicate(message):
                future.set_result((arrived, message))
                self._waiters.remove(waiter)

    async def close(self) -> None:
        if self.process is None:
            return
        try:
            await self.request("shutdown", None, timeout=30)
            await self.notify("exit", None)
            await asyncio.wait_for(self.process.wait(), 30)
        except (Exception, asyncio.CancelledError):
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
        if self._reader is not None:
            self._reader.cancel()
