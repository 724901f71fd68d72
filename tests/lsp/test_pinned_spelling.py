"""`serve --workspace REAL` while the client names the same folder through a symlink: the server
answers in the client's spelling, as it does without `--workspace` (test_symlinked_workspace.py)."""

from __future__ import annotations

import json
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


def test_a_link_the_client_named_cannot_take_the_server_out_of_the_pinned_folder(tmp_path: Path) -> None:
    """The client names the pinned folder through a link it controls, then points the link elsewhere
    before the session is built: the pinned folder is still the one served (resolved once, at
    `initialize`; with tokens the pinned folder is the boundary of what a client may touch)."""
    def make(folder: Path, engine: str) -> Path:
        (folder / ".codebolt" / "context-rule-engines").mkdir(parents=True)
        (folder / ".codebolt" / "context-rule-engines" / f"{engine}.json").write_text(
            json.dumps({"id": engine, "name": engine, "enabled": True, "rules": []}))
        return folder

    pinned, other = make(tmp_path / "pinned", "pinned-engine"), make(tmp_path / "other", "other-engine")
    link = tmp_path / "link"
    link.symlink_to(pinned, target_is_directory=True)
    server = RawServer(link, "--workspace", str(pinned))
    try:
        server.send(frame({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "processId": None, "rootUri": link.as_uri(), "capabilities": {}}}))
        server.answer("init")
        link.unlink()
        link.symlink_to(other, target_is_directory=True)
        server.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        server.send(frame({"jsonrpc": "2.0", "id": 1, "method": "contextRuleEngine/list", "params": {}}))
        answer = server.answer(1)
        assert [e["id"] for e in answer["result"]["items"]] == ["pinned-engine"], answer
    finally:
        server.close()
