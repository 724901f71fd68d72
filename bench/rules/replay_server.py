"""The transport floor for `paired.py`: a server that answers each `evaluateRules` request at once
with the answer the real sidecar gave to the same params, recorded before.

    python bench/rules/replay_server.py RECORDING

It does no work a rule engine could save: plain reads and writes on stdin / stdout (polling for the
next message as `serve` does, `--busy-poll-ms`), the request parsed once, the recorded answer's
bytes written behind the id, no event loop and no pygls. What a client waits for through it is what
sending, writing, reading and decoding an answer of that size costs; no server, however fast it
evaluated, answers sooner over the same pipe to the same client. RECORDING: a pickle of {params as
sorted-key JSON bytes: result as JSON bytes} (`paired.py` writes it). Answers `initialize` and
`shutdown`, exits on `exit`; a request it has no recording for gets an error.

    python bench/rules/replay_server.py RECORDING --match WORKSPACE

The *matching floor*: before writing the recorded answer, it does what every answer of the sidecar
does before settling anything, as the sidecar does it: parse and validate the params
(`parse_request`), see that the workspace is as last loaded, build the variable lookup and run the
workspace's matchers (fused, once the background compiler has made them), for the rule indexes
that hold. The first time it sees a request it answers it as the sidecar would (the whole
evaluation, which compiles what later requests read), then from the recording. What a client
waits for through it is the least a server built on these matchers answers in, settling, the
answer's JSON and the event loop free.
"""

from __future__ import annotations

import argparse
import os
import pickle
import select
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from context_assembly.lsp.polling import SHARED_S

STDIN, STDOUT = 0, 1
HEADER_END = b"\r\n\r\n"


def write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(STDOUT, view):]


def respond(msg_id: object, result: bytes) -> None:
    body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (orjson.dumps(msg_id), result)
    write(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def refuse(msg_id: object, message: str) -> None:
    body = orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32602, "message": message}})
    write(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def reader(window_s: float) -> Callable[[], bytes]:
    """What reads stdin: it polls for up to `window_s` before it blocks while the last wait was
    shorter than that, by the rules the sidecar's event loop follows (`serve --busy-poll-ms`,
    lsp/polling.py), so the floor keeps what the sidecar gains."""
    if window_s <= 0:
        return lambda: os.read(STDIN, 1 << 20)
    os.set_blocking(STDIN, False)
    quick = False

    def read() -> bytes:
        nonlocal quick
        start = time.monotonic()
        polling, waited = quick, False
        while True:
            try:
                chunk = os.read(STDIN, 1 << 20)
            except BlockingIOError:
                waited = True
                now = time.monotonic()
                if polling and now < start + window_s:
                    os.sched_yield()
                    polling = time.monotonic() - now <= SHARED_S  # another process wanted this CPU: block
                else:
                    select.select([STDIN], [], [])
                continue
            if waited:  # (what was there already says nothing of the client's pace)
                quick = time.monotonic() - start < window_s
            return chunk

    return read


def bodies(read: Callable[[], bytes]) -> Iterator[bytes]:
    """Each message body read from stdin, until it closes."""
    buffer = bytearray()
    while True:
        end = buffer.find(HEADER_END)
        if end < 0:
            chunk = read()
            if not chunk:
                return
            buffer += chunk
            continue
        length = next(int(line.split(b":", 1)[1]) for line in bytes(buffer[:end]).split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        start = end + len(HEADER_END)
        while len(buffer) < start + length:
            chunk = read()
            if not chunk:
                return
            buffer += chunk
        yield bytes(buffer[start:start + length])
        del buffer[:start + length]


def matcher(workspace: Path) -> Callable[[str, Any, bytes], None]:
    """`--match`: what every answer runs before settling, over the workspace (see the docstring)."""
    from context_assembly.assembly.request import parse_request
    from context_assembly.collector import paused
    from context_assembly.methods.call import CallContext
    from context_assembly.methods.session import Session
    from context_assembly.methods.table import call

    session = Session(workspace)
    seen: set[bytes] = set()

    def match(method: str, params: Any, key: bytes) -> None:
        with paused():  # as the sidecar answers (lsp/protocol.py)
            if key not in seen:  # the whole evaluation once, as the sidecar answers it
                seen.add(key)
                call(session, method, params, CallContext(encodes=True))
                return
            request = parse_request(params)
            rule_set = session.workspace().rule_set
            rule_set.matches(session.runtime.lookup(request)[0], request.rule_engine_ids)

    return match


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recording", type=Path)
    ap.add_argument("--match", type=Path, metavar="WORKSPACE", help="the matching floor over this workspace")
    ap.add_argument("--busy-poll-ms", type=float, default=0.5, metavar="MS",
                    help="poll stdin for MS milliseconds after each message before blocking, as `serve` "
                         "does by default (0: block at once)")
    args = ap.parse_args()
    answers: dict[bytes, bytes] = pickle.loads(args.recording.read_bytes())
    match = matcher(args.match) if args.match is not None else None
    for body in bodies(reader(args.busy_poll_ms / 1000)):
        message = orjson.loads(body)
        method, msg_id = message.get("method"), message.get("id")
        if method == "exit":
            return 0
        if msg_id is None:
            continue  # a notification
        if method == "initialize":
            respond(msg_id, b'{"capabilities":{},"serverInfo":{"name":"replay","version":"0"}}')
        elif method == "shutdown":
            respond(msg_id, b"null")
        else:
            key = orjson.dumps(message.get("params"), option=orjson.OPT_SORT_KEYS)
            answer = answers.get(key)
            if match is not None and answer is not None:
                match(method, message.get("params"), key)
            if answer is None:
                refuse(msg_id, f"no answer recorded for these params of {method}")
            else:
                respond(msg_id, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
