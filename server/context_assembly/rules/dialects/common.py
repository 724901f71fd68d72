"""What the dialect normalisers share: the normalised rule record, ids and problems."""

from __future__ import annotations

import re
from typing import Any

from attrs import define

from ...model.problems import Problem, Severity
from ...model.rules import UNREADABLE


@define
class NormalisedRule:
    """A canonical rule dict plus where it came from, so problems point into the original file."""

    rule: dict[str, Any]
    pointer: str  # the rule in the source document
    conditions_pointer: str  # where its conditions live in the source document
    conditions_are_list: bool  # False: one condition object sits at conditions_pointer itself

    def condition_pointer(self, index: int) -> str:
        return f"{self.conditions_pointer}/{index}" if self.conditions_are_list else self.conditions_pointer


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def rule_id(name: Any, stem: str, index: int, count: int) -> str:
    """A stable id: the rule's name when it has one, else the file stem (+ index when several)."""
    if isinstance(name, str) and name.strip():
        slug = _SLUG.sub("-", name.strip()).strip("-")
        if slug:
            return slug
    return stem if count == 1 else f"{stem}-{index + 1}"


def unreadable(raw: Any, reason: str) -> dict[str, Any]:
    return {UNREADABLE: raw, "reason": reason}


def dialect_problem(pointer: str, message: str) -> Problem:
    return Problem(message=message, code="dialect", severity=Severity.ERROR, path=pointer)
