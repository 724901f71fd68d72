"""A problem found in a definition file or a request: where it is, how bad, and a stable code."""

from __future__ import annotations

import enum
from typing import Any

from attrs import define, field


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


@define
class Problem:
    message: str
    code: str
    severity: Severity = Severity.ERROR
    path: str = ""  # JSON pointer into the document ("" = the whole document)
    file: str | None = None  # workspace-relative path, when the problem is in a file
    line: int | None = None  # 1-based, for people and the CLI
    column: int | None = None  # 1-based, in characters
    end_line: int | None = None
    end_column: int | None = None
    data: dict[str, Any] = field(factory=dict)  # e.g. {"candidates": [...]} for did-you-mean
    related: list[Problem] = field(factory=list)  # other places (a duplicate's first definition)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR
