"""Settings (`.codebolt/context-assembly.json`, overridable by LSP `workspace/configuration`)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import attrs
import cattrs
from attrs import define, field

from ..limits import Limits
from ..model.converter import structure
from ..model.problems import Problem
from ..registry.ladder import STRATEGY_NAMES
from ..registry.values import whole_number

TOKENIZERS = ("estimate", "cl100k", "o200k")


@define
class StoreSettings:
    backend: str = "embedded"
    dsn: str | None = None  # postgres: the connection string (CONTEXT_ASSEMBLY_DSN overrides it)
    project: str | None = None  # postgres: the project key (default: the workspace folder's name)
    invalidation: str = "notify"  # postgres: generations pushed by LISTEN/NOTIFY, or "read" before each use
    ef_search: int = 100  # postgres: HNSW candidates per vector search (recall against speed)


@define
class BudgetSettings:
    """The budget ladder (registry/ladder.py) and the caps it works with (README "When the budget is tight")."""

    ladder: list[str] = field(factory=lambda: list(STRATEGY_NAMES))  # order; a name left out is switched off
    relevance_floor: float = 0.2  # scored hits below it go first when over budget
    keep_recent_turns: int = 4
    summarize_above_tokens: int = 300
    summary_tokens: int = 120
    summary_timeout_ms: int = 3000
    min_truncated_tokens: int = 8  # a cut shorter than this is a drop
    warnings_max_tokens: int = 200  # the warnings section's own cap
    vector_min_score: float = 0.2  # the floor of a vector:// collection used directly as a reference


@define
class ToolSettings:
    """Tool schemas passed in a request: how many are kept and how relevant they must be."""

    top_k: int = 8
    min_score: float = 0.1


@define
class Settings:
    max_tokens: int | None = None  # default budget when a request sets none
    tokenizer: str = "estimate"  # "estimate" = ceil(chars / 4), as in the seeds
    pipeline_timeout_ms: int = 5000
    cache_ttl_s: float = 30.0
    snapshots: bool = False
    stores: StoreSettings = field(factory=StoreSettings)
    diagnostics_debounce_ms: int = 300
    budget: BudgetSettings = field(factory=BudgetSettings)
    tools: ToolSettings = field(factory=ToolSettings)
    limits: Limits = field(factory=Limits)
    access: dict[str, Any] = field(factory=dict)  # token name -> {methods, read, write} (file only)

    def merged(self, overrides: dict[str, Any]) -> Settings:
        """These settings with the known keys of `overrides` applied (LSP configuration wins).

        Values are read by the model's converter, as the schema types them: a whole number written
        `1.0` (a schema integer) becomes 1, since a float `keep_recent_turns` crashed every
        over-budget assembly. A value of another type is a TypeError naming its path."""
        base = attrs.asdict(self)
        for key, value in overrides.items():
            if key in base and value is not None:
                base[key] = {**base[key], **value} if isinstance(base[key], dict) and isinstance(value, dict) \
                    else value
        limits = Limits().merged(base.pop("limits"))  # (`usable` made whole floats integers)
        try:
            settings = structure(base, Settings)
        except cattrs.BaseValidationError as exc:
            raise TypeError("; ".join(cattrs.transform_error(exc, path="settings"))) from None
        return attrs.evolve(settings, limits=limits)


def _whole(value: Any) -> Any:
    """A limit written as a whole float (`100.0`) as the integer `Limits.merged` takes."""
    number = whole_number(value)
    return value if number is None else number


WHOLE_KEYS = frozenset({"stores", "access"})  # refused whole on any problem inside (strict: see the README)


def usable(value: dict[str, Any], errors: list[dict[str, str]]) -> dict[str, Any]:
    """`value` without what the schema refuses, key by key: a top-level key, or the second-level key
    the problem is under (one bad key under `budget` dropped every budget setting, so a ladder set
    to `["truncate"]` silently summarised again); `stores` and `access` whole. Limits written as
    whole floats come out as integers (the transport reads a client's limits straight from here)."""
    good = {k: v for k, v in value.items() if k != "$schema"}
    for error in errors:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in error["path"].split("/")[1:]]
        if not parts or parts[0] not in good:
            continue
        if len(parts) == 1 or parts[0] in WHOLE_KEYS or not isinstance(good[parts[0]], dict):
            good.pop(parts[0])
        else:
            good[parts[0]] = {k: v for k, v in good[parts[0]].items() if k != parts[1]}
    if isinstance(good.get("limits"), dict):  # every limit is an integer: read without the settings too
        good["limits"] = {name: _whole(value) for name, value in good["limits"].items()}
    return good


def load_settings(path: Path) -> tuple[Settings, list[Problem]]:
    """Settings from the file, or the defaults; a broken file is reported and ignored key by key."""
    from ..schemas import validation_errors  # late: the schema layer imports the registries only

    if not path.is_file():
        return Settings(), []
    from ..documents import parse_json

    document = parse_json(path.read_text(encoding="utf-8", errors="replace"))
    if document.value is None or not isinstance(document.value, dict):
        return Settings(), [Problem("settings file is not a JSON object", "syntax", path="")]
    errors = validation_errors("settings", document.value)
    problems = [Problem(e["message"], "schema", path=e["path"]) for e in errors]
    good = usable(document.value, errors)
    try:
        return Settings().merged(good), problems
    except TypeError as exc:
        return Settings(), [*problems, Problem(str(exc), "schema")]


_UNKNOWN = re.compile(r"unknown propert(?:y|ies) ((?:'[^']*'(?:, )?)+)")


def store_problems(problems: list[Problem]) -> list[str]:
    """The settings problems that keep the stores from opening (under `stores`), as "path: message",
    an unknown key named by its own path (with the closest known key: `/stores/dns` -> `dsn`)."""
    found = []
    for problem in problems:
        if problem.path != "/stores" and not problem.path.startswith("/stores/"):
            continue
        unknown = _UNKNOWN.match(problem.message) if problem.path == "/stores" else None
        if unknown is None:
            found.append(f"{problem.path}: {problem.message}")
            continue
        known = [f.name for f in attrs.fields(StoreSettings)]
        for name in re.findall(r"'([^']*)'", unknown.group(1)):
            close = difflib.get_close_matches(name, known, 1)
            hint = f"did you mean '{close[0]}'?" if close else "allowed: " + ", ".join(known)
            found.append(f"/stores/{name.replace('~', '~0').replace('/', '~1')}: unknown key ({hint})")
    return found
