"""Who may call what: tokens and the access policy (README, "Running it for a team").

Tokens come from the environment (`CONTEXT_ASSEMBLY_TOKEN`, named `default`) or a token file
(`serve --token-file FILE`): one token on its first line (named `default`), or a JSON object
`{"tokens": {"<name>": "<token>"}}` naming each agent or role. A client presents its token in
`initialize` (`initializationOptions.token`); it is compared in constant time with every known one.

The optional policy is the `access` object of `.codebolt/context-assembly.json` (never the client's
configuration: a client cannot grant itself rights): `{"<name>": {"methods": [globs], "read":
[URI patterns], "write": [URI patterns]}}`. A name without an entry may do nothing; a missing list
allows everything of its kind; a policy the settings file gets wrong allows nothing (it fails
closed, saying why). `methods` are shell globs over method names (`memory/*`). URI patterns are the
reference patterns of rules (`rules/globs.py`: `*` within one segment, `**` across segments, and
`X/**` covers the container X itself), matched against every spelling of the address (`kv://users/u-1` is also
`kv://default/users/u-1`). Every refusal is a -32004 error and an event `access.refused` in
`log://access` (a sidecar logs them at a bounded rate: `lsp/refusals.py`).

A session's `Access` is applied where memory is touched: `GuardedMemory` checks each read, write,
delete and list of the URI layer (the `memory/*` methods, `endTurn`, ingestion's routes), and the
pipelines and direct references read and keep only what the token may read (`readable`), saying
nothing of the rest.
"""

from __future__ import annotations

import contextvars
import fnmatch
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import define, field, frozen

from ..errors import ConflictError, ContextAssemblyError, ForbiddenError, InvalidParamsError
from ..limits import check_value_size
from ..rules.globs import reference_matches
from ..stores.checks import check_append_key
from ..stores.uri import DEFAULT, parse_uri, render

logger = logging.getLogger(__name__)

TOKEN_ENV = "CONTEXT_ASSEMBLY_TOKEN"
DEFAULT_NAME = "default"
LOG_URI = "log://access"
# The server's own audit logs: what it records there (ingestion runs, refusals, the idempotency
# records a retry is answered from) must not be forgeable by a client's write or a route.
RESERVED_LOGS = frozenset({"access", "ingestion"})
SETTINGS_FILE = ".codebolt/context-assembly.json"

# The method being served on this thread, for the refusal log of checks deep in a call (ingestion routes).
current_method: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_method", default=None)


# -- patterns --------------------------------------------------------------------------------------


def uri_spellings(uri: str) -> list[str]:
    """Every way of writing the address `uri` names (query left out: it narrows a read, never widens
    it). A text that does not parse is matched as written."""
    try:
        parsed = parse_uri(uri, pointer="")
    except ContextAssemblyError:
        return [uri]
    forms = [render(parsed.scheme, parsed.parts, pointer=parsed.fragment)]
    if parsed.fragment:  # a pointer into a document is covered by a pattern over the document
        forms.append(render(parsed.scheme, parsed.parts))
    if parsed.scheme == "kv":  # the shortest form is rendered above; the longer ones name the same entry
        instance, namespace, key = (_kv_segment(part) for part in parsed.parts)
        if parsed.parts[0] == DEFAULT:
            forms.append(f"kv://{namespace}/{key}")
        forms.append(f"kv://{instance}/{namespace}/{key}")
    return list(dict.fromkeys(forms))


def _kv_segment(part: str) -> str:
    return render("kv", (DEFAULT, DEFAULT, part))[len("kv://"):]


# Schemes whose shorter URI is the container of the longer ones (a collection and its documents, a
# thread and its keys): `X/**` covers X itself. Not kv://, markdown:// or graph://, where
# `kv://notes/a` is an entry of its own, not the container of `kv://notes/a/b`.
CONTAINERS = frozenset({"vector", "working", "log", "episodic", "blob", "file"})


def pattern_covers(pattern: str, uri: str) -> bool:
    """One URI pattern against one spelling of an address."""
    if reference_matches(pattern, uri):
        return True
    return pattern.endswith("/**") and uri.split("://", 1)[0] in CONTAINERS and reference_matches(pattern[:-3], uri)


# -- grants ----------------------------------------------------------------------------------------


@frozen
class Grant:
    """What one token name may do; None = everything of that kind."""

    name: str
    methods: tuple[str, ...] | None = None
    read: tuple[str, ...] | None = None
    write: tuple[str, ...] | None = None
    problem: str | None = None  # the policy is broken: nothing is allowed, and this says why

    def allows_method(self, method: str) -> bool:
        return self.methods is None or any(fnmatch.fnmatchcase(method, p) for p in self.methods)


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


def grant_for(policy: Any, name: str, problem: str | None = None) -> Grant | None:
    """The grant of `name` under the settings' `access` policy (everything when there is no policy,
    nothing when `problem` says the policy could not be read)."""
    if problem is not None:
        return Grant(name, (), (), (), problem)
    if not isinstance(policy, dict) or not policy:
        return Grant(name)
    entry = policy.get(name)
    if not isinstance(entry, dict):
        return None

    def patterns(key: str) -> tuple[str, ...] | None:
        if key not in entry:
            return None
        value = entry[key]
        return tuple(p for p in value if isinstance(p, str)) if isinstance(value, list) else ()

    return Grant(name, patterns("methods"), patterns("read"), patterns("write"))


def policy_problem(problems: Any) -> str | None:
    """Why the settings file's access policy cannot be trusted (its problems, as the loader reports
    them), or None."""
    for problem in problems or ():
        if getattr(problem, "file", None) != SETTINGS_FILE:
            continue
        path = getattr(problem, "path", "")
        if path.startswith("/access") or getattr(problem, "code", "") == "syntax":
            where = f" at {path}" if path else ""
            return f"the access policy in {SETTINGS_FILE} is invalid{where}: {problem.message}"
    return None


def settings_policy(workspace: Callable[[], Any]) -> Callable[[], tuple[Any, str | None]]:
    """The policy as `workspace()` has it now: its settings' `access`, and what is wrong with it."""
    def policy() -> tuple[Any, str | None]:
        current = workspace()
        return current.settings.access, policy_problem(current.problems)

    return policy


# -- one session's rights --------------------------------------------------------------------------

Refused = Callable[[ForbiddenError], None]


def _log_nowhere(error: ForbiddenError) -> None:
    logger.warning("access refused: %s", error.message)


@define
class Access:
    """A session's rights: the token's name, the settings it reads the policy from (on every check,
    so an edited policy applies at once) and where refusals are logged. `name` None: unrestricted
    (stdio, or no token configured)."""

    name: str | None = None
    policy: Callable[[], tuple[Any, str | None]] = lambda: ({}, None)  # (access settings, problem)
    refused: Refused = _log_nowhere
    real_file: RealFile | None = None  # the session's: where a workspace path really is (links followed)

    @property
    def restricted(self) -> bool:
        return self.name is not None

    def grant(self) -> Grant | None:
        if self.name is None:
            return FULL
        policy, problem = self.policy()
        return grant_for(policy, self.name, problem)

    def _refuse(self, message: str, **data: Any) -> ForbiddenError:
        error = ForbiddenError(message, {"method": current_method.get(), "token": self.name, **data})
        self.refused(error)
        return error

    def _granted(self) -> Grant:
        grant = self.grant()
        if grant is None:
            raise self._refuse(f"the token {self.name!r} has no entry in the access policy")
        if grant.problem is not None:
            raise self._refuse(grant.problem)
        return grant

    def check_method(self, method: str) -> None:
        """Raise (and log) when the token may not call `method` at all."""
        if self.name is None:
            return
        if not self._granted().allows_method(method):
            raise self._refuse(f"the token {self.name!r} may not call {method}")

    def check_uri(self, mode: str, uri: str) -> None:
        """Raise (and log) when the token may not `mode` ("read" or "write") the URI."""
        if self.name is None:
            return
        grant = self._granted()
        patterns = grant.read if mode == "read" else grant.write
        if patterns is not None and not ReadPatterns(patterns, self.real_file)(uri):
            raise self._refuse(f"the token {self.name!r} may not {mode} {uri}", uri=uri, mode=mode)

    def readable(self) -> ReadPatterns | None:
        """A test of item sources for this call (None: everything is readable). A broken policy or a
        name without an entry reads nothing."""
        if self.name is None:
            return None
        grant = self.grant()
        if grant is None or grant.problem is not None:
            return ReadPatterns(())
        if grant.read is None:
            return None
        return ReadPatterns(grant.read, self.real_file)


RealFile = Callable[[str], "str | None"]  # workspace-relative path -> where it really is (None: outside)


@frozen
class ReadPatterns:
    """A restricted caller's test of item sources (`Readable`). Compared and hashed by its patterns:
    a pipeline run trimmed by it is cached under it, and shared by every caller with the same ones.
    A `file://` path must be covered both as written and where its links lead (`real_file`): a link
    in a readable folder to a file outside it reads that file."""

    patterns: tuple[str, ...]
    real_file: RealFile | None = field(default=None, eq=False, repr=False)

    def __call__(self, source: str) -> bool:
        if not self._covers(source):
            return False
        if self.real_file is None or source[:7].lower() != "file://":
            return True
        try:
            path = parse_uri(source, pointer="").parts[0]
        except ContextAssemblyError:
            return True  # (no store reads it)
        real = self.real_file(path)
        return real is None or real == path or self._covers(render("file", (real,)))

    def _covers(self, source: str) -> bool:
        return any(pattern_covers(p, s) for s in uri_spellings(source) for p in self.patterns)


UNRESTRICTED = Access()


def log_refusal(memory: Any, error: ForbiddenError, peer: str | None = None, *, suppressed: int = 0,
                at: float | None = None) -> None:
    """Append the refusal to `log://access` (best effort: a failing log never hides the refusal).
    `suppressed`: refusals left out since the previous one logged (the server's rate limit,
    `lsp/refusals.py`), in the payload when there were any; `at`: when it was refused (now)."""
    payload = {**error.data, "message": error.message, "peer": peer, "at": time.time() if at is None else at,
               **({"suppressed": suppressed} if suppressed else {})}
    logger.warning("access refused: %s (%s)%s", error.message, peer or "unknown peer", left_out(suppressed))
    try:
        memory.write(LOG_URI, {"event_type": "access.refused", "payload": payload})
    except Exception as exc:  # the refusal stands whatever the log does
        logger.warning("could not log the refusal: %s", exc)


def left_out(suppressed: int) -> str:
    """The note a refusal's warning ends with when refusals before it were not logged."""
    return f"; {suppressed} more refused since the previous one logged (not logged: rate limit)" if suppressed else ""


def owned_key(name: str, key: str) -> str:
    """The idempotency key a token's append is stored under: its own, whatever another token sends
    (opaque and short, so any key the caller may send fits where the stores keep keys)."""
    return "token:" + hashlib.sha256(json.dumps([name, key]).encode("utf-8")).hexdigest()


def _is_pointer(uri: str) -> bool:
    """A `json://doc#/pointer` URI: a write into part of a document."""
    if uri[:7].lower() != "json://" or "#" not in uri:
        return False
    return bool(parse_uri(uri).fragment)


def _not_reserved(uri: str) -> None:
    if uri[:6].lower() != "log://":  # (the scheme is read case-blind): only a log can be reserved
        return
    parsed = parse_uri(uri)
    if parsed.scheme == "log" and parsed.parts[0] in RESERVED_LOGS:
        message = f"log://{parsed.parts[0]} is the server's own log: it is read, never written by a client"
        raise InvalidParamsError(message, [{"path": "/uri", "message": message}])


class GuardedMemory:
    """The URI layer as one session may use it: every read, write, delete and clear is checked
    against the session's access, and a list shows only what the token may read. Everything else
    passes through (the stores themselves, for the ingestion engine's own log and settings)."""

    def __init__(self, memory: Callable[[], Any], access: Callable[[], Access]) -> None:
        self._router = memory  # the runtime's URI layer, built on first use (a rules-only session never does)
        self._access = access

    @property
    def _memory(self) -> Any:
        return self._router()

    def read(self, uri: str) -> dict[str, Any]:
        self._access().check_uri("read", uri)
        return dict(self._memory.read(uri))

    def write(self, uri: str, value: Any, *, key: str | None = None, same_value: bool = True) -> dict[str, Any]:
        self._access().check_uri("write", uri)
        if _is_pointer(uri) and not self._reads(uri):
            # a pointer write patches the document: whether it exists, and what its path holds, is
            # in the answer (an error or not), so it takes read as well as write
            self._access().check_uri("read", uri)
        _not_reserved(uri)
        check_value_size(value)  # limits.write_value_bytes of the call: memory/write, and every route of an ingestion
        name = self._access().name
        if key is None or name is None:
            return dict(self._memory.write(uri, value, key=key, same_value=same_value))
        check_append_key(key)
        try:  # a token's keys are its own: another's same key told it whether that was used, and for what
            return dict(self._memory.write(uri, value, key=owned_key(name, key), same_value=same_value))
        except ConflictError as exc:
            raise ConflictError(f"idempotency key {key!r} was already used for another value in {uri}: send a new "
                                "key for a new append", {**exc.data, "idempotency_key": key}) from None

    def delete(self, uri: str) -> dict[str, Any]:
        self._access().check_uri("write", uri)
        result = dict(self._memory.delete(uri))
        if not self._reads(uri):  # told nothing of what was there: the URI holds nothing now, as asked
            result["deleted"] = True
        return result

    def _reads(self, uri: str) -> bool:
        readable = self._access().readable()
        return readable is None or readable(uri)

    def list(self, prefix: str, *, limit: int | None = None) -> dict[str, Any]:
        readable = self._access().readable()
        if readable is None:
            return dict(self._memory.list(prefix, limit=limit))
        items = [item for item in self._memory.list(prefix)["items"] if readable(str(item.get("uri")))]
        return {"items": items if limit is None else items[:limit]}

    def clear_working(self, thread_id: str) -> int | None:
        """How many keys were cleared; None for a token that may not read the thread (the count
        would tell it what the thread held)."""
        thread = render("working", (thread_id,))
        self._access().check_uri("write", thread)
        cleared = int(self._memory.clear_working(thread_id))
        return cleared if self._reads(thread) else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)
