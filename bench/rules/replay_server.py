"""The transport floor for `paired.py`: a server that answers each `evaluateRules` request at once
with the answer the real sidecar gave to the same params, recorded before.

    python bench/rules/replay_server.py RECORDING

It does no work a rule engine could save: blocking reads and writes on stdin / stdout, the
request parsed once, the recorded answer's bytes written behind the id, no event loop and no
pygls. What a client waits for through it is what sending, writing, reading and decoding an
answer of that size costs; no server, however fast it evaluated, answers sooner over the same
pipe to the same client. RECORDING: a pickle of {params as sorted-key JSON bytes: result as JSON
bytes} (`paired.py` writes it). Answers `initialize` and `shutdown`, exits on `exit`; a request it
has no recording for gets an error.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

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


def bodies() -> Iterator[bytes]:
    """Each message body read from stdin, until it closes."""
    buffer = bytearray()
    while True:
        end = buffer.find(HEADER_END)
        if end < 0:
            chunk = os.read(STDIN, 1 << 20)
            if not chunk:
                return
            buffer += chunk
            continue
        length = next(int(line.split(b":", 1)[1]) for line in bytes(buffer[:end]).split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        start = end + len(HEADER_END)
        while len(buffer) < start + length:
            chunk = os.read(STDIN, 1 << 20)
            if not chunk:
                return
            buffer += chunk
        yield bytes(buffer[start:start + length])
        del buffer[:start + length]


def main() -> int:
    answers: dict[bytes, bytes] = pickle.loads(Path(sys.argv[1]).read_bytes())
    for body in bodies():
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
            if answer is None:
                refuse(msg_id, f"no answer recorded for these params of {method}")
            else:
                respond(msg_id, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
