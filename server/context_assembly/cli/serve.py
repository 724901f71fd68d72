"""`context-assembly serve`: the JSON-RPC sidecar over stdio (default), TCP or WebSocket (SPEC §8)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from pathlib import Path

from ..lsp import polling

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
MALLOC_ARENAS = 2
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters
KEEP_FREED = 16 << 20  # freed heap kept for the next answers rather than handed back to the system
OWN_PAGES_FROM = 8 << 20  # an allocation this large gets pages of its own (returned when freed)


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


def busy_poll_ms(text: str) -> float:
    """Milliseconds from 0 (no polling) to 1000."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, got {text!r}") from None
    try:
        polling.window_s(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


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
                        help="the workspace root (default: the client's rootUri / first workspace folder; with a "
                             "token, the nearest folder holding .codebolt/ from the current directory: a client "
                             "never chooses the workspace, and so the access policy, itself)")
    parser.add_argument("--token-file", type=Path, metavar="FILE",
                        help="TCP/WebSocket: clients must present a token from FILE (one token, or "
                             "{\"tokens\": {name: token}}) as initializationOptions.token; "
                             "also read from $CONTEXT_ASSEMBLY_TOKEN")
    parser.add_argument("--tls-cert", type=Path, metavar="FILE", help="TCP/WebSocket over TLS: the certificate (PEM)")
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="TCP/WebSocket over TLS: the private key (PEM)")
    parser.add_argument("--max-connections", type=int, default=16, metavar="N",
                        help="TCP/WebSocket: at most N clients at once (default: 16)")
    parser.add_argument("--auth-timeout", type=float, metavar="SECONDS",  # (transports.AUTH_TIMEOUT_S)
                        help="TCP/WebSocket with a token: a client that has not presented a valid one within "
                             "SECONDS is disconnected, freeing its place (default: 10)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="--ws: a web page origin let in besides this machine's (e.g. https://ui.example.com; "
                             "repeatable); a browser's handshake from any other origin is refused")
    parser.add_argument("--workers", type=int, default=8, metavar="N",
                        help="threads that run requests, shared by every connection in turn (default: 8)")
    parser.add_argument("--max-in-flight", type=int, default=64, metavar="N",  # (in_flight.MAX_IN_FLIGHT)
                        help="TCP/WebSocket: a client's next message is read once fewer than N of its requests "
                             "are unanswered (default: 64)")
    parser.add_argument("--busy-poll-ms", type=busy_poll_ms, default=polling.DEFAULT_MS, metavar="MS",
                        help="while the client sends its next message quickly, look for it for up to MS "
                             "milliseconds before sleeping: it is then read without a wake-up (~40 µs sooner), "
                             f"at the cost of that CPU time; 0 turns it off (default: {polling.DEFAULT_MS:g})")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="logging on stderr (default: WARNING)")
    parser.set_defaults(run=run)


def limit_malloc_arenas(count: int = MALLOC_ARENAS) -> bool:
    """Ask glibc for at most `count` allocator arenas, before any thread starts. By default every
    thread that allocates may get its own (up to 8 per core), each keeping freed memory: the soak
    bench measured about 80 MB less resident memory with 2 after the same number of rounds. An
    explicit MALLOC_ARENA_MAX wins; elsewhere than glibc this does nothing."""
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return bool(ctypes.CDLL(None).mallopt(M_ARENA_MAX, count))
    except (OSError, AttributeError):  # another C library (musl has no mallopt)
        return False


def keep_freed_memory(keep: int = KEEP_FREED, own_pages_from: int = OWN_PAGES_FROM) -> bool:
    """Ask glibc to keep up to `keep` bytes of freed heap instead of returning it to the system at
    once. By default it returns the heap's free top beyond about twice the largest block freed so
    far: the ~1 MB an `"explain": "none"` answer on 17,400 rules allocates (its pieces joined,
    encoded, framed) went back after every answer and was faulted in again by the next, ~250
    page faults a request at ~1.7 µs each on the VMs here (~0.4 ms of a ~4 ms answer). Explicit
    MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ win; elsewhere than glibc this does nothing."""
    if {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"} & os.environ.keys() or not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        # setting either fixes both (glibc stops adapting them), so both are set
        return bool(libc.mallopt(M_MMAP_THRESHOLD, own_pages_from)) and bool(libc.mallopt(M_TRIM_THRESHOLD, keep))
    except (OSError, AttributeError):  # another C library (musl has no mallopt)
        return False


def run(args: argparse.Namespace) -> int:
    limit_malloc_arenas()
    keep_freed_memory()
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, args.log_level),
                        format="context-assembly %(levelname)s %(name)s: %(message)s")
    if args.workspace is not None and not args.workspace.is_dir():
        print(f"context-assembly serve: no such directory: {args.workspace}", file=sys.stderr)
        return 2
    if args.max_in_flight < 1:  # (checked whatever the transport: stdio has no cap, but 0 is no value)
        return _fail("--max-in-flight must be at least 1")
    from ..lsp.server import build_server  # late: `context-assembly check` need not import pygls

    root = args.workspace.resolve() if args.workspace else None
    if args.tcp or args.ws:
        code = _serve_network(args, root)
    else:
        from ..lsp.transports import run as serve

        code = serve(build_server(root), busy_poll_s=args.busy_poll_ms / 1000)
    # Worker threads may still wait on a store (a cancelled pipeline); the session is closed and
    # the answer sent, so do not let them hold the process.
    sys.stderr.flush()
    os._exit(code)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _fail(message: str) -> int:
    print(f"context-assembly serve: {message}", file=sys.stderr)
    return 2


def _serve_network(args: argparse.Namespace, root: Path | None) -> int:
    import ssl

    from ..lsp.server import build_server
    from ..lsp.transports import AUTH_TIMEOUT_S, Network, run_network
    from ..lsp.workers import SharedWorkers
    from ..methods.access import load_tokens
    from ..methods.session import LINGER_S, SharedRuntimes
    from .terminal import find_root  # (late: `serve` over stdio imports no other command's module)

    transport, (host, port) = ("tcp", args.tcp) if args.tcp else ("ws", args.ws)
    try:
        tokens = load_tokens(args.token_file)
    except (OSError, ValueError) as exc:
        return _fail(f"cannot read the token file: {exc}")
    if not tokens and not is_loopback(host):
        return _fail(f"refusing to listen on {host} without a token: anyone who can reach it could read and "
                     "write all memory (set CONTEXT_ASSEMBLY_TOKEN or pass --token-file)")
    if (args.tls_cert is None) != (args.tls_key is None):
        return _fail("TLS needs both --tls-cert and --tls-key")
    if args.max_connections < 1:
        return _fail("--max-connections must be at least 1")
    if args.workers < 1:
        return _fail("--workers must be at least 1")
    auth_timeout = AUTH_TIMEOUT_S if args.auth_timeout is None else args.auth_timeout
    if not auth_timeout > 0:
        return _fail("--auth-timeout must be more than 0 seconds")
    if tokens and root is None:
        # A token holder's rootUri would choose the workspace, and with it the access policy (none
        # there: every right) and the files `file://` reads (rootUri "/": the whole disk, the token
        # file included). With tokens the workspace is the server's: the one found from here, and
        # never the current folder as such (a service manager starts processes in "/").
        found = find_root(Path.cwd())
        if found is None:
            return _fail(f"no .codebolt/ folder in {Path.cwd()} or any folder above it: with a token, give the "
                         "workspace to serve (--workspace DIR)")
        root = found.resolve()
        logger.warning("serving the workspace %s to every token (give --workspace to choose another)", root)
    context = None
    if args.tls_cert is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as exc:
            return _fail(f"cannot load the TLS certificate and key: {exc}")
    runtimes = SharedRuntimes(linger_s=LINGER_S)
    workers = SharedWorkers(args.workers)  # one pool for every connection: N clients never mean N pools
    network = Network(lambda: build_server(root, runtimes=runtimes, tokens=tokens, shared_workers=workers),
                      max_connections=args.max_connections, ssl=context, auth_timeout_s=auth_timeout,
                      allowed_origins=tuple(args.allow_origin), max_in_flight=args.max_in_flight)
    try:
        return run_network(network, transport, host, port, busy_poll_s=args.busy_poll_ms / 1000)
    finally:
        runtimes.close()
