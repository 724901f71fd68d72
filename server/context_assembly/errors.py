"""Domain errors. Each carries the JSON-RPC code the sidecar answers with (SPEC §8)."""

from __future__ import annotations

import re
from typing import Any

# The schema layer's wording for an absent required property; an InvalidParams error names the
# property in its path (`/scope_variables`), so a client can point at what to add.
MISSING_PROPERTY = "missing required property '{}'"
_MISSING = re.compile(re.escape(MISSING_PROPERTY).replace(r"\{\}", "(.+)") + "$")


class ContextAssemblyError(Exception):
    code = -32603  # internal error

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data or {}


class InvalidParamsError(ContextAssemblyError):
    """Bad input: `errors` lists every problem as {path, message} (path is a JSON pointer)."""

    code = -32602

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        errors = [_naming_missing(e) for e in errors]
        super().__init__(message, {"errors": errors})
        self.errors = errors


def _naming_missing(error: dict[str, Any]) -> dict[str, Any]:
    """`{path: "", message: "missing required property 'x'"}` -> path `/x` (JSON-pointer escaped)."""
    found = _MISSING.match(str(error.get("message") or ""))
    if not found:
        return error
    segment = "/" + found.group(1).replace("~", "~0").replace("/", "~1")
    path = str(error.get("path") or "")
    return error if path.endswith(segment) else {**error, "path": path + segment}


class NotFoundError(ContextAssemblyError):
    code = -32001


class ConflictError(ContextAssemblyError):
    code = -32003


class ForbiddenError(ContextAssemblyError):
    """The caller's token does not allow this (or there is no valid token)."""

    code = -32004


class RequestFailedError(ContextAssemblyError):
    """A valid request the server will not carry out as asked (LSP RequestFailed: a rename the
    editor could not apply whole)."""

    code = -32803


class TimeoutError_(ContextAssemblyError):
    code = -32005


class StorageError(ContextAssemblyError):
    code = -32006


class CancelledError(ContextAssemblyError):
    """The caller cancelled the request (LSP RequestCancelled)."""

    code = -32800
