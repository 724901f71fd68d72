"""Who may call what: tokens and the access policy (README, "Running it for a team").

Tokens come from the environment (`CONTEXT_ASSEMBLY_TOKEN`, named `default`) or a token file
(`serve --token-file FILE`): one token on its first line (named `default`), or a JSON object
`{"tokens": {"<name>": "<token>"}}` naming each agent or role. A client presents its token in
`initialize` (`initializationOptions.token`); it is compared in constant time with every known one.

The optional policy is the `access` object of `.codebolt/context-assembly.json` (never the client's
configuration: a client cannot grant itself rights): `{"<name>": {"methods": [globs], "read":
[URI globs], "write": [URI globs]}}`. A name without an entry may do nothing; a missing list allows
everything of its kind. `read` governs `memory/read` and `memory/list`, `write` `memory/write` and
`memory/delete` (URI globs such as `kv://users/*`, so each store has its own patterns); `methods`
governs every custom method by name (`memory/*`, `contextAssembly/assemble`). Every refusal is a
-32004 error and an event `access.refused` in `log://access`.
"""

from __future__ import annotations

import fnmatch
import hmac
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from attrs import frozen

from ..errors import ContextAssemblyError

logger = logging.getLogger(__name__)

TOKEN_ENV = "CONTEXT_ASSEMBLY_TOKEN"
DEFAULT_NAME = "default"
LOG_URI = "log://access"
READS = {"memory/read": "uri", "memory/list": "prefix"}
WRITES = {"memory/write": "uri", "memory/delete": "uri"}


class ForbiddenError(ContextAssemblyError):
    """The caller's token does not allow this (or there is no valid token)."""

    code = -32004


@frozen
class Grant:
    """What one token name may do; None = everything of that kind."""

    name: str
    methods: tuple[str, ...] | None = None
    read: tuple[str, ...] | None = None
    write: tuple[str, ...] | None = None

    def allows_method(self, method: str) -> bool:
        return self.methods is None or any(fnmatch.fnmatchcase(method, p) for p in self.methods)

    def allows_uri(self, uri: str, patterns: tuple[str, ...] | None) -> bool:
        return patterns is None or any(fnmatch.fnmatchcase(uri, p) for p in patterns)


FULL = Grant(DEFAULT_NAME)


def load_tokens(token_file: Path | None = None, environ: dict[str, str] | None = None) -> dict[str, str]:
    """name -> token from the file and the environment; empty when none is configured."""
    env = os.environ if environ is None else environ
    tokens: dict[str, str] = {}
    if env.get(TOKEN_ENV, "").strip():
        tokens[DEFAULT_NAME] = env[TOKEN_ENV].strip()
    if token_file is not None:
        text = token_file.read_text(encoding="utf-8")
        if text.lstrip().startswith("{"):
            named = json.loads(text).get("tokens")
            if not isinstance(named, dict) or not all(isinstance(v, str) and v for v in named.values()):
                raise ValueError(f"{token_file}: expected {{\"tokens\": {{name: token}}}}")
            tokens.update({str(name): value for name, value in named.items()})
        elif text.strip():
            tokens[DEFAULT_NAME] = text.strip().splitlines()[0].strip()
    return tokens


def token_name(tokens: dict[str, str], presented: Any) -> str | None:
    """The name of the token presented, compared in constant time with every known token."""
    if not isinstance(presented, str) or not presented:
        return None
    given = presented.encode("utf-8", "surrogatepass")
    found = None
    for name, token in tokens.items():
        if hmac.compare_digest(given, token.encode("utf-8")) and found is None:
            found = name
    return found


def grant_for(policy: Any, name: str) -> Grant | None:
    """The grant of `name` under the settings' `access` policy (FULL when there is no policy)."""
    if not isinstance(policy, dict) or not policy:
        return Grant(name)
    entry = policy.get(name)
    if not isinstance(entry, dict):
        return None

    def patterns(key: str) -> tuple[str, ...] | None:
        value = entry.get(key)
        return tuple(p for p in value if isinstance(p, str)) if isinstance(value, list) else None

    return Grant(name, patterns("methods"), patterns("read"), patterns("write"))


def check_call(grant: Grant | None, name: str, method: str, params: Any) -> None:
    """Raise ForbiddenError when the grant does not cover this call."""
    if grant is None:
        raise ForbiddenError(f"the token {name!r} has no entry in the access policy",
                             {"method": method, "token": name})
    if not grant.allows_method(method):
        raise ForbiddenError(f"the token {name!r} may not call {method}", {"method": method, "token": name})
    for table, patterns, mode in ((READS, grant.read, "read"), (WRITES, grant.write, "write")):
        key = table.get(method)
        if key is None:
            continue
        uri = params.get(key) if isinstance(params, dict) else None
        if isinstance(uri, str) and not grant.allows_uri(uri, patterns):
            raise ForbiddenError(f"the token {name!r} may not {mode} {uri}",
                                 {"method": method, "token": name, "uri": uri, "mode": mode})


def log_refusal(memory: Any, error: ForbiddenError, peer: str | None = None) -> None:
    """Append the refusal to `log://access` (best effort: a failing log never hides the refusal)."""
    payload = {**error.data, "message": error.message, "peer": peer, "at": time.time()}
    logger.warning("access refused: %s (%s)", error.message, peer or "unknown peer")
    try:
        memory.write(LOG_URI, {"event_type": "access.refused", "payload": payload})
    except Exception as exc:  # the refusal stands whatever the log does
        logger.warning("could not log the refusal: %s", exc)
