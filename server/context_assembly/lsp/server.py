"""The language server: lifecycle, the workspace session, and the plumbing each feature module
registers with once (`calls`, `config`, `watch`; editor features the same way).

`initialize` is answered before the engine is imported: it records the workspace root, and the
session is built on first use, or by the warm-up that `initialized` starts on a worker
(`require_session`). Editor features and the method table register from cheap data (names,
options) and import their implementations on first use: a method its family, an editor feature
all of the editor's (`require_editor`); the stores are built when something reads them.

Handlers of custom methods run on a worker pool (`workers`), so a long assembly never blocks the
event loop: a second request, a cancellation or a completion is answered meanwhile. Everything
that writes to the client runs on the event loop thread (`post`), which keeps the transport
single-threaded and the order of notifications before their response; except over stdio, whose
writer is thread-safe: there a request without a progress token is answered by its worker, which
also writes that request's notifications, in order (`protocol.Answer`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cattrs
from lsprotocol import types
from pygls.exceptions import FeatureRequestError, JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from .. import __version__
from ..collector import collect_frozen
from ..errors import ContextAssemblyError, TimeoutError_
from ..limits import DEFAULT as DEFAULT_LIMITS
from ..methods import IMPORTS
from ..workspace import uris
from . import pygls_compat as compat
from .errors import not_initialized
from .protocol import ClientGone, ContextAssemblyProtocol
from .workers import WORKERS, ConnectionWorkers, SharedWorkers, pool

if TYPE_CHECKING:
    from ..methods import Session
    from ..methods.access import ForbiddenError
    from ..methods.session import SharedRuntimes
    from ..workspace.places import Places
    from .editor_state import EditorState

logger = logging.getLogger(__name__)

LLM_TIMEOUT_S = 120.0  # how long an llm/complete may take the client
SHUTDOWN_GRACE_S = 5.0  # how long `shutdown` waits for requests in flight
METHOD_NOT_FOUND = -32601
LLM_OPTION = "llm"  # initializationOptions.llm = true: the client answers llm/complete
TOKEN_OPTION = "token"  # initializationOptions.token: the client's token (TCP, WebSocket)
SETTINGS_OPTION = "settings"  # initializationOptions.settings: overrides applied before any configuration

Hook = Callable[["ContextAssemblyServer"], Awaitable[None]]


@functools.cache
def shared_converter() -> cattrs.Converter:
    """lsprotocol's converter, made once per process: pygls made one per server, ~3 ms of the event
    loop for every TCP/WebSocket connection, a token or not (its hooks are registered once and only
    read after)."""
    from pygls.protocol import default_converter

    return default_converter()


class ContextAssemblyServer(LanguageServer):
    protocol: ContextAssemblyProtocol

    def __init__(self, workspace: Path | None = None, workers: int = WORKERS, *,
                 runtimes: SharedRuntimes | None = None, tokens: dict[str, str] | None = None,
                 shared_workers: SharedWorkers | None = None) -> None:
        super().__init__("context-assembly", __version__, protocol_cls=ContextAssemblyProtocol,
                         converter_factory=shared_converter, max_workers=workers)
        self.pinned_root = workspace  # `serve --workspace DIR` wins over the client's root
        self.session: Session | None = None  # built on first use after `initialize` (require_session)
        self._opening: tuple[Places, dict[str, Any], bool] | None = None  # what `initialize` asked for
        self._session_lock = threading.Lock()
        self.position_encoding = "utf-16"  # negotiated at `initialize`
        self.preload: list[Callable[[], None]] = []  # imports before the first editor feature runs (features)
        self._preloaded = False
        self.runtimes = runtimes  # shared with the other connections of this process (TCP, WebSocket)
        self.tokens = tokens or {}  # name -> token; empty: no token asked for (stdio)
        self.token_name: str | None = None  # set by an initialize with a valid token
        self.peer: str | None = None  # the client's address, for the access log
        # handlers' threads: this server's own pool, or its share of the pool all connections use
        self.workers: Executor = shared_workers.connection() if shared_workers is not None else pool(workers)
        # where the event loop's refusals are logged: not this connection's share, whose close
        # (right after a refused token) would cancel the write
        self.log_workers: Executor = shared_workers if shared_workers is not None else self.workers
        self.loop: asyncio.AbstractEventLoop | None = None
        self.llm_offered = False
        self.initial_settings: dict[str, Any] = {}
        self.exit_code: int | None = None
        self.stop_requested: asyncio.Event | None = None
        self.on_initialized: list[Hook] = []  # run once `initialized` arrives (configuration, watchers)
        self.on_workspace_changed: list[Callable[[Session], None]] = []  # after .codebolt/ changed on disk
        self.progress_cancels: dict[Any, Callable[[], None]] = {}  # work-done token -> cancel its request
        self.watching = False  # the client accepted our `.codebolt/` file watcher (see `watch`)
        self.editor: EditorState | None = None  # the editor features' state (features/state.py)

    # -- the session ------------------------------------------------------------------------------

    def require_session(self) -> Session:
        """The session of the workspace `initialize` named, built now if it was not yet (any thread:
        a second caller waits for the first)."""
        session = self.session
        if session is not None:
            return session
        with self._session_lock:
            if self.session is None:
                if self._opening is None:
                    raise not_initialized()
                self.session = self._build_session(*self._opening)
            return self.session

    async def open_session(self) -> Session | None:
        """The session, built on a worker if it was not yet (the event loop goes on meanwhile);
        None before `initialize`."""
        if self.session is not None or self._opening is None:
            return self.session
        return await asyncio.get_running_loop().run_in_executor(self.workers, self.require_session)

    def require_editor(self) -> Session:
        """The session, with the editor features' implementations imported (once, by one thread at a
        time with the method families: `IMPORTS`). A custom method imports only its own family."""
        session = self.require_session()
        if not self._preloaded:
            with IMPORTS:
                if not self._preloaded:
                    for load in self.preload:
                        load()
                    self._preloaded = True
        return session

    def _build_session(self, root: Places, settings: dict[str, Any], llm_offered: bool) -> Session:
        from ..methods import Session

        session = Session(root, llm=self.ask_llm if llm_offered else None, text_source=self.open_document_text,
                          runtimes=self.runtimes)
        session.position_encoding = self.position_encoding
        for problem in session.set_settings(settings):
            logger.warning("setting %s ignored: %s", problem.path or "", problem.message)
        if self.tokens:  # the policy of the settings file, read again at every check
            from ..methods.access import Access, settings_policy

            session.access = Access(self.token_name or "", settings_policy(session.workspace), self.log_refusal)
        return session

    @property
    def opened(self) -> bool:
        """`initialize` named the workspace (or `open` was called): requests may be served."""
        return self._opening is not None or self.session is not None

    def open(self, root: Path | Places, settings: dict[str, Any], llm_offered: bool) -> None:
        """Serve the workspace at `root` (its session is built on first use)."""
        from ..workspace.places import Places  # late: not needed to answer before `initialize`

        places = Places.of(root)
        if not places.root.is_dir():
            raise JsonRpcException(code=-32602,
                                   message=f"the workspace root {str(places.client_root)!r} is not a directory")
        with self._session_lock:
            if self.session is not None:  # a second initialize: the new root replaces the old session
                self.session.close()
                self.session = None
                if self.runtimes is None:  # its own runtime closed: frozen with its engines, kept for good
                    collect_frozen()
            self.llm_offered = llm_offered
            self.initial_settings = settings
            self._opening = (places, settings, llm_offered)

    @property
    def locked(self) -> bool:
        """A token is configured and this client has not presented a valid one yet."""
        return bool(self.tokens) and self.token_name is None

    def authenticate(self, presented: Any) -> None:
        """Check `initializationOptions.token`; a refusal is logged and closes the connection."""
        if not self.tokens:
            return
        from ..methods import access  # late: the policy matches URI patterns (only a server with tokens asks)

        name = access.token_name(self.tokens, presented)
        if name is not None:
            self.token_name = name
            return
        self.token_name = None
        error = access.ForbiddenError("a valid token is required: pass it as initializationOptions.token",
                               {"method": "initialize", "token": None})
        # the transport closes the connection after the answer goes out; the refusal's log write (on
        # the shared pool, which a closing connection does not cancel) is not waited for: behind
        # other clients' work it held the connection, and a place of --max-connections, for seconds
        self.logging_refusal(error)
        self.request_stop()
        raise JsonRpcException(code=error.code, message=error.message)

    def log_refusal(self, error: ForbiddenError) -> None:
        """The session's `Access` reports its refusals here (`logging_refusal`)."""
        self.logging_refusal(error)

    def logging_refusal(self, error: ForbiddenError) -> Future[None] | None:
        """Log a refusal in `log://access` within the process's rate (past it, only counted:
        `refusals.py`), never on the event loop: a worker's refusal is written by that worker, the
        event loop's by the shared pool (a flood of bad tokens held every client while SQLite
        wrote, or a runtime was built, there). The future of the pool's write, if any."""
        from .refusals import LIMIT

        at = time.time()
        suppressed = LIMIT.admit(functools.partial(self._append_late, error, self.peer, at))
        if suppressed is None:
            return None
        append = functools.partial(self._append_refusal, error, self.peer, suppressed, at)
        if not self.on_loop():
            append()
            return None
        try:
            return self.log_workers.submit(append)
        except RuntimeError:  # the pool is shut down: the process is stopping
            logger.warning("access refused: %s (%s)", error.message, self.peer or "unknown peer")
            return None

    def _append_late(self, error: ForbiddenError, peer: str | None, at: float, suppressed: int) -> None:
        """The last refusal of a flood, logged by the bucket's timer once it has room (`refusals.py`):
        by then this connection's session may be closing, so a network server's is not used."""
        self._append_refusal(error, peer, suppressed, at, own_session=self.runtimes is None)

    def _append_refusal(self, error: ForbiddenError, peer: str | None, suppressed: int, at: float,
                        own_session: bool = True) -> None:
        from ..methods.access import left_out, log_refusal

        session = self.session if own_session else None
        if session is not None:
            log_refusal(session.runtime.memory, error, peer, suppressed=suppressed, at=at)
        elif self.runtimes is not None and self.pinned_root is not None:
            runtime = self.runtimes.acquire(self.pinned_root)
            try:
                log_refusal(runtime.memory, error, peer, suppressed=suppressed, at=at)
            finally:
                self.runtimes.release(runtime)
        else:
            logger.warning("access refused: %s (%s)%s", error.message, peer or "unknown peer", left_out(suppressed))

    def request_limit(self) -> int:
        """limits.request_bytes of the workspace served (the default before `initialize`; the
        client's initialization settings over the default while the session is being built)."""
        if self.session is not None:
            return self.session.current_limits().request_bytes
        opening = self._opening
        settings = opening[1] if opening is not None else {}
        return DEFAULT_LIMITS.merged(settings.get("limits")).request_bytes

    def open_document_text(self, uri: str) -> str | None:
        """The text of an open definition document, from the editor's store (the event loop puts
        each version there as it arrives): methods run on workers, which never read pygls' workspace."""
        document = self.editor.store.get(uri) if self.editor is not None else None
        return document.text if document is not None else None

    # -- the event loop ---------------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stop_requested = asyncio.Event()

    def on_loop(self) -> bool:
        """Whether this thread is running the server's event loop."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:  # a worker's thread: no loop runs there
            return False

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the event loop thread (from any thread)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # closed between the check and the call: the client is gone
            loop.call_soon_threadsafe(fn, *args)

    def notify_threadsafe(self, method: str, params: Any) -> None:
        self.post(self.protocol.notify, method, params)

    def request_stop(self) -> None:
        if self.stop_requested is not None:
            self.post(self.stop_requested.set)

    def ask_llm(self, request: dict[str, Any]) -> dict[str, Any]:
        """Server-to-client `llm/complete`, from a worker thread: the client runs the model."""
        if self.loop is None:
            raise ContextAssemblyError("no client connection to ask llm/complete")
        async def ask() -> Any:  # on the event loop: the protocol's futures belong to it
            if self.protocol.gone:
                raise ClientGone("the client left: nobody to answer llm/complete")
            in_flight = self.protocol.in_flight  # (the connection is read on while the answer is awaited)
            msg_id = str(uuid.uuid4())
            with in_flight.asking(msg_id) if in_flight is not None else contextlib.nullcontext():
                return await self.protocol.send_request_async("llm/complete", request, msg_id=msg_id)

        future = asyncio.run_coroutine_threadsafe(ask(), self.loop)
        try:
            result = future.result(timeout=LLM_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError_(f"the client did not answer llm/complete within {LLM_TIMEOUT_S:.0f} s") from None
        except JsonRpcException as exc:
            if exc.code == METHOD_NOT_FOUND:  # the client offered models but has no handler after all
                from ..ingestion import LLMUnavailable

                raise LLMUnavailable(exc.message) from None
            raise ContextAssemblyError(f"llm/complete failed: {exc.message}", {"code": exc.code}) from None
        if not isinstance(result, dict):
            raise ContextAssemblyError("llm/complete must answer with an object")
        return result

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls shows errors outside requests as window/showMessage; an agent has no window: log them.
        # Errors of requests were answered to the requester already.
        if source is not FeatureRequestError:
            logger.error("%s: %s", getattr(source, "__name__", source), error)

    def close(self) -> None:
        """Stop taking work; the session closes once the work running now is done (a network
        connection's: the last connection's close shut the stores of requests still running)."""
        self.workers.shutdown(wait=False, cancel_futures=True)
        if isinstance(self.workers, ConnectionWorkers):
            self.workers.when_idle(self._close_session)
        else:
            self._close_session()

    def _close_session(self) -> None:
        with self._session_lock:
            self._opening = None
            if self.session is not None:
                self.session.close()
                self.session = None


# -- lifecycle -------------------------------------------------------------------------------------


def workspace_root(params: types.InitializeParams) -> Path | None:
    """rootUri, else workspaceFolders[0], else rootPath (SPEC §2)."""
    candidates = [params.root_uri, params.workspace_folders[0].uri if params.workspace_folders else None]
    for uri in candidates:
        if uri:
            path = to_fs_path(uri)
            if path:
                return Path(path)
    return Path(params.root_path) if params.root_path else None


def _places(pinned: Path | None, named: Path | None) -> Places:
    """The workspace: `--workspace` when given, else the client's root; in the client's spelling
    (symlinks kept: its documents are answered under its URIs), resolved here once. A pinned
    folder stays the one served whatever a link the client named points at later."""
    from ..workspace.places import Places  # late: not needed to answer before `initialize`

    if pinned is None:
        return Places.of(named or Path(os.getcwd()))
    if named is not None and _same_folder(named, pinned):
        return Places.named(named, pinned)
    return Places.of(pinned)


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.is_dir() and os.path.samefile(a, b)
    except OSError:
        return False


def llm_offered(params: types.InitializeParams) -> bool:
    """`initializationOptions.llm: true`, or `capabilities.experimental.contextAssembly.llm: true`."""
    options = params.initialization_options
    if isinstance(options, dict) and options.get(LLM_OPTION) is True:
        return True
    experimental = params.capabilities.experimental
    section = experimental.get("contextAssembly") if isinstance(experimental, dict) else None
    return isinstance(section, dict) and section.get(LLM_OPTION) is True


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("loading the workspace failed: %s", future.exception())


def _warm_up(server: ContextAssemblyServer) -> None:
    """Build the session, load and compile the definitions: before the first request. An editor (a
    client with text document capabilities) also gets the editor features imported; a sidecar
    client's first request imports only its method family (`tests/lsp/test_first_evaluation.py`),
    and the vector searches its memories make are prepared (`Runtime.prepare_searches`: only where
    the embedded database exists)."""
    session = server.require_session()
    workspace = session.workspace()
    capabilities = getattr(server.protocol, "client_capabilities", None)
    if getattr(capabilities, "text_document", None) is not None:
        server.require_editor()
    else:  # an agent's sidecar: its first assembly finds its searches ready
        session.runtime.prepare_searches(workspace)


def _register_lifecycle(server: ContextAssemblyServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: ContextAssemblyServer, params: types.InitializeParams) -> None:
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        ls.authenticate(options.get(TOKEN_OPTION))
        settings = options.get(SETTINGS_OPTION)
        encoding = ls.protocol.workspace.position_encoding
        ls.position_encoding = str(getattr(encoding, "value", encoding) or "utf-16")
        ls.open(_places(ls.pinned_root, workspace_root(params)), settings if isinstance(settings, dict) else {},
                llm_offered(params))

    @server.feature(types.INITIALIZED)
    async def initialized(ls: ContextAssemblyServer, params: types.InitializedParams) -> None:
        loop = asyncio.get_running_loop()
        warm_up = loop.run_in_executor(ls.workers, _warm_up, ls)
        warm_up.add_done_callback(_log_failure)
        for hook in ls.on_initialized:
            try:
                await hook(ls)
            except Exception:
                logger.exception("an initialized hook failed")


    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: ContextAssemblyServer, params: None) -> None:
        # pygls cancels whatever is still running once this returns: let requests already in flight
        # finish and answer first (for a while).
        me = asyncio.current_task()
        pending: list[Any] = [
            f for f in list(compat.pending_requests(ls.protocol).values())
            if isinstance(f, asyncio.Future) and f is not me and not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=SHUTDOWN_GRACE_S)


def build_server(workspace: Path | None = None, *, runtimes: SharedRuntimes | None = None,
                 tokens: dict[str, str] | None = None,
                 shared_workers: SharedWorkers | None = None) -> ContextAssemblyServer:
    """The server with every feature module registered (one per connection over TCP and WebSocket);
    the core reads `file:` URIs as pygls does."""
    from . import calls, config, features, watch

    uris.use_converter(to_fs_path)
    server = ContextAssemblyServer(workspace, runtimes=runtimes, tokens=tokens, shared_workers=shared_workers)
    _register_lifecycle(server)
    for feature in (calls, config, watch, features):
        feature.register(server)
    return server
