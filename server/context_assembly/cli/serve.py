"""`context-assembly serve`: the JSON-RPC sidecar over stdio (default), TCP or WebSocket (SPEC §8)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

LOOPBACK = "127.0.0.1"


def address(text: str) -> tuple[str, int]:
    """`PORT`, `:PORT`, `HOST:PORT` or `[IPv6]:PORT`; the host defaults to loopback."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or LOOPBACK
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {number}")
    return host, number


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "serve", help="run the JSON-RPC sidecar (LSP framing) for agents and editors",
        description="Serve every contextAssembly/*, contextRuleEngine/*, persistentMemory/*, memoryIngestion/* "
                    "and memory/* method over JSON-RPC with LSP framing: stdio by default, or TCP / WebSocket "
                    "(bound to 127.0.0.1 unless a host is given; port 0 picks a free one, printed on stderr).",
    )
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--tcp", type=address, metavar="HOST:PORT", help="listen on TCP")
    transport.add_argument("--ws", type=address, metavar="HOST:PORT", help="listen for a WebSocket client")
    parser.add_argument("--workspace", type=Path,
                        help="the workspace root (default: the client's rootUri / first workspace folder)")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="logging on stderr (default: WARNING)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, args.log_level),
                        format="context-assembly %(levelname)s %(name)s: %(message)s")
    if args.workspace is not None and not args.workspace.is_dir():
        print(f"context-assembly serve: no such directory: {args.workspace}", file=sys.stderr)
        return 2
    from ..lsp.server import build_server  # late: `context-assembly check` need not import pygls
    from ..lsp.transports import run as serve

    server = build_server(args.workspace.resolve() if args.workspace else None)
    if args.tcp:
        code = serve(server, "tcp", *args.tcp)
    elif args.ws:
        code = serve(server, "ws", *args.ws)
    else:
        code = serve(server)
    # Worker threads may still wait on a store (a cancelled pipeline); the session is closed and
    # the answer sent, so do not let them hold the process.
    sys.stderr.flush()
    os._exit(code)
