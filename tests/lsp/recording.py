"""A real `python -m context_assembly serve` whose stdout records `sys.modules` when a marked answer
is written: what the start-up and first-evaluation import guards read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# The server's stdout wrapped: the first write holding `marker` (argv[2]; empty: the first write
# at all) records the loaded modules, one per line, into argv[1].
RECORDING_SERVE = """
import runpy, sys

class Recorder:
    def __init__(self, stream, record, marker):
        self.stream, self.record, self.marker, self.written = stream, record, marker, False
    def write(self, data):
        if not self.written and self.marker in bytes(data):
            self.written = True
            with open(self.record, "w") as out:
                out.write("\\n".join(sorted(sys.modules)))
        return self.stream.write(data)
    def flush(self):
        self.stream.flush()

class Stdout:
    def __init__(self, buffer):
        self.buffer = buffer

sys.stdout = Stdout(Recorder(sys.stdout.buffer, sys.argv[1], sys.argv[2].encode()))
sys.argv = ["context-assembly", "serve"]
runpy.run_module("context_assembly", run_name="__main__", alter_sys=True)
"""


def recording_server(workspace: Path, record: Path, marker: str = "") -> subprocess.Popen[bytes]:
    """The server on `workspace`, recording into `record` when it first writes `marker`."""
    return subprocess.Popen([sys.executable, "-c", RECORDING_SERVE, str(record), marker], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=workspace)


def read_message(stream: Any) -> dict[str, Any]:
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    assert length, "the server closed its output"
    result: dict[str, Any] = json.loads(stream.read(length))
    return result


def recorded_modules(record: Path) -> set[str]:
    return set(record.read_text().splitlines())
