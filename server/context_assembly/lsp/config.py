"""Settings from the client (SPEC §9): `.codebolt/context-assembly.json` is the base (the workspace
loader reads it); on top come `initializationOptions.settings`, then the `workspace/configuration`
section `contextAssembly` when the client supports pulling it — at `initialized` and again on every
`workspace/didChangeConfiguration`. A client that cannot be asked may push the section in the
notification's `settings` instead. Keys the settings schema refuses are logged and ignored one by one.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types

from .protocol import ClientGone
from .server import ContextAssemblyServer

logger = logging.getLogger(__name__)

SECTION = "contextAssembly"


def can_pull(server: ContextAssemblyServer) -> bool:
    capabilities = getattr(server.protocol, "client_capabilities", None)
    workspace = capabilities.workspace if capabilities is not None else None
    return bool(workspace and workspace.configuration)


async def apply(server: ContextAssemblyServer, section: Any) -> None:
    session = await server.open_session()
    if session is None:
        return
    overrides = {**server.initial_settings, **(section if isinstance(section, dict) else {})}
    for problem in session.set_settings(overrides):
        logger.warning("setting %s ignored: %s", problem.path or "", problem.message)


async def pull(server: ContextAssemblyServer) -> None:
    if not can_pull(server):
        return
    try:
        result = await server.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)]))
    except ClientGone:  # (left meanwhile: nothing to configure)
        return
    except Exception as exc:
        logger.warning("workspace/configuration failed: %s", exc)
        return
    await apply(server, result[0] if result else None)


def register(server: ContextAssemblyServer) -> None:
    server.on_initialized.append(pull)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change(ls: ContextAssemblyServer, params: types.DidChangeConfigurationParams) -> None:
        if can_pull(ls):
            await pull(ls)
        elif isinstance(params.settings, dict) and SECTION in params.settings:
            await apply(ls, params.settings[SECTION])
