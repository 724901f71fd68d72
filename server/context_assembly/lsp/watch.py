"""Re-reading the workspace when `.codebolt/` changes (SPEC §9).

The server asks the client to watch `**/.codebolt/**` (dynamic registration, when the client offers
it); on `workspace/didChangeWatchedFiles` for a file there, the session re-reads what changed (off the
event loop) and every `on_workspace_changed` listener runs (editor features republish diagnostics).
The loader also notices changed files by themselves on the next request, so a client that cannot
watch files loses nothing but eagerness.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from lsprotocol import types

from .server import ContextAssemblyServer

logger = logging.getLogger(__name__)

GLOB = "**/.codebolt/**"
MARKER = "/.codebolt/"
NOTES = "/.codebolt/memory/"


def can_register(server: ContextAssemblyServer) -> bool:
    capabilities = getattr(server.protocol, "client_capabilities", None)
    workspace = capabilities.workspace if capabilities is not None else None
    watched = workspace.did_change_watched_files if workspace else None
    return bool(watched and watched.dynamic_registration)


async def register_watcher(server: ContextAssemblyServer) -> None:
    if not can_register(server):
        return
    options = types.DidChangeWatchedFilesRegistrationOptions(watchers=[types.FileSystemWatcher(glob_pattern=GLOB)])
    registration = types.Registration(id=f"context-assembly-watch-{uuid.uuid4().hex[:8]}",
                                      method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options)
    try:
        await server.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
    except Exception as exc:
        logger.warning("client/registerCapability failed: %s", exc)
        return
    server.watching = True
    session = await server.open_session()
    if session is not None:  # markdown notes: stamped by folder mtimes and these events
        session.runtime.memory.notes.watch()


def reload(server: ContextAssemblyServer) -> None:
    session = server.session
    if session is None:
        return
    session.reload()
    for listener in list(server.on_workspace_changed):
        try:
            listener(session)
        except Exception:
            logger.exception("a workspace listener failed")


def register(server: ContextAssemblyServer) -> None:
    server.on_initialized.append(register_watcher)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change(ls: ContextAssemblyServer, params: types.DidChangeWatchedFilesParams) -> None:
        if ls.session is not None and any(NOTES in change.uri for change in params.changes):
            ls.session.runtime.memory.notes.changed()
        if any(MARKER in change.uri for change in params.changes):
            await asyncio.get_running_loop().run_in_executor(ls.workers, reload, ls)
