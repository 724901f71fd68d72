"""`serve --workspace REAL` while the client names the same folder through a symlink: the server
answers in the client's spelling, as it does without `--workspace` (test_symlinked_workspace.py)."""

from __future__ import annotations

import time
from pathlib import Path

from .support import RawServer, frame
from .test_symlinked_workspace import codebolt, linked


def test_serve_workspace_spelled_otherwise_answers_in_the_client_spelling(tmp_path: Path) -> None:
    link = linked(tmp_path, "linked-root")
    server = RawServer(link, "--workspace", str(link.resolve()))
    try:
        server.initialize()
        original = codebolt(link, "context-rule-engines", "review.json")
        copy = codebolt(link, "context-rule-engines", "zz-copy.json").as_uri()
        server.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": copy, "languageId": "json", "version": 1, "text": original.read_text()}}}))
        related: list[str] = []
        deadline = time.monotonic() + 20
        while not related and time.monotonic() < deadline:
            server._pump(0.1)
            related = [r["location"]["uri"] for m in server.received
                       if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == copy
                       for d in m["params"]["diagnostics"] if d["code"] == "duplicate-id"
                       for r in d.get("relatedInformation", [])]
        assert related == [original.as_uri()]  # not the resolved folder's spelling
    finally:
        server.close()
