"""Domain errors. Each carries the JSON-RPC code the sidecar answers with (SPEC §8)."""

from __future__ import annotations

from typing import Any


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
        super().__init__(message, {"errors": errors})
        self.errors = errors


class NotFoundError(ContextAssemblyError):
    code = -32001


class ConflictError(ContextAssemblyError):
    code = -32003


class TimeoutError_(ContextAssemblyError):
    code = -32005


class StorageError(ContextAssemblyError):
    code = -32006


class CancelledError(ContextAssemblyError):
    """The caller cancelled the request (LSP RequestCancelled)."""

    code = -32800
